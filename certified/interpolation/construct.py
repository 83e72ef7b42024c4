"""Exact interpolation of point pairs by laminar ReLU neural ODEs (theorems.md section 3).

Given pairs ``(x_n, y_n)`` in Q^d, ``n = 1..N``, :func:`construct_interpolation` returns a
schedule of width p whose flow maps every ``x_n`` exactly onto ``y_n`` in time T:

* **A** (any d >= 2): ``K = ⌈N/p⌉`` pieces with normal ``-u`` (phase 1: ``w ⊥ u`` sets the
  component of each point off ``u``), then K pieces with normal ``-v`` (phase 2: ``w ∥ u`` sets
  the ``u`` component); ``L = 2K − 1`` switches.
* **C** (d > N): one phase with a normal ``u`` orthogonal to every ``x_n − y_n``;
  ``L = K − 1``.

The phase map. All pieces of a phase share the normal ``a``, so ``s = a·x`` is invariant and
the phase maps ``x`` to ``x + G(s)`` with ``G(s) = Σ_i J_i (c_i − s)_+`` (``J_i = τ w_i``),
whatever the order of its pieces (proofs/bounds.md#interp-phase). With the points sorted by
decreasing ``s`` and one threshold ``c_i`` in each gap ``(s_i, s_{i−1})`` (``c_1 > s_1``),
``G`` is affine between consecutive thresholds, so the prescribed values ``G(s_i) = Δ_i``
determine it: ``g_{i+1} = G(c_{i+1}) = Δ_i + r_i (Δ_i − g_i)`` with
``r_i = (s_i − c_{i+1})/(c_i − s_i)``. This is the lower-triangular solve of theorems.md,
done once for the whole phase in O(N d) (the displacement of the points below a block is the
affine tail of ``G``).

Thresholds. theorems.md suggests ``c − s`` a power of two. Then ``r_i`` carries the bits of
a data gap and the exact parameters grow by about ``log2(gap/ulp)`` bits per point (43 bits
per point measured on random doubles: millions of bits at N = 10^5). Here ``r_i = 2^{m_i}``
instead: ``c_{i+1} = s_i − 2^{m_i}(c_i − s_i)``, with ``m_i`` the largest integer keeping
``c_{i+1} − s_{i+1}`` at least an eighth of its gap, capped by ``−Σ_{j<i} m_j``. The
recurrence then only shifts binary exponents: sizes stay within the data's bits plus the
largest excursion of ``Σ m_j`` (bounded by the logarithm of the ratio of extreme gaps), and
thresholds stay on the data's dyadic grid refined by that excursion.

Conditioning. With one kink per gap, ``G`` zigzags through the prescribed values: its slopes
are about ``|g_i − Δ_i| / gap_i``, and ``g_i`` is an alternating sum of the ``Δ_j`` (of size
``√N |Δ|`` for random data), over gaps that shrink like 1/N² for random data. Exact
parameters do not care; rounded ones do. Phase 2 with its exact parameters would amplify
the rounding errors of phase 1 by those slopes, so the float64 export
(:func:`~certified.interpolation.export_float64`) rebuilds phase 2 for the rounded phase 1;
what remains is phase 1's own rounding (exact errors of the exported doubles on uniform
random data, d = p = 16: 6e-7 at N = 2,000, 1e-2 at N = 20,000).

Directions (deterministic). ``u = (1, t, ..., t^{d−1})`` for the first integer ``t >= 0``
(``t = 0`` gives ``e_1``) with the ``u·x_n`` pairwise distinct and no ``y_n − y_m`` parallel
to ``u``; ``v = (−Σ_k u_k r_{k-1}, r_1, ..., r_{d−1})`` with ``r = (1, t', ..., t'^{d−2})``
for the first ``t' >= 0`` with the ``v·y_n`` distinct (``v ⊥ u``). Phase 1 sends ``x_n`` to
``z_n = y_n + λ_n u``, ``λ_n = u·(x_n − y_n)/|u|^2``; phase 2 (normal ``v``, invariant
``v·z_n = v·y_n``) moves it by ``−λ_n u``. Both always exist (a nonzero polynomial in t has
finitely many roots).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str, to_fmpq, to_fmpq_array
from certified.errors import DomainError, InputError, ShapeError
from certified.models import Activation, Piece, Schedule

__all__ = [
    "DuplicatePointError",
    "Interpolation",
    "OrderIncompatibleError",
    "construct_interpolation",
    "formula_switches",
    "read_pairs",
]

VARIANTS = ("auto", "general", "high-dim")


class DuplicatePointError(InputError):
    """Two points of ``X`` (or two targets of ``Y``) are equal: no flow map can separate
    (or merge) them."""


class OrderIncompatibleError(DomainError):
    """One-dimensional data whose targets are not in the order of the points: a 1-D flow map
    is increasing, so no flow interpolates them."""


@dataclass(frozen=True, eq=False)
class Interpolation:
    """An exact interpolating schedule and what a certificate needs.

    Attributes
    ----------
    schedule : Schedule
        ReLU, exact rational parameters, every piece laminar with a shared normal.
    switches : int
        ``L``: number of pieces minus one (no two consecutive pieces are equal).
    formula_switches : int
        ``2⌈N/p⌉ − 1`` (A) or ``⌈N/p⌉ − 1`` (C).
    variant : str
        ``"general"`` (A) or ``"high-dim"`` (C).
    directions : tuple
        ``(u, v)`` as tuples of Python ints (``v`` is None for C).
    hints : dict
        ``"phases"``: list of ``{"pieces": [start, stop], "normal": [...]}`` (exact strings);
        ``"order"``: per phase, the point indices by decreasing ``a·x`` at the phase start.
    X, Y : numpy.ndarray
        The data, exact (object arrays of fmpq).

    Guarantee: exact (``Φ_T(x_n) = y_n``; see :func:`verify_interpolation`).
    """

    schedule: Schedule
    switches: int
    formula_switches: int
    variant: str
    directions: tuple
    hints: dict = field(repr=False)
    X: np.ndarray = field(repr=False, default=None)
    Y: np.ndarray = field(repr=False, default=None)


# --- input -------------------------------------------------------------------------------------


def _points(a: Any, name: str) -> np.ndarray:
    if isinstance(a, np.ndarray) and a.dtype != object:
        if a.ndim != 2:
            raise ShapeError(f"{name}: expected an N×d array, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            i, j = np.argwhere(~np.isfinite(a))[0]
            raise_nonfinite = to_fmpq  # names the entry
            raise_nonfinite(float(a[i, j]), f"{name}[{i}][{j}]")
        out = np.empty(a.shape, dtype=object)
        flat = out.reshape(-1)
        flat[:] = [flint.fmpq(*v.as_integer_ratio()) for v in a.reshape(-1).tolist()]
        return out
    out = to_fmpq_array(a, name)
    if out.ndim != 2:
        raise ShapeError(f"{name}: expected an N×d array (a list of points), got shape {out.shape}")
    return out


def first_duplicate(rows: list) -> tuple[int, int] | None:
    """Indices ``(i, j)``, ``i < j``, of two equal rows (sorting; fmpq hashing is slow)."""
    order = sorted(range(len(rows)), key=rows.__getitem__)
    for i, j in itertools.pairwise(order):
        if rows[i] == rows[j]:
            return min(i, j), max(i, j)
    return None


def _first_duplicate_rows(P: np.ndarray) -> tuple[int, int] | None:
    """``first_duplicate`` of the rows of ``P``: by numpy for float64 arrays (a double is a
    rational, equal doubles are equal rationals, -0.0 == 0.0), else exactly."""
    if P.dtype != np.float64:
        return first_duplicate([tuple(row) for row in P.tolist()])
    order = np.lexsort(P.T[::-1]) if P.shape[1] else np.arange(len(P))
    same = np.all(P[order[1:]] == P[order[:-1]], axis=1)
    if not same.any():
        return None
    k = int(np.argmax(same))
    i, j = int(order[k]), int(order[k + 1])
    return min(i, j), max(i, j)


def _float64(a: Any, exact: np.ndarray) -> np.ndarray:
    """``a`` as float64 when it is a float array that converts exactly, else ``exact``."""
    if isinstance(a, np.ndarray) and a.dtype in (np.float16, np.float32, np.float64):
        return a.astype(np.float64)
    return exact


def _duplicates(P: np.ndarray, name: str, what: str) -> None:
    dup = _first_duplicate_rows(P)
    if dup is not None:
        i, j = dup
        raise DuplicatePointError(f"{name}: {name}[{i}] and {name}[{j}] are equal; {what}")


def read_pairs(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Exact copies of the data: object arrays of :class:`flint.fmpq`, shape (N, d).

    Raises
    ------
    ShapeError
        Not N×d, different shapes, N = 0 or d = 0.
    NonFiniteError, NumberFormatError
        A NaN, an infinity or a non-number (named).
    DuplicatePointError
        Two equal points, or two equal targets (both indices named).

    Guarantee: exact.
    """
    Xq, Yq = _points(X, "X"), _points(Y, "Y")
    if Xq.shape[0] == 0:
        raise ShapeError("X: no points (N = 0); give at least one pair (x_n, y_n)")
    if Xq.shape[1] == 0:
        raise ShapeError("X: points of dimension 0; give points in R^d, d >= 1")
    if Xq.shape != Yq.shape:
        raise ShapeError(
            f"Y: shape {Yq.shape} differs from X {Xq.shape}; give one target per point, "
            "same dimension"
        )
    _duplicates(_float64(X, Xq), "X", "a flow map is injective: remove one of the pairs")
    _duplicates(
        _float64(Y, Yq), "Y", "a flow map is injective, so two points cannot reach one target"
    )
    return Xq, Yq


def _check_one_dimensional(X: np.ndarray, Y: np.ndarray) -> None:
    order = sorted(range(len(X)), key=lambda n: X[n, 0])
    for i, j in itertools.pairwise(order):
        if Y[i, 0] > Y[j, 0]:
            raise OrderIncompatibleError(
                f"X, Y: d = 1 and x[{i}] < x[{j}] but y[{i}] > y[{j}]: a 1-D flow map is "
                "increasing (trajectories cannot cross), so these data cannot be interpolated; "
                "use d >= 2"
            )
    raise DomainError(
        "X, Y: d = 1: the data are order-compatible, so an increasing map exists, but exact "
        "laminar constructions need d >= 2 (in 1-D a piece with w ⊥ a does not move); embed "
        "the data in R^2 by appending a zero coordinate"
    )


def _parse_args(width: Any, time: Any, variant: Any) -> tuple[int, flint.fmpq]:
    if isinstance(width, (bool, np.bool_)) or not isinstance(width, (int, np.integer)):
        raise InputError(f"width: expected an integer p >= 1, got {width!r}")
    if width < 1:
        raise InputError(f"width: p = {width} is less than 1; give at least one neuron")
    T = to_fmpq(time, "time")
    if T <= 0:
        raise InputError(f"time: T = {fmpq_to_str(T)} is not positive; give T > 0")
    if variant not in VARIANTS:
        raise InputError(f"variant: {variant!r} is not one of {', '.join(VARIANTS)}")
    return int(width), T


def formula_switches(N: int, p: int, variant: str) -> int:
    """``2⌈N/p⌉ − 1`` for ``"general"`` (A), ``⌈N/p⌉ − 1`` for ``"high-dim"`` (C).

    Guarantee: exact.
    """
    K = -(-N // p)
    return 2 * K - 1 if variant == "general" else K - 1


# --- directions --------------------------------------------------------------------------------


def _obj(v: list[int]) -> np.ndarray:
    out = np.empty(len(v), dtype=object)
    out[:] = [flint.fmpq(k) for k in v]
    return out


def _distinct(values: np.ndarray) -> bool:
    v = sorted(values.tolist())
    return all(a != b for a, b in itertools.pairwise(v))


def _direction_u(X: np.ndarray, Y: np.ndarray, Yf: np.ndarray) -> list[int]:
    d = X.shape[1]
    t = 0
    while True:
        u = [t**k for k in range(d)]
        if _distinct(X.dot(_obj(u))):
            # y_n - y_m parallel to u (u_0 = 1) iff the rows y_k - u_k y_0 (k >= 1) coincide;
            # for t = 0 those rows are y_1.. (exact in float64 when the data are doubles)
            Q = Yf[:, 1:] if t == 0 else Y[:, 1:] - Y[:, :1] * _obj(u[1:])[None, :]
            if _first_duplicate_rows(Q) is None:
                return u
        t += 1


def _direction_v(Y: np.ndarray, u: list[int]) -> list[int]:
    d = Y.shape[1]
    t = 0
    while True:
        r = [t**k for k in range(d - 1)]
        v = [-sum(uk * rk for uk, rk in zip(u[1:], r, strict=True))] + r
        if _distinct(Y.dot(_obj(v))):
            return v
        t += 1


def _direction_high_dim(X: np.ndarray, Y: np.ndarray) -> list[int] | None:
    """An integer u with u·(x_n − y_n) = 0 for all n and the u·x_n distinct, or None."""
    N, d = X.shape
    D = flint.fmpq_mat(N, d, [q for q in (X - Y).reshape(-1).tolist()])
    rref, rank = D.rref()
    pivots, r = [], 0
    for j in range(d):
        if r < rank and rref[r, j] != 0:
            pivots.append(j)
            r += 1
    free = [j for j in range(d) if j not in pivots]
    basis = []
    for f in free:
        vec = [flint.fmpq(0)] * d
        vec[f] = flint.fmpq(1)
        for row, pj in enumerate(pivots):
            vec[pj] = -rref[row, f]
        basis.append(vec)
    B = np.array(basis, dtype=object).T  # d × k
    proj = X.dot(B)  # N × k: no u in the span separates x_n, x_m iff their rows coincide
    if first_duplicate([tuple(row) for row in proj.tolist()]) is not None:
        return None
    t = 1
    while True:
        c = _obj([t**k for k in range(len(free))])
        if _distinct(proj.dot(c)):
            u = B.dot(c)
            den = math.lcm(*(int(q.q) for q in u))
            ints = [int(q.p) * (den // int(q.q)) for q in u]
            g = math.gcd(*ints)
            return [k // g for k in ints]
        t += 1


# --- one phase ---------------------------------------------------------------------------------


_SEVEN_EIGHTHS = flint.fmpq(7, 8)


def _pow2(m: int) -> flint.fmpq:
    return flint.fmpq(1 << m) if m >= 0 else flint.fmpq(1, 1 << -m)


def _log2_floor(q: flint.fmpq) -> int:
    """Largest k with 2^k <= q (q > 0)."""
    k = int(q.p).bit_length() - int(q.q).bit_length()
    while _pow2(k) > q:
        k -= 1
    while _pow2(k + 1) <= q:
        k += 1
    return k


def phase_kinks(s: np.ndarray, delta: np.ndarray) -> tuple[list, np.ndarray, list]:
    """Thresholds ``c_i`` and jumps ``J_i`` with ``Σ_i J_i (c_i − s_n)_+ = Δ_n`` for all n.

    Parameters
    ----------
    s : (N,) object array of fmpq, strictly decreasing
    delta : (N, k) object array of fmpq, the prescribed displacements

    Returns
    -------
    c : list of fmpq, strictly decreasing, ``c_1 > s_1`` and ``s_i < c_i < s_{i−1}``
    J : (N, k) object array of fmpq
    m : list of int, the exponents ``m_i`` (``r_i = 2^{m_i}``)

    Guarantee: exact (proofs/bounds.md#interp-phase).
    """
    N = len(s)
    # c_1 - s_1: a power of two near the first gap (any positive number works)
    a = _pow2(_log2_floor(s[0] - s[1])) if N > 1 else flint.fmpq(1)
    c, gaps_a, ms = [s[0] + a], [a], []
    M = 0
    for i in range(N - 1):
        gap = s[i] - s[i + 1]
        # largest m with a 2^m <= 7 gap / 8 (so c_{i+1} - s_{i+1} >= gap / 8: slopes of G stay
        # moderate), capped so that the running sum of exponents stays <= 0 (sizes bounded)
        m = min(_log2_floor(gap * _SEVEN_EIGHTHS / a), -M)
        b = a * _pow2(m)
        c.append(s[i] - b)
        a = gap - b
        gaps_a.append(a)
        M += m
        ms.append(m)
    # g_{i+1} = e_i - 2^{m_i} g_i with e_i = Δ_i (1 + 2^{m_i}) and g_1 = 0; with
    # P_i = prod_{l<i} (-2^{m_l}) this is g_i / P_i = sum_{j<i} e_j / P_{j+1}: one prefix sum
    P = [flint.fmpq(1)]
    for m in ms:
        P.append(-P[-1] * _pow2(m))
    Pa = np.empty(N, dtype=object)
    Pa[:] = P
    e = np.empty((N - 1, 1), dtype=object)
    e[:, 0] = [(1 + _pow2(m)) / P[j + 1] for j, m in enumerate(ms)]
    zero = np.full((1, delta.shape[1]), flint.fmpq(0), dtype=object)
    g = np.concatenate([zero, np.cumsum(delta[:-1] * e, axis=0)]) * Pa[:, None]
    inv_a = np.empty((N, 1), dtype=object)
    inv_a[:, 0] = [1 / x for x in gaps_a]
    # slope of G on (c_{i+1}, c_i): through (c_i, g_i) and (s_i, Δ_i); J_i = slope_{i-1} - slope_i
    slope = (g - delta) * inv_a
    J = np.concatenate([zero, slope[:-1]]) - slope
    return c, J, ms


def _piece(tau: flint.fmpq, W: np.ndarray, A: np.ndarray, b: np.ndarray) -> Piece:
    """A :class:`Piece` from arrays that are already exact (every entry an fmpq, shapes
    consistent, ``tau > 0``): skips the per-entry parsing of ``Piece.__post_init__``, which
    dominates the cost at N = 10^5. ``_check_piece`` in the tests compares with the parsed
    constructor."""
    piece = object.__new__(Piece)
    for name, value in (("duration", tau), ("W", W), ("A", A), ("b", b)):
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
        object.__setattr__(piece, name, value)
    return piece


def _phase_pieces(
    s: np.ndarray, delta: np.ndarray, normal: list[int], tau: flint.fmpq, p: int, along=None
) -> tuple[list[Piece], list[int]]:
    """Pieces of one phase with normal ``-normal`` (field ``w_i (c_i − a·x)_+``).

    ``delta`` is (N, d), or (N, 1) scalars multiplying ``along`` (then every ``w ∥ along``).
    """
    order = sorted(range(len(s)), key=lambda n: s[n], reverse=True)
    s_sorted = s[order]
    c, J, _ = phase_kinks(s_sorted, delta[order])
    d = len(normal)
    row = np.empty(d, dtype=object)
    row[:] = [flint.fmpq(-k) for k in normal]
    Wt = J * (1 / tau) if along is None else (J * (1 / tau)) * _obj(along)[None, :]
    pieces = []
    for start in range(0, len(s), p):
        stop = min(start + p, len(s))
        k = stop - start
        W = Wt[start:stop].T.copy()
        A = np.empty((k, d), dtype=object)
        A[:] = row[None, :]
        b = np.empty(k, dtype=object)
        b[:] = c[start:stop]
        pieces.append(_piece(tau, W, A, b))
    return pieces, order


def _high_dim(X, Y, u, p, T):
    N, d = X.shape
    K = -(-N // p)
    s = X.dot(_obj(u))
    pieces, order = _phase_pieces(s, Y - X, u, T / K, p)
    schedule = Schedule(d, Activation.RELU, tuple(pieces))
    hints = {
        "phases": [{"pieces": [0, K], "normal": [str(-k) for k in u]}],
        "order": [order],
    }
    return Interpolation(
        schedule,
        K - 1,
        formula_switches(N, p, "high-dim"),
        "high-dim",
        (tuple(u), None),
        hints,
        X,
        Y,
    )


def _general(X, Y, p, T, Yf):
    N, d = X.shape
    K = -(-N // p)
    tau = T / (2 * K)
    u = _direction_u(X, Y, Yf)
    v = _direction_v(Y, u)
    uq = _obj(u)
    norm2 = sum(k * k for k in u)
    lam = (X - Y).dot(uq) * flint.fmpq(1, norm2)
    Z = Y + lam[:, None] * uq[None, :]
    s1 = X.dot(uq)
    p1, o1 = _phase_pieces(s1, Z - X, u, tau, p)
    s2 = Y.dot(_obj(v))
    p2, o2 = _phase_pieces(s2, (-lam)[:, None], v, tau, p, along=u)
    schedule = Schedule(d, Activation.RELU, tuple(p1 + p2))
    hints = {
        "phases": [
            {"pieces": [0, K], "normal": [str(-k) for k in u]},
            {"pieces": [K, 2 * K], "normal": [str(-k) for k in v]},
        ],
        "order": [o1, o2],
    }
    return Interpolation(
        schedule,
        2 * K - 1,
        formula_switches(N, p, "general"),
        "general",
        (tuple(u), tuple(v)),
        hints,
        X,
        Y,
    )


def construct_interpolation(
    X: Any, Y: Any, width: int, *, time: Any = 1, variant: str = "auto"
) -> Interpolation:
    """A ReLU schedule of width ``p`` whose flow maps each ``x_n`` exactly onto ``y_n``.

    .. math::

        \\Phi_T(x_n) = y_n \\quad (n = 1..N), \\qquad
        L = 2\\lceil N/p \\rceil - 1 \\ (A), \\quad L = \\lceil N/p \\rceil - 1 \\ (C,\\ d > N)

    Parameters
    ----------
    X, Y : (N, d) arrays of numbers (floats read as their exact binary values, fmpq, strings)
    width : int
        ``p >= 1``, neurons per piece (the last piece of a phase may have fewer).
    time : number
        ``T > 0``, exact; every piece lasts ``T/(2⌈N/p⌉)`` (A) or ``T/⌈N/p⌉`` (C).
    variant : {"auto", "general", "high-dim"}
        ``"general"``: A; ``"high-dim"``: C (needs d > N and a direction u with
        ``u·(x_n − y_n) = 0`` and the ``u·x_n`` distinct, else DomainError); ``"auto"``: C when
        available, else A (the fewest switches).

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError
        Data not N×d, N = 0, shapes differ, a NaN/infinity.
    DuplicatePointError
        Equal points or equal targets.
    OrderIncompatibleError
        d = 1 and the targets are not in the order of the points (impossible for a flow).
    DomainError
        d = 1 (order-compatible: not constructible by laminar pieces), or ``"high-dim"`` not
        applicable.
    InputError
        ``p < 1``, ``T <= 0``, unknown variant.

    Guarantee: exact -- ``Φ_T(x_n) = y_n`` in rational arithmetic (proofs/bounds.md#interp-phase).
    """
    p, T = _parse_args(width, time, variant)
    Xq, Yq = read_pairs(X, Y)
    N, d = Xq.shape
    if d == 1:
        _check_one_dimensional(Xq, Yq)
    if variant in ("auto", "high-dim"):
        u = _direction_high_dim(Xq, Yq) if d > N else None
        if u is not None:
            return _high_dim(Xq, Yq, u, p, T)
        if variant == "high-dim":
            raise DomainError(
                f"variant: high-dim needs d > N (here d = {d}, N = {N}) and a direction u with "
                "u·(x_n − y_n) = 0 separating the x_n; none exists: use variant general"
                if d > N
                else f"variant: high-dim needs d > N (here d = {d}, N = {N}); use general"
            )
    return _general(Xq, Yq, p, T, _float64(Y, Yq))
