"""Variant B: semi-autonomous interpolation, ``w_i`` and ``a_i`` constant in time and only the
biases ``b_i(t)`` switching (theorems.md §3, row B; proofs/interpolation_variants.md
#semi-autonomous).

* Obstruction: ``Φ_T(x) − x = Σ_i w_i ∫_0^T σ(a_i·x(t) + b_i(t)) dt ∈ span{w_1..w_p}`` for
  every x and every activation, so if the displacements ``y_n − x_n`` span a space of
  dimension > p, *no* such schedule of width p interpolates. :func:`check_semi_autonomous`
  returns REFUTED with an exact witness: ``p + 1`` rows and columns of ``Y − X`` whose minor
  has a nonzero determinant. :func:`refuting_dataset` exhibits data with ``rank = min(d, N)``,
  which refutes the "for all data" statement whenever ``p < min(d, N)``.
* Construction for ``p >= d + 2`` (ours; the paper's for B is not in what we have): W and A
  are fixed, so each neuron pushes along its own ``w`` with a fixed magnitude and only its kink
  (bias) moves. Phase 1 (normal u) uses the ``d`` directions ``e'_k = e_k − u_k e_0``
  (k = 1..d−1) and ``−Σ e'_k``, a positive basis of ``u^⊥``: each target displacement is a
  combination with coefficients ``g_k + M`` and ``M``, and ``M`` (free, growing fast enough)
  makes every coefficient a convex function of ``u·x`` with exactly the slope increments a
  fixed-size ramp can give (one kink per direction per gap). Phase 2 (normal v ⊥ u) does the
  same with ``u, −u``. ``m = ⌊p/(d+2)⌋`` points per piece, ``L = 2⌈N/m⌉ − 1``; exact in rational
  arithmetic (proofs/interpolation_variants.md, Lemma B3).
* For ``d <= p < d + 2`` no construction is implemented: UNDECIDED with that reason.

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
from certified.verdict import Outcome

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
    verdict : Outcome
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

    verdict: Outcome
    width: int
    rank: int
    witness: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    determinant: flint.fmpq | None = None
    schedule: Schedule | None = None
    switches: int | None = None
    formula_switches: int | None = None
    message: str = ""

    def __post_init__(self) -> None:
        # producers may pass the contract string: normalised (and validated) here
        object.__setattr__(self, "verdict", Outcome(self.verdict))


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


def _ramp_phase(
    s: list[flint.fmpq], g: list[list[flint.fmpq]], m: int, tau: flint.fmpq
) -> tuple[flint.fmpq, list[list[list[flint.fmpq | None]]]]:
    """Scale U and, per piece, per direction k = 0..q, up to m kinks: with directions
    ``e'_0..e'_{q-1}`` and ``e'_q = −Σ e'_k`` (a positive basis of their span), the ramps
    ``τ U e'_k (s − c)_+`` of a phase add ``Σ_k e'_k f_k(s)`` with ``f_k`` convex, and
    ``f_k(s_n) = g[n][k] + M_n`` (k < q), ``f_q(s_n) = M_n`` gives exactly ``Σ_k g[n][k] e'_k``
    at every point (proofs/interpolation_variants.md#semi-autonomous).

    Sorted ``s_1 < .. < s_N``: one kink per direction below ``s_1`` and one in each gap. With n
    kinks below ``s_n`` and one more in ``(s_n, s_{n+1})`` the increment of ``f_k`` is in
    ``τ U gap_n [n, n+1]``; ``ΔM_n = τ U gap_n (n + 1/2)`` and ``U >= 2 max|Δg| / (τ gap)``
    put every direction's increment there, and each kink is then solved exactly.
    """
    N, q = len(s), len(g[0])
    order = sorted(range(N), key=lambda n: s[n])
    srt = [s[n] for n in order]
    G = [g[n] for n in order]
    need = max(
        (abs(G[r + 1][k] - G[r][k]) * 2 / (tau * (srt[r + 1] - srt[r]))
         for r in range(N - 1) for k in range(q)),
        default=_ZERO,
    )  # fmt: skip
    U = _pow2_above(need)
    A = tau * U
    M = [max([_ZERO] + [-x for x in G[0]]) + 1]
    for r in range(N - 1):
        M.append(M[-1] + A * (srt[r + 1] - srt[r]) * (2 * r + 3) / 2)
    T = [[G[r][k] + M[r] for k in range(q)] + [M[r]] for r in range(N)]
    kinks = [[srt[0] - T[0][k] / A for k in range(q + 1)]]  # f_k(s_1) = A (s_1 - c)
    for r in range(N - 1):
        gap = srt[r + 1] - srt[r]
        kinks.append([srt[r + 1] - ((T[r + 1][k] - T[r][k]) / A - (r + 1) * gap)
                      for k in range(q + 1)])  # fmt: skip
    pieces = []
    for start in range(0, N, m):
        chunk = kinks[start : start + m]
        pieces.append([[c[k] for c in chunk] + [None] * (m - len(chunk)) for k in range(q + 1)])
    return U, pieces


def construct_semi_autonomous(X: Any, Y: Any, width: int, *, time: Any = 1) -> Schedule:
    """An exact semi-autonomous ReLU schedule (W, A constant; only b switching) of width
    ``(d + 2)⌊p/(d + 2)⌋ <= p`` with ``Φ_T(x_n) = y_n``; needs ``p >= d + 2``.

    Raises
    ------
    InputError
        p < d + 2 (no construction implemented), duplicates, T <= 0.
    DomainError
        d = 1.

    Guarantee: none by itself (producer); :func:`check_semi_autonomous` replays it exactly.
    """
    p = _width(width)
    Xq, Yq = _pairs(X, Y)
    N, d = Xq.shape
    require_dimension_two(d, "interpolation")
    T = positive_time(time)
    if p < d + 2:
        raise InputError(
            f"width: p = {p} < d + 2 = {d + 2}; the semi-autonomous construction needs p >= d + 2"
        )
    m = p // (d + 2)
    K = -(-N // m)
    tau = T / (2 * K)
    u = _direction_u(Xq, Yq)
    nu = dot(u, u)
    mu = [dot(u, Yq[n] - Xq[n]) / nu for n in range(N)]
    Z = [[Yq[n][k] - Xq[n][k] - mu[n] * u[k] for k in range(d)] for n in range(N)]
    mid_points = np.array([[Yq[n][k] - mu[n] * u[k] for k in range(d)] for n in range(N)])
    v = _direction_v(mid_points, u)
    # phase 1: normal u, motion in u-perp along e'_k = e_k - u_k e_0 (k = 1..d-1; Z[n] has
    # coordinates Z[n][1:] there) and -sum e'_k; phase 2: normal v, motion along u and -u
    s1 = [dot(u, x) for x in Xq]
    U1, ph1 = _ramp_phase(s1, [z[1:] for z in Z], m, tau)
    s2 = [dot(v, x) for x in mid_points]
    U2, ph2 = _ramp_phase(s2, [[q] for q in mu], m, tau)
    basis = [[(i == k) - (u[k] if i == 0 else 0) for i in range(d)] for k in range(1, d)]
    dirs1 = [*basis, [-sum((b[i] for b in basis), _ZERO) for i in range(d)]]
    cols, rows = [], []
    for w in dirs1:
        cols += [[U1 * c for c in w]] * m
        rows += [u] * m
    for w in (u, [-c for c in u]):
        cols += [[U2 * c for c in w]] * m
        rows += [v] * m
    W = [[cols[i][r] for i in range(len(cols))] for r in range(d)]
    pieces: list[list] = []  # biases per piece; "None" = off, set below
    for phase, first in ((ph1, 0), (ph2, d * m)):
        for piece in phase:
            b = [None] * len(cols)
            for k, kinks in enumerate(piece):
                for j, c in enumerate(kinks):
                    if c is not None:
                        b[first + k * m + j] = -c
            pieces.append(b)
    # an "off" bias below -|a.x| at every position the points take (ends of the pieces, with
    # the used neurons only; positions are affine in t within a piece): the replay re-checks
    off = _off_bias(Xq, W, rows, pieces, tau)
    out = [Piece(tau, W, rows, [off if x is None else x for x in b], f"pieces[{k}]")
           for k, b in enumerate(pieces)]  # fmt: skip
    return Schedule(d, Activation.RELU, tuple(out))


def _off_bias(Xq, W, rows, pieces, tau) -> flint.fmpq:
    """A bias that keeps a neuron at or below 0 at every piece end of the used neurons' flow."""
    Z = [list(x) for x in Xq]
    p, d = len(rows), len(Z[0])
    big = max(abs(dot(r, z)) for r in rows for z in Z)
    for b in pieces:
        new = []
        for z in Z:
            y = list(z)
            for i in range(p):
                if b[i] is not None and (pre := dot(rows[i], z) + b[i]) > 0:
                    y = [y[k] + tau * pre * W[k][i] for k in range(d)]
            new.append(y)
        Z = new
        big = max(big, max(abs(dot(r, z)) for r in rows for z in Z))
    return -(2 * big + 1)


def check_semi_autonomous(X: Any, Y: Any, width: int, *, time: Any = 1) -> SemiAutonomousVerdict:
    """Decide what can be certified about semi-autonomous interpolation of these data at
    width p: REFUTED when ``rank(Y − X) > p`` (exact minor witness), VERIFIED with an exact
    construction when ``p >= d + 2``, UNDECIDED otherwise.

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError, InputError, DomainError
        Bad data (N = 0, shapes, duplicates, d = 1), p < 1, T <= 0.

    Examples
    --------
    >>> X, Y = refuting_dataset(2, 3, 3)
    >>> print(check_semi_autonomous(X, Y, 2).verdict)
    REFUTED

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
            Outcome.REFUTED, p, rank, r, minor, None, None, formula,
            f"the displacements y_n - x_n span a space of dimension {rank} > p = {p}; a "
            "semi-autonomous flow moves every point inside span{w_1..w_p}",
        )  # fmt: skip
    if p < d + 2:
        return SemiAutonomousVerdict(
            Outcome.UNDECIDED, p, rank, None, None, None, None, formula,
            f"rank(Y - X) = {rank} <= p, so the span obstruction is silent; the exact "
            f"construction needs p >= d + 2 = {d + 2}",
        )  # fmt: skip
    schedule = construct_semi_autonomous(Xq, Yq, p, time=time)
    images = replay_semi_autonomous(schedule, Xq)
    ok = images is not None and all(bool(np.all(images[n] == Yq[n])) for n in range(N))
    return SemiAutonomousVerdict(
        Outcome.VERIFIED if ok else Outcome.UNDECIDED, p, rank, None, None, schedule,
        schedule.switches, formula,
        "" if ok else "the construction did not replay exactly (a bug: please report it)",
    )  # fmt: skip
