"""Theorem F for empirical measures: an exact ReLU flow pushing ``μ = Σ w_k δ_{x_k}`` to within
``W_q <= ε`` of ``U([0,1]^d)`` (theorems.md §3, row F; proofs/cube.md).

Construction (untrusted; the checker decides):

1. merge equal atoms (a flow map sends them to one point);
2. partition ``[0,1]^d`` into guillotine cells whose volumes are exactly the weights of their
   atoms (:func:`~certified.cube.cells.guillotine_partition`), with about ``K`` parts per axis,
   ``K`` the smallest count whose cells have half-diagonals below ε;
3. give every atom a target near the centre of its cell (distinct targets, offsets a 2^-12-th
   of the cell's shortest side) and interpolate exactly with laminar phases
   (:func:`~certified.interpolation.construct_interpolation`, theorem A's construction).

Then ``Φ_T(x_k)`` lies in its cell, and ``W_q(Φ_T#μ, U) <= max_k sup_{g ∈ cell(k)} |Φ_T(x_k) − g|``
for every ``q >= 1`` (proofs/cube.md §4): about half a cell diagonal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.cube.cells import CellPartition, guillotine_partition
from certified.cube.formula import check_parameters, formula_switches
from certified.errors import DomainError
from certified.transport.measure import Measure, as_measure

__all__ = ["CubeTransport", "sup_distance_squared", "transport_to_cube"]

_ZERO = flint.fmpq(0)
MAX_TRIES = 6  # part counts tried above the first guess
MAX_DIMENSION = 14  # leaves nest at depth 3 + 2d <= 32 (the checker's MAX_DEPTH)


@dataclass(frozen=True, eq=False)
class CubeTransport:
    """A schedule pushing an empirical measure near ``U([0,1]^d)`` and what certifies it.

    Attributes
    ----------
    measure : Measure
        The input (with repeated atoms as given).
    width, epsilon, q : the theorem's parameters (exact)
    interpolation : Interpolation
        The exact laminar construction (schedule, phases, distinct atoms ``X``, targets ``Y``).
    partition : CellPartition
        Cells over the *distinct* atoms (``units``: indices into ``interpolation.X``).
    unit_of_atom : numpy.ndarray
        For each atom of ``measure``, its distinct atom.
    bound_squared : flint.fmpq
        ``max_k sup_{g ∈ cell(k)} |y_k − g|^2``, exact.
    bound : flint.fmpq
        A dyadic upper bound on ``sqrt(bound_squared)``, at most ε.
    switches, formula_switches : int, int | None
        The schedule's L and theorem F's (None: more than 10,000 digits).

    Guarantee: none by itself (producer); the certificate's check decides.
    """

    measure: Measure
    width: int
    epsilon: flint.fmpq
    q: flint.fmpq
    interpolation: Any = field(repr=False)
    partition: CellPartition = field(repr=False)
    unit_of_atom: np.ndarray = field(repr=False)
    bound_squared: flint.fmpq
    bound: flint.fmpq
    switches: int
    formula_switches: int | None

    @property
    def schedule(self):
        """The ReLU schedule (laminar phases, exact rational parameters)."""
        return self.interpolation.schedule


def sup_distance_squared(y: Any, lo: Any, hi: Any) -> flint.fmpq:
    """``sup_{g ∈ Π[lo_k, hi_k]} |y − g|^2 = Σ_k max(y_k − lo_k, hi_k − y_k)^2``, exact.

    Guarantee: exact (proof: proofs/bounds.md#cube-coupling)."""
    return sum((max(a - lo_k, h - a) ** 2 for a, lo_k, h in zip(y, lo, hi, strict=True)), _ZERO)


def _units(mu: Measure) -> tuple[np.ndarray, list, np.ndarray]:
    """Distinct atoms (exact), their merged weights, and the unit of every atom."""
    index: dict[tuple, int] = {}
    of_atom = np.empty(mu.n, dtype=np.int64)
    weights: list = []
    for k, row in enumerate(mu.points):
        key = tuple(row)
        if key not in index:
            index[key] = len(weights)
            weights.append(_ZERO)
        u = of_atom[k] = index[key]
        weights[u] += mu.weights[k]
    X = np.empty((len(weights), mu.d), dtype=object)
    for key, u in index.items():
        X[u, :] = key
    return X, weights, of_atom


def _targets(partition: CellPartition, n: int, d: int) -> tuple[np.ndarray, flint.fmpq]:
    """Distinct targets near the cells' centres, and the exact max squared sup-distance."""
    Y = np.empty((n, d), dtype=object)
    worst = _ZERO
    for cell in partition.cells:
        m = len(cell.units)
        side = min(h - lo for lo, h in zip(cell.lo, cell.hi, strict=True))
        step = side / (m * 4096)
        for j, u in enumerate(cell.units):
            off = step * (2 * j - (m - 1)) / 2  # along the diagonal: |off| < side / 4096
            y = [(lo + h) / 2 + off for lo, h in zip(cell.lo, cell.hi, strict=True)]
            Y[u, :] = y
            worst = max(worst, sup_distance_squared(y, cell.lo, cell.hi))
    return Y, worst


def _sqrt_up(x: flint.fmpq, bits: int = 40) -> flint.fmpq:
    """A dyadic upper bound on sqrt(x), within 2^-bits. Guarantee: upper bound.

    proof: proofs/bounds.md#cube-sqrt"""
    s = math.isqrt(int(x.p) * 4**bits // int(x.q))  # s^2 <= x 4^bits
    return flint.fmpq(s + 1, 2**bits)


def _partition(X: np.ndarray, weights: list, d: int, eps: flint.fmpq):
    """The first part count K (per axis) from ⌈√d/(2ε)⌉ up whose targets are within ε."""
    points = np.array([[float(v) for v in row] for row in X], dtype=np.float64)
    k = max(1, math.ceil(math.sqrt(d) / (2 * float(eps)) * (1 + 2**-6)))
    best = None
    for _ in range(MAX_TRIES + 1):
        part = guillotine_partition(points, weights, (k,) * d)
        Y, worst = _targets(part, len(weights), d)
        if best is None or worst < best[2]:
            best = (part, Y, worst)
        if worst <= eps * eps or k**d > len(weights):
            break
        k += 1
    return best


def transport_to_cube(
    mu: Any, width: int, epsilon: Any, q: Any = 1, *, time: Any = 1
) -> CubeTransport:
    """An exact laminar ReLU schedule of width ``p`` and a certified bound
    ``W_q(Φ_T#μ, U([0,1]^d)) <= bound``; the bound is at most ε unless the atoms are too few
    or too heavy (then :class:`~certified.errors.DomainError`).

    Parameters
    ----------
    mu : Measure or (n, d) array of points (uniform weights)
    width : int
        ``p >= d`` (theorem F's formula needs it).
    epsilon : number
        ``ε > 0`` (exact; ``"0.05"`` is 1/20).
    q : number
        ``1 <= q < d/(d−1)``; the bound does not depend on it.
    time : number
        ``T > 0``.

    Raises
    ------
    InputError, DomainError
        Bad parameters (:func:`~certified.cube.formula.check_parameters`), d = 1 (laminar
        pieces cannot move a point on a line), or no partition found within ε.

    Guarantee: none (producer); :func:`cube_certificate` and the checker decide.
    """
    from certified.interpolation.construct import construct_interpolation

    mu = as_measure(mu, "measure")
    d = mu.d
    p, eps, qq = check_parameters(d, width, epsilon, q)
    if d == 1:
        raise DomainError(
            "measure: d = 1: an exact laminar flow cannot move points on a line (w ⊥ a means "
            "w = 0), and no other exact construction is implemented; use d >= 2"
        )
    if d > MAX_DIMENSION:
        raise DomainError(
            f"measure: d = {d} > {MAX_DIMENSION}: the cell tree would nest deeper than the "
            "checker's JSON depth limit (32)"
        )
    X, weights, of_atom = _units(mu)
    part, Y, worst = _partition(X, weights, d, eps)
    if worst > eps * eps:
        need = math.ceil((math.sqrt(d) / (2 * float(eps))) ** d)
        raise DomainError(
            f"epsilon: the best partition has atoms {math.sqrt(float(worst)):.4g} > epsilon from "
            f"points of their cells: {len(weights)} distinct atoms (largest weight "
            f"{float(max(weights)):.3g}) are too few or too heavy; about {need} equal atoms "
            "are needed, or a larger epsilon"
        )
    interp = construct_interpolation(X, Y, p, time=time, variant="general")
    bound = min(_sqrt_up(worst), eps)
    L = formula_switches(d, p, eps, qq)
    return CubeTransport(
        mu, p, eps, qq, interp, part, of_atom, worst, bound, interp.schedule.switches, L
    )
