"""Theorem F for piecewise-constant densities: a ReLU flow of axis shears and coordinate
scalings pushing a density on a grid of boxes to within ``W_2 <= ε`` of ``U([0,1]^d)``
(theorems.md §3, row F; proofs/cube.md §6).

The exact target map is the Knothe map ``T`` of the density: ``y_0 = F_0(x_0)``,
``y_1 = F_{1|a}(x_1)`` in column ``a``, ... (marginal and conditional CDFs, piecewise linear with
breakpoints on the grid). A flow realises ``T`` approximately, one axis per stage, from the last
axis to the first (stage ``k`` moves ``x_k`` only, while ``x_0 .. x_{k-1}`` are still in source
coordinates):

0. axes ``k >= 1`` are first moved affinely onto ``[0, 1]`` (two scalings);
1. *stacking*: laminar shears ``x_k += g(x_j)``, ``g`` a sum of steep ramps at the grid lines
   of the axes ``j < k``, translate each grid tube of those axes to its own band
   ``[s H, s H + H)`` of ``x_k``, so that one map of ``x_k`` can act differently per tube;
2. *chain*: single-neuron scalings ``ẋ_k = λ (x_k − c)_+`` (flow ``c + (x_k − c) e^{λτ}``), one
   per gap between consecutive knots (grid lines of all bands, bottom to top), set every gap to
   its target length ``F_{k|τ}`` (zero-mass gaps to a length ``ζ``);
3. *unstacking*: the same shears negated.

The ramps are ``2β/4`` wide around the grid lines; the mass they smear lies in thin *buffer*
cells (source slabs of half-width β around the grid lines, merged with zero-mass intervals)
whose images are loose and which weigh almost nothing in the bound. Cells (untrusted choice, the
checker decides): a guillotine tree of ``[0,1]^d`` (targets ``G``) aligned with the images of the
grid, ``K`` parts per axis, and the buffers; source cells ``C = T^{-1}(G)``, boxes with exact
rational ends and ``μ₀(C) = vol(G)``. The checker encloses ``Φ_T(C)`` by a box ``B`` and accepts
``bound^2 >= Σ μ₀(C) sup_{y∈B} E_{g∼U(G)} |y − g|^2 >= W_2^2`` (proofs/cube.md §6).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import pairwise, product
from typing import Any

import flint
import mpmath
import numpy as np

from certified.cube.density import BoxDensity
from certified.cube.formula import check_parameters, formula_switches
from certified.errors import DomainError
from certified.models import Activation, Piece, Schedule

__all__ = ["DensityCell", "DensityTransport", "density_to_cube", "push_points"]

_ZERO, _ONE = flint.fmpq(0), flint.fmpq(1)
# the ramps (half-width β/4) lie inside the buffers (half-width β) around the grid lines
BETA = flint.fmpq(1, 2**32)  # half-width of a buffer, relative to the finest grid spacing
ZETA = flint.fmpq(1, 2**40)  # target length of a gap of mass 0 (resolved by a long double)
MAX_TRIES = 6  # part counts tried above the first guess
MAX_CELLS = 200_000
_PREC = 256  # bits of the producer's positions (mpmath)


@dataclass(frozen=True)
class DensityCell:
    """A leaf: source box ``C`` (exact), target box ``G`` (exact), μ₀(C) = vol(G); ``buffer``:
    a thin cell around a ramp of the shears, whose image is loose.

    Guarantee: none by itself (the checker recomputes μ₀(C) and encloses the image)."""

    source_lo: tuple
    source_hi: tuple
    target_lo: tuple
    target_hi: tuple
    buffer: bool

    @property
    def mass(self) -> flint.fmpq:
        """``vol(G)`` (= μ₀(C) by construction)."""
        v = _ONE
        for a, b in zip(self.target_lo, self.target_hi, strict=True):
            v *= b - a
        return v


@dataclass(frozen=True, eq=False)
class DensityTransport:
    """A schedule pushing a box density near ``U([0,1]^d)`` and what certifies it.

    Attributes
    ----------
    density : BoxDensity
    width, epsilon, q : the theorem's parameters (exact)
    schedule : Schedule
        Axis shears and coordinate scalings, exact rational parameters, every duration 1.
    cells : tuple of DensityCell
        Leaves in depth-first order; ``tree`` the nested ``{"axis", "cuts", "targets",
        "parts"}`` objects whose leaves are cell numbers.
    bound_squared_estimate : float
        ``Σ μ₀(C) sup_B E_G|y − g|^2`` with ``B`` from a float64 box replay (heuristic).
    bound : flint.fmpq
        A dyadic claimed bound, at most ε (the checker decides).
    switches, formula_switches : int, int | None
    parts : int
        ``K``, the number of uniform parts per axis.

    Guarantee: none by itself (producer); the certificate's check decides.
    """

    density: BoxDensity
    width: int
    epsilon: flint.fmpq
    q: flint.fmpq
    schedule: Schedule = field(repr=False)
    cells: tuple = field(repr=False)
    tree: Any = field(repr=False)
    bound_squared_estimate: float
    bound: flint.fmpq
    switches: int
    formula_switches: int | None
    parts: int


# --- the exact Knothe map ----------------------------------------------------------------------


class _Tubes:
    """Conditional masses of the density: ``row(τ, j)`` the masses along axis ``j`` of the tube
    ``τ`` (grid indices of the axes ``< j``), summed over the axes ``> j``."""

    def __init__(self, density: BoxDensity) -> None:
        self.grid, self.M, self.d = density.grid, density.masses, density.d
        self.memo: dict[tuple, list] = {}

    def row(self, tau: tuple) -> list:
        if tau not in self.memo:
            sub = self.M[tau]
            j = len(tau)
            axes = tuple(range(1, self.d - j))
            self.memo[tau] = [
                sum(np.asarray(sub[r]).ravel().tolist(), _ZERO) if axes else sub[r]
                for r in range(sub.shape[0])
            ]
        return self.memo[tau]

    def cdf(self, tau: tuple) -> list:
        """``F_{j|τ}`` at the grid lines of axis ``j = len(τ)`` (exact, from 0 to 1)."""
        row = self.row(tau)
        total = sum(row, _ZERO)
        out, acc = [_ZERO], _ZERO
        for m in row:
            acc += m
            out.append(acc / total)
        return out

    def inverse(self, tau: tuple, t: flint.fmpq) -> flint.fmpq:
        """The smallest x with ``F_{j|τ}(x) = t`` (exact)."""
        g, F = self.grid[len(tau)], self.cdf(tau)
        if t <= 0:
            return g[0]
        r = next(r for r in range(len(F) - 1) if F[r + 1] >= t)
        return g[r] + (t - F[r]) / (F[r + 1] - F[r]) * (g[r + 1] - g[r])

    def interval(self, tau: tuple, t: flint.fmpq) -> int:
        """The grid interval of axis ``len(τ)`` (of positive mass) whose image contains ``t``
        in its interior (``t`` strictly inside an image of positive length)."""
        F = self.cdf(tau)
        return next(r for r in range(len(F) - 1) if F[r] < t < F[r + 1])

    def interior_images(self, tau: tuple) -> set:
        return {v for v in self.cdf(tau)[1:-1] if 0 < v < 1}

    def at(self, tau: tuple, x: flint.fmpq) -> flint.fmpq:
        """``F_{j|τ}(x)`` (exact; x inside the grid's range of axis j)."""
        g, F = self.grid[len(tau)], self.cdf(tau)
        r = min(max(bisect_right(g, x) - 1, 0), len(g) - 2)
        return F[r] + (x - g[r]) / (g[r + 1] - g[r]) * (F[r + 1] - F[r])

    def mass(self, tau: tuple) -> flint.fmpq:
        """μ₀ of the tube τ (grid indices of the first axes)."""
        return self.row(tau[:-1])[tau[-1]] if tau else _ONE


def _beta(g: tuple) -> flint.fmpq:
    """Half-width of a buffer around a grid line of an axis: 2^-32 of its finest spacing."""
    return min(b - a for a, b in pairwise(g)) * BETA


def _source_buffers(tubes: _Tubes, tau: tuple) -> list[tuple]:
    """Source intervals of axis j = len(τ) that hold the ramps of the later stages: every
    interior grid line ± β_j, merged with the tube's grid intervals of mass 0 next to them."""
    g, row = tubes.grid[len(tau)], tubes.row(tau)
    beta = _beta(g)
    spans = [[g[r] - beta, g[r] + beta] for r in range(1, len(g) - 1)]
    spans += [[g[r], g[r + 1]] for r, m in enumerate(row) if m == 0]
    merged: list[list] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(max(a, g[0]), min(b, g[-1])) for a, b in merged]


# --- the cells ---------------------------------------------------------------------------------


def _cells(tubes: _Tubes, K: int) -> tuple[list[DensityCell], Any]:
    d, grid = tubes.d, tubes.grid
    uniform = [flint.fmpq(i, K) for i in range(1, K)]
    cells: list[DensityCell] = []

    def build(j: int, tau: tuple, s_lo: list, s_hi: list, t_lo: list, t_hi: list) -> Any:
        if j == d:
            cells.append(DensityCell(tuple(s_lo), tuple(s_hi), tuple(t_lo), tuple(t_hi), False))
            return len(cells) - 1
        inside = []  # buffers, as target intervals
        if j < d - 1:
            inside = [(tubes.at(tau, a), tubes.at(tau, b)) for a, b in _source_buffers(tubes, tau)]
        cuts = set(uniform)
        if j == d - 1:
            cuts |= tubes.interior_images(tau)
        for a, b in inside:
            cuts = {c for c in cuts if not a <= c <= b} | {a, b}
        ts = sorted(c for c in cuts if 0 < c < 1)
        ends = [_ZERO, *ts, _ONE]
        sources = [tubes.inverse(tau, t) for t in ends]
        sources[0], sources[-1] = grid[j][0], grid[j][-1]
        parts = []
        for (ta, tb), (sa, sb) in zip(pairwise(ends), pairwise(sources), strict=True):
            lo_s, hi_s, lo_t, hi_t = list(s_lo), list(s_hi), list(t_lo), list(t_hi)
            lo_s[j], hi_s[j], lo_t[j], hi_t[j] = sa, sb, ta, tb
            if any(a <= ta and tb <= b for a, b in inside):
                cells.append(DensityCell(tuple(lo_s), tuple(hi_s), tuple(lo_t), tuple(hi_t), True))
                parts.append(len(cells) - 1)
            elif j == d - 1:
                parts.append(build(j + 1, tau, lo_s, hi_s, lo_t, hi_t))
            else:  # a main slab lies strictly inside one grid interval of positive mass
                r = bisect_right(grid[j], (sa + sb) / 2) - 1
                parts.append(build(j + 1, (*tau, r), lo_s, hi_s, lo_t, hi_t))
            if len(cells) > MAX_CELLS:
                raise DomainError(
                    f"epsilon: more than {MAX_CELLS} cells would be needed; give a larger epsilon"
                )
        if len(parts) == 1:
            return parts[0]
        return {"axis": j, "cuts": sources[1:-1], "targets": ts, "parts": parts}

    lo_s, hi_s = [g[0] for g in grid], [g[-1] for g in grid]
    tree = build(0, (), lo_s, hi_s, [_ZERO] * d, [_ONE] * d)
    return cells, tree


# --- the flow ----------------------------------------------------------------------------------


def _q(x: Any) -> flint.fmpq:
    """An mpf (or float) as an exact rational, rounded to a multiple of 2^-160."""
    m = int(mpmath.nint(mpmath.mpf(x) * mpmath.mpf(2) ** 160))
    return flint.fmpq(m, 2**160)


def _mpf(x: flint.fmpq) -> Any:
    return mpmath.mpf(int(x.p)) / int(x.q)


def _scale_piece(d: int, k: int, c: flint.fmpq, lam: flint.fmpq) -> Piece:
    W = [[lam if r == k else _ZERO] for r in range(d)]
    A = [[_ONE if r == k else _ZERO for r in range(d)]]
    return Piece(1, W, A, [-c])


def _ramp_pieces(
    d: int, k: int, j: int, ramps: list[tuple], per_piece: int, delta: flint.fmpq
) -> list[Piece]:
    """Shears ``x_k += Σ h (clip((x_j − u + δ)/(2δ), 0, 1))`` for ``(u, h)`` in ramps."""
    pieces = []
    for start in range(0, len(ramps), per_piece):
        W = [[] for _ in range(d)]
        A, b = [], []
        for u, h in ramps[start : start + per_piece]:
            slope = h / (2 * delta)
            for edge, sign in ((u - delta, 1), (u + delta, -1)):
                for r in range(d):
                    W[r].append(sign * slope if r == k else _ZERO)
                A.append([_ONE if r == j else _ZERO for r in range(d)])
                b.append(-edge)
        pieces.append(Piece(1, W, A, b))
    return pieces


def _chain(d: int, k: int, z: list, t: list) -> list[Piece]:
    """Scalings of axis k taking knots z (increasing) to targets t (non-decreasing): a
    translation, then one gap after another from the bottom (zero gaps to length ζ)."""
    t = list(t)
    i = 0
    while i < len(t):  # spread runs of equal targets over ζ-gaps, centred
        j = i
        while j + 1 < len(t) and t[j + 1] == t[i]:
            j += 1
        base = t[i]
        for m in range(i, j + 1):
            t[m] = base + (2 * (m - i) - (j - i)) * ZETA / 2
        i = j + 1
    with mpmath.workprec(_PREC):
        pos = [_mpf(v) for v in z]
        tt = [_mpf(v) for v in t]
        pieces = []
        c0 = flint.fmpq(math.floor(min(float(z[0]), float(t[0])))) - 1
        plan = [(c0, None, 0)] + [(None, m, m + 1) for m in range(len(z) - 1)]
        for c, below, above in plan:
            if c is None:
                c = _q(pos[below])
            cm = _mpf(c)
            ratio = (tt[above] - cm) / (pos[above] - cm)
            lam = _q(mpmath.log(ratio))
            if lam == 0:
                continue
            E = mpmath.exp(_mpf(lam))
            pos = [cm + (x - cm) * E if x > cm else x for x in pos]
            pieces.append(_scale_piece(d, k, c, lam))
    return pieces


def _stage(tubes: _Tubes, k: int, p: int) -> list[Piece]:
    """Stacking shears, the chain and the unstacking shears of axis k; the axes j < k are
    still in source coordinates (the stages run from the last axis to the first), so the
    bands are the grid tubes of those axes and the ramps sit on their grid lines."""
    d, g = tubes.d, tubes.grid[k]
    # axes k >= 1 first go affinely onto [0, 1] (translation and scaling), so that the bands
    # of the stacking stay narrow whatever the grid's range (the buffers' images scale with them)
    pre = _chain(d, k, [g[0], g[-1]], [_ZERO, _ONE]) if k else []
    knots = [(v - g[0]) / (g[-1] - g[0]) for v in g] if k else list(g)
    H = flint.fmpq(math.ceil(max(1, float(knots[-1] - knots[0])))) + 1
    shape = [len(tubes.grid[j]) - 1 for j in range(k)]
    mult = [math.prod(shape[j + 1 :]) for j in range(k)]
    z, t = [], []
    for tau in product(*(range(n) for n in shape)):
        s = sum(m * v for m, v in zip(mult, tau, strict=True)) * H
        z += [v + s for v in knots]  # a tube of mass 0 keeps its knots (nothing to carry)
        t += [f + s for f in (tubes.cdf(tau) if tubes.mass(tau) > 0 else knots)]
    stack, unstack = [], []
    for j in range(k):
        gj, delta = tubes.grid[j], _beta(tubes.grid[j]) / 4
        ramps = [(u, H * mult[j]) for u in gj[1:-1]]
        if ramps:
            stack += _ramp_pieces(d, k, j, ramps, p // 2, delta)
            unstack += _ramp_pieces(d, k, j, [(u, -h) for u, h in ramps], p // 2, delta)
    return pre + stack + _chain(d, k, z, t) + unstack


# --- float64 replay (heuristic) ----------------------------------------------------------------


_LD = np.longdouble


def _ld(x: flint.fmpq) -> Any:
    """An exact rational to long double (via 25 significant digits)."""
    return _LD(mpmath.nstr(_mpf(x), 25)) if x.q != 1 or abs(x.p) > 2**53 else _LD(int(x.p))


def _piece_arrays(piece: Piece):
    W = np.array([[_ld(v) for v in row] for row in piece.W], dtype=_LD)
    A = np.array([[_ld(v) for v in row] for row in piece.A], dtype=_LD)
    b = np.array([_ld(v) for v in piece.b], dtype=_LD)
    return W, A, b


def push_boxes(schedule: Schedule, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """Long-double boxes containing (up to rounding) the images of boxes ``[lo, hi]`` (n × d)
    under a schedule of axis shears and coordinate scalings.

    Guarantee: none (heuristic; the checker's exact replay decides)."""
    lo, hi = np.array(lo, dtype=_LD), np.array(hi, dtype=_LD)
    for piece in schedule.pieces:
        W, A, b = _piece_arrays(piece)
        tau = float(piece.duration)
        axes = [int(np.flatnonzero(row)[0]) for row in A]
        if len(set(axes)) == 1 and not W[axes[0]].any():  # shear of the other coordinates
            j = axes[0]
            s = A[:, j]

            def g(y, s=s, b=b, W=W):
                return (W * np.maximum(s * y[:, None] + b, 0)[:, None, :]).sum(axis=2)

            pts = [lo[:, j], hi[:, j]] + [
                np.clip(-bi / si, lo[:, j], hi[:, j]) for si, bi in zip(s, b, strict=True)
            ]
            vals = np.stack([g(y) for y in pts])
            lo, hi = lo + tau * vals.min(axis=0), hi + tau * vals.max(axis=0)
        else:
            for i, k in enumerate(axes):
                s, c, rate = A[i, k], -b[i] / A[i, k], W[k, i] * A[i, k] * tau
                for arr in (lo, hi):
                    act = s * (arr[:, k] - c) > 0
                    arr[act, k] = c + (arr[act, k] - c) * np.exp(rate)
    return lo, hi


def push_points(schedule: Schedule, X: Any) -> np.ndarray:
    """Float64 images of points (n × d). Guarantee: none (heuristic)."""
    X = np.asarray(X, dtype=float)
    return push_boxes(schedule, X, X)[0].astype(float)


def _estimate(schedule: Schedule, cells: list[DensityCell]) -> float:
    """``Σ vol(G) sup_{y∈B} E_{g∼U(G)}|y − g|^2``: ``B = G`` for the main cells (the chain is
    built at 256 bits, their images are ``G`` to about 2^-100), long-double boxes ``B`` with a
    1% margin for the buffer cells (whose images pass through compressions by ζ that a long
    double does not resolve well). Guarantee: none (heuristic; the checker decides)."""

    def f(rows):
        return np.array([[_ld(v) for v in row] for row in rows], dtype=_LD)

    tlo, thi = f(c.target_lo for c in cells), f(c.target_hi for c in cells)
    centre, side = (tlo + thi) / 2, thi - tlo
    S = (side**2 / 3).sum(axis=1)
    buf = np.array([c.buffer for c in cells], dtype=bool)
    if buf.any():
        slo = f(c.source_lo for c, b in zip(cells, buf, strict=True) if b)
        shi = f(c.source_hi for c, b in zip(cells, buf, strict=True) if b)
        blo, bhi = push_boxes(schedule, slo, shi)
        far = np.maximum((blo - centre[buf]) ** 2, (bhi - centre[buf]) ** 2)
        S[buf] = ((far + side[buf] ** 2 / 12).sum(axis=1) + 1) * 1.01
    return float((side.prod(axis=1) * S).sum())


def _dyadic_up(x: float, bits: int = 40) -> flint.fmpq:
    return flint.fmpq(math.ceil(x * 2**bits), 2**bits)


# --- the construction --------------------------------------------------------------------------


def density_to_cube(density: BoxDensity, width: int, epsilon: Any, q: Any = 1) -> DensityTransport:
    """A schedule of width ``p`` pushing ``density`` to within ``W_2 <= bound <= ε`` of
    ``U([0,1]^d)``, with the cells that certify it (proofs/cube.md §6).

    Raises
    ------
    InputError, DomainError
        As :func:`~certified.cube.formula.check_parameters` (p < d, ε <= 0, q outside
        [1, d/(d−1))); d = 1; ε so small that more than 200,000 cells would be needed.

    Guarantee: none by itself (producer); :func:`~certified.cube.density_certificate` and the
    checker decide.
    """
    d = density.d
    p, eps, qq = check_parameters(d, width, epsilon, q)
    if d < 2:
        raise DomainError("density: d = 1 is not supported (theorem F here needs d >= 2)")
    tubes = _Tubes(density)
    pieces: list[Piece] = []
    for k in reversed(range(d)):  # the last axis first: earlier axes still in source coordinates
        pieces += _stage(tubes, k, p)
    if not pieces:  # already uniform on [0,1]^d: one idle piece (threshold above the grid)
        pieces.append(_scale_piece(d, 0, density.grid[0][-1] + 1, _ONE))
    schedule = Schedule(d, Activation.RELU, tuple(pieces))
    K = max(1, math.ceil(math.sqrt(d / 3) / float(eps) * (1 + 2**-6)))
    for _ in range(MAX_TRIES + 1):
        cells, tree = _cells(tubes, K)
        est = _estimate(schedule, cells)
        bound = _dyadic_up(math.sqrt(est) * (1 + 2**-20) + 2**-36)
        if bound <= eps:
            break
        K += 1
    else:
        raise DomainError(
            f"epsilon: the cells reach W_2 <= {math.sqrt(est):.4g} > epsilon = {float(eps):.4g} "
            f"at {K - 1} parts per axis; give a larger epsilon"
        )
    L = formula_switches(d, p, eps, qq)
    switches = sum(1 for a, b in pairwise(pieces) if a != b)
    return DensityTransport(
        density, p, eps, qq, schedule, tuple(cells), tree, est, bound, switches, L, K
    )
