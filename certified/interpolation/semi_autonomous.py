"""Variant B: semi-autonomous interpolation, ``w_i`` and ``a_i`` constant in time and only the
biases ``b_i(t)`` switching (theorems.md §3, row B; proofs/interpolation_variants.md
#semi-autonomous).

* Obstruction: ``Φ_T(x) − x = Σ_i w_i ∫_0^T σ(a_i·x(t) + b_i(t)) dt ∈ span{w_1..w_p}`` for
  every x and every activation, so if the displacements ``y_n − x_n`` span a space of
  dimension > p, *no* such schedule of width p interpolates. :func:`check_semi_autonomous`
  returns REFUTED with an exact witness: ``p + 1`` rows and columns of ``Y − X`` whose minor
  has a nonzero determinant. :func:`refuting_dataset` exhibits data with ``rank = min(d, N)``,
  which refutes the "for all data" statement whenever ``p < min(d, N)``.
* Construction for ``p >= 2d`` (ours; the paper's for B is not in what we have): phase 1 uses
  ``m = ⌊p/(2d)⌋`` pairs of neurons per direction ``w_k = e_k − u_k e_0`` (k = 1..d−1), all
  with normal u; a pair ``λ w_k [(u·x − κ₁)_+ − (u·x − κ₂)_+]`` with both kinks in one gap of
  the sorted ``u·x_n`` shifts every point above the gap by ``τλ(κ₂ − κ₁) w_k`` and no point
  below it: choosing the kinks (the biases) sets any shift. Phase 2 does the same with normal
  v ⊥ u and directions ±u. Unused neurons are switched off by a bias below every value they
  see. ``L = 2⌈N/m⌉ − 1`` switches; exact in rational arithmetic.
* For ``d <= p < 2d`` no construction is implemented: UNDECIDED with that reason.

:func:`replay_semi_autonomous` replays such schedules exactly: in each piece the neurons that
are positive somewhere must be laminar (shared normal, ``w ⊥ a``), and every other neuron must
be ``<= 0`` at every point at both ends of the piece (affine in t, hence throughout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from certified.errors import InputError, ShapeError
from certified.interpolation._variant_common import (
    as_points,
    check_distinct,
    dot,
    positive_time,
    require_dimension_two,
)
from certified.models import Activation, Piece, Schedule

__all__ = [
    "SemiAutonomousVerdict",
    "check_semi_autonomous",
    "construct_semi_autonomous",
    "displacement_rank_witness",
    "is_semi_autonomous",
    "refuting_dataset",
    "replay_semi_autonomous",
]

_ZERO = flint.fmpq(0)


@dataclass(frozen=True)
class SemiAutonomousVerdict:
    """Outcome of :func:`check_semi_autonomous`.

    Attributes
    ----------
    verdict : {"VERIFIED", "REFUTED", "UNDECIDED"}
        VERIFIED: ``schedule`` is semi-autonomous of width <= p and interpolates exactly;
        REFUTED: no semi-autonomous schedule of width p interpolates these data;
        UNDECIDED: neither (``message`` says why).
    width : int
        p.
    rank : int
        Exact rank of the displacement matrix ``Y − X``.
    witness : (rows, cols) or None
        REFUTED: ``p + 1`` point indices and coordinates whose minor of ``Y − X`` is nonzero.
    determinant : flint.fmpq or None
        That minor (exact, nonzero).
    schedule : Schedule or None
    switches, formula_switches : int or None
        L of ``schedule`` and ``2⌈N/p⌉ − 1``.
    message : str

    Guarantee: REFUTED is exact (the minor proves rank > p); VERIFIED is exact
    (:func:`replay_semi_autonomous`).
    """

    verdict: str
    width: int
    rank: int
    witness: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    determinant: flint.fmpq | None = None
    schedule: Schedule | None = None
    switches: int | None = None
    formula_switches: int | None = None
    message: str = ""


def _width(width: Any) -> int:
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise InputError(f"width: {width!r} is not an integer >= 1; give p >= 1 neurons")
    return int(width)


def _pairs(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
    Xq = as_points(X, "X")
    Yq = as_points(Y, "Y", Xq.shape[1])
    if Yq.shape[0] != Xq.shape[0]:
        raise ShapeError(
            f"Y: {Yq.shape[0]} targets for {Xq.shape[0]} points; give one target per point"
        )
    check_distinct(Xq, "X")
    check_distinct(Yq, "Y")
    return Xq, Yq


def displacement_rank_witness(
    X: Any, Y: Any, size: int | None = None
) -> tuple[int, tuple[int, ...], tuple[int, ...], flint.fmpq]:
    """Exact rank r of ``D = Y − X``, and ``k = min(r, size)`` rows and k columns of D whose
    k×k minor is nonzero (``size`` None: k = r).

    Rows are chosen greedily among linearly independent rows (any k of them are independent),
    then k columns greedily for those rows (their k×d matrix has rank k).

    Guarantee: exact (the returned determinant is the exact, nonzero minor).
    """
    Xq = as_points(X, "X")
    Yq = as_points(Y, "Y", Xq.shape[1])
    D = Yq - Xq
    rows: list[int] = []
    for n in range(D.shape[0]):
        cand = rows + [n]
        if flint.fmpq_mat([list(D[i]) for i in cand]).rank() == len(cand):
            rows = cand
            if len(rows) == D.shape[1]:
                break
    rank = len(rows)
    rows = rows[: rank if size is None else min(rank, size)]
    cols: list[int] = []
    for k in range(D.shape[1]):
        if len(cols) == len(rows):
            break
        cand = cols + [k]
        if flint.fmpq_mat([[D[i, c] for c in cand] for i in rows]).rank() == len(cand):
            cols = cand
    det = flint.fmpq_mat([[D[i, c] for c in cols] for i in rows]).det() if rows else flint.fmpq(1)
    return rank, tuple(rows), tuple(cols), det


def refuting_dataset(width: int, d: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer data (x's and y's pairwise distinct) whose displacements have rank
    ``min(d, N)``; for ``width < min(d, N)`` they refute the semi-autonomous statement.

    ``x_n = 3n e_0`` and ``y_n = x_n + e_{n mod d}`` (the first coordinates 3n and 3n + 1 never
    coincide, so the y's are distinct).

    Guarantee: exact (object arrays of fmpq).
    """
    _width(width)
    if d < 1 or N < 1:
        raise InputError(f"d, N: need d >= 1 and N >= 1, got d = {d}, N = {N}")
    X = np.array([[flint.fmpq(3 * n if k == 0 else 0) for k in range(d)] for n in range(N)])
    Y = X.copy()
    for n in range(N):
        Y[n, n % d] += 1
    return X, Y


def is_semi_autonomous(schedule: Schedule) -> bool:
    """Whether every piece has the same ``W`` and ``A`` (only ``b`` and durations differ).

    Guarantee: exact.
    """
    first = schedule.pieces[0]
    return all(
        p.W.shape == first.W.shape
        and all(u == v for u, v in zip(p.W.flat, first.W.flat, strict=True))
        and all(u == v for u, v in zip(p.A.flat, first.A.flat, strict=True))
        for p in schedule.pieces
    )


def replay_semi_autonomous(schedule: Schedule, X: Any) -> np.ndarray | None:
    """Exact images of the points under a ReLU schedule whose active neurons are laminar in
    every piece, or None when a piece is not of that form for these points.

    Guarantee: exact (proofs/interpolation_variants.md#semi-autonomous-replay).
    """
    if schedule.activation is not Activation.RELU:
        return None
    Z = as_points(X, "X", schedule.dimension)
    N, d = Z.shape
    for piece in schedule.pieces:
        pre = [[dot(piece.A[i], Z[n]) + piece.b[i] for i in range(piece.width)] for n in range(N)]
        active = [i for i in range(piece.width) if any(pre[n][i] > 0 for n in range(N))]
        if active:
            a = piece.A[active[0]]
            for i in active:
                k = next((t for t in range(d) if a[t] != 0), None)
                if k is None:
                    return None
                c = piece.A[i][k] / a[k]
                if c <= 0 or any(piece.A[i][t] != c * a[t] for t in range(d)):
                    return None
                if dot(a, piece.W[:, i]) != 0:
                    return None
        tau = piece.duration
        new = Z.copy()
        for n in range(N):
            for i in active:
                if pre[n][i] > 0:
                    g = tau * pre[n][i]
                    new[n] = new[n] + g * piece.W[:, i]
        for i in range(piece.width):
            if i not in active and any(dot(piece.A[i], new[n]) + piece.b[i] > 0 for n in range(N)):
                return None
        Z = new
    return Z


def _direction_u(Xq: np.ndarray, Yq: np.ndarray) -> list[flint.fmpq]:
    """u = (1, t, t², ...) with the u·x_n distinct and no y_n − y_m parallel to u (each
    condition excludes finitely many t)."""
    N, d = Xq.shape
    for t in range(1, N * N * d + 3):
        u = [flint.fmpq(t**k) for k in range(d)]
        if len({dot(u, x) for x in Xq}) < N:
            continue
        nu = dot(u, u)
        mids = {tuple(y[k] - dot(u, y) / nu * u[k] for k in range(d)) for y in Yq}
        if len(mids) == N:
            return u
    raise InputError("X: no direction separates the points")  # pragma: no cover


def _direction_v(P: np.ndarray, u: list[flint.fmpq]) -> list[flint.fmpq]:
    N, d = P.shape
    nu = dot(u, u)
    basis = [[nu * (i == k) - u[k] * u[i] for i in range(d)] for k in range(1, d)]
    for t in range(1, N * N * d + 3):
        v = [sum((flint.fmpq(t**k) * basis[k][i] for k in range(d - 1)), _ZERO) for i in range(d)]
        if any(v) and len({dot(v, x) for x in P}) == N:
            return v
    raise InputError("Y: no direction orthogonal to u separates the targets")  # pragma: no cover


def _pow2_above(q: flint.fmpq) -> flint.fmpq:
    out = flint.fmpq(1)
    while out <= q:
        out *= 2
    return out


def _phase(
    s: list[flint.fmpq], shifts: list[list[flint.fmpq]], m: int, tau: flint.fmpq
) -> tuple[flint.fmpq, list[list[list[tuple[flint.fmpq, flint.fmpq] | None]]]]:
    """Scale λ and, per piece, per direction, up to m kink pairs realising the shifts.

    ``shifts[n][k]``: coefficient of direction k to add to point n. Points are handled from the
    lowest s upward; the pair at the gap below the point of rank r shifts every point of rank
    >= r by ``v_r = Δ_r − Δ_{r−1}`` (telescoping).
    """
    N = len(s)
    order = sorted(range(N), key=lambda n: s[n])
    srt = [s[n] for n in order]
    low = srt[0] - (srt[-1] - srt[0] if N > 1 else 1) - 1
    gaps_lo = [low] + srt[:-1]
    K = len(shifts[0])
    v = [
        [shifts[order[r]][k] - (shifts[order[r - 1]][k] if r else 0) for k in range(K)]
        for r in range(N)
    ]
    ratio = max(
        (abs(v[r][k]) / (tau * (srt[r] - gaps_lo[r])) for r in range(N) for k in range(K)),
        default=_ZERO,
    )
    lam = _pow2_above(ratio)
    pieces = []
    for start in range(0, N, m):
        piece = []
        for k in range(K):
            pairs = []
            for r in range(start, min(start + m, N)):
                if v[r][k] == 0:
                    pairs.append(None)
                    continue
                mid = (srt[r] + gaps_lo[r]) / 2
                half = v[r][k] / (2 * tau * lam)
                pairs.append((mid - half, mid + half))
            pairs += [None] * (m - len(pairs))
            piece.append(pairs)
        pieces.append(piece)
    return lam, pieces


def construct_semi_autonomous(X: Any, Y: Any, width: int, *, time: Any = 1) -> Schedule:
    """An exact semi-autonomous ReLU schedule (W, A constant; only b switching) of width
    ``2d⌊p/(2d)⌋ <= p`` with ``Φ_T(x_n) = y_n``; needs ``p >= 2d``.

    Raises
    ------
    InputError
        p < 2d (no construction implemented), duplicates, T <= 0.
    DomainError
        d = 1.

    Guarantee: none by itself (producer); :func:`check_semi_autonomous` replays it exactly.
    """
    p = _width(width)
    Xq, Yq = _pairs(X, Y)
    N, d = Xq.shape
    require_dimension_two(d, "interpolation")
    T = positive_time(time)
    if p < 2 * d:
        raise InputError(
            f"width: p = {p} < 2d = {2 * d}; the semi-autonomous construction needs p >= 2d"
        )
    m = p // (2 * d)
    K = -(-N // m)
    tau = T / (2 * K)
    u = _direction_u(Xq, Yq)
    nu = dot(u, u)
    mu = [dot(u, Yq[n] - Xq[n]) / nu for n in range(N)]
    Z = [[Yq[n][k] - Xq[n][k] - mu[n] * u[k] for k in range(d)] for n in range(N)]
    mid_points = np.array([[Yq[n][k] - mu[n] * u[k] for k in range(d)] for n in range(N)])
    v = _direction_v(mid_points, u)
    s1 = [dot(u, x) for x in Xq]
    lam1, ph1 = _phase(s1, [z[1:] for z in Z], m, tau)
    s2 = [dot(v, x) for x in mid_points]
    lam2, ph2 = _phase(s2, [[q] for q in mu], m, tau)
    # neurons: phase 1, per direction k=1..d-1, m pairs (+w_k, -w_k); phase 2, m pairs (+u, -u)
    dirs1 = [[(i == k) - (u[k] if i == 0 else 0) for i in range(d)] for k in range(1, d)]
    cols, rows = [], []
    for w in dirs1:
        for _ in range(m):
            cols += [[lam1 * q for q in w], [-lam1 * q for q in w]]
            rows += [u, u]
    for _ in range(m):
        cols += [[lam2 * q for q in u], [-lam2 * q for q in u]]
        rows += [v, v]
    W = [[cols[i][r] for i in range(len(cols))] for r in range(d)]
    # an "off" bias below -|a·x| at every position the points take: in phase 1 x_n plus the
    # shift of some point (telescoping sums), in phase 2 the midpoint plus some μ_r u
    # (proofs/interpolation_variants.md#semi-autonomous); the replay re-checks it exactly
    bound = (
        max(abs(q) for q in s1)
        + max(abs(dot(v, x)) for x in Xq)
        + max(abs(dot(v, z)) for z in Z)
        + max(abs(dot(u, x)) for x in mid_points)
        + max(abs(q) for q in mu) * nu
    )
    off = -(bound * 2 + 1)
    pieces = []
    for phase, npairs_before in ((ph1, 0), (ph2, 2 * m * (d - 1))):
        for piece in phase:
            b = [off] * len(cols)
            for k, pairs in enumerate(piece):
                for j, kinks in enumerate(pairs):
                    if kinks is not None:
                        i = npairs_before + 2 * (k * m + j)
                        b[i], b[i + 1] = -kinks[0], -kinks[1]
            pieces.append(Piece(tau, W, rows, b, f"pieces[{len(pieces)}]"))
    return Schedule(d, Activation.RELU, tuple(pieces))


def check_semi_autonomous(X: Any, Y: Any, width: int, *, time: Any = 1) -> SemiAutonomousVerdict:
    """Decide what can be certified about semi-autonomous interpolation of these data at
    width p: REFUTED when ``rank(Y − X) > p`` (exact minor witness), VERIFIED with an exact
    construction when ``p >= 2d``, UNDECIDED otherwise.

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError, InputError, DomainError
        Bad data (N = 0, shapes, duplicates, d = 1), p < 1, T <= 0.

    Examples
    --------
    >>> X, Y = refuting_dataset(2, 3, 3)
    >>> check_semi_autonomous(X, Y, 2).verdict
    'REFUTED'

    Guarantee: REFUTED / VERIFIED are exact (see :class:`SemiAutonomousVerdict`).
    """
    p = _width(width)
    Xq, Yq = _pairs(X, Y)
    N, d = Xq.shape
    require_dimension_two(d, "interpolation")
    positive_time(time)
    rank, rows, cols, minor = displacement_rank_witness(Xq, Yq, size=p + 1)
    formula = 2 * (-(-N // p)) - 1
    if rank > p:
        r = (rows, cols)
        return SemiAutonomousVerdict(
            "REFUTED", p, rank, r, minor, None, None, formula,
            f"the displacements y_n - x_n span a space of dimension {rank} > p = {p}; a "
            "semi-autonomous flow moves every point inside span{w_1..w_p}",
        )  # fmt: skip
    if p < 2 * d:
        return SemiAutonomousVerdict(
            "UNDECIDED", p, rank, None, None, None, None, formula,
            f"rank(Y - X) = {rank} <= p, so the span obstruction is silent; the exact "
            f"construction needs p >= 2d = {2 * d}",
        )  # fmt: skip
    schedule = construct_semi_autonomous(Xq, Yq, p, time=time)
    images = replay_semi_autonomous(schedule, Xq)
    ok = images is not None and all(bool(np.all(images[n] == Yq[n])) for n in range(N))
    return SemiAutonomousVerdict(
        "VERIFIED" if ok else "UNDECIDED", p, rank, None, None, schedule,
        schedule.switches, formula,
        "" if ok else "the construction did not replay exactly (a bug: please report it)",
    )  # fmt: skip
