"""Discrete probability measures with exact atoms and weights, as plain arrays.

A measure is a pair ``(points, weights)``: ``points`` an ``(n, d)`` object array of
:class:`flint.fmpq`, ``weights`` an ``(n,)`` object array of :class:`flint.fmpq`, ``>= 0``,
summing to exactly 1. Repeated atoms are allowed; :func:`merged_atoms` gives the canonical form
(equal atoms merged, zero weights dropped) on which equality of measures is decided exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str
from certified.errors import InputError, ShapeError
from certified.io import exact_matrix, exact_vector

__all__ = [
    "Atoms",
    "cumulants_from_moments",
    "discrete_measure",
    "first_differing_moment",
    "merged_atoms",
    "project",
    "same_measure",
]

Atoms = dict[tuple[flint.fmpq, ...], flint.fmpq]
"""Canonical form of a discrete measure: atom -> positive weight (exact)."""


def discrete_measure(measure: Any, field: str = "mu") -> tuple[np.ndarray, np.ndarray]:
    """Validate a discrete probability measure and return it as exact arrays.

    Parameters
    ----------
    measure : (points, weights) pair, or mapping ``{"points": ..., "weights": ...}``
        ``points``: ``n x d`` numbers (a flat list of ``n`` numbers means ``d = 1``);
        ``weights``: ``n`` numbers ``>= 0`` summing to exactly 1, or ``None`` (uniform, ``1/n``).
        Numbers as :func:`~certified.arith.exact.to_fmpq` reads them (floats exactly).
    field : str
        Name in error messages (``"mu"``, ``"nu"``).

    Returns
    -------
    points : numpy.ndarray, object, (n, d) of fmpq
    weights : numpy.ndarray, object, (n,) of fmpq

    Raises
    ------
    ShapeError
        ``n = 0``, ``d = 0``, ragged points, or as many weights as points not given.
    NonFiniteError, NumberFormatError
        A NaN / infinite / malformed number.
    InputError
        A negative weight, or weights whose exact sum is not 1.

    Guarantee: exact.
    """
    if isinstance(measure, Mapping):
        unknown = set(measure) - {"points", "weights"}
        if unknown or "points" not in measure:
            raise InputError(f"{field}: expected keys points (and weights), got {sorted(measure)}")
        raw_points, raw_weights = measure["points"], measure.get("weights")
    elif isinstance(measure, Sequence) and not isinstance(measure, str) and len(measure) == 2:
        raw_points, raw_weights = measure
    else:
        raise InputError(f"{field}: expected a (points, weights) pair or a mapping with points")
    if isinstance(raw_points, np.ndarray):
        flat = raw_points.ndim == 1
    else:
        flat = isinstance(raw_points, (list, tuple)) and any(
            not isinstance(y, (list, tuple, np.ndarray)) for y in raw_points
        )
    if flat:
        raw_points = [[x] for x in raw_points]
    points = exact_matrix(raw_points, f"{field}.points", row_what="points", col_what="coordinates")
    n = points.shape[0]
    if raw_weights is None:
        weights = np.empty(n, dtype=object)
        weights[:] = [flint.fmpq(1, n)] * n
        return points, weights
    weights = exact_vector(raw_weights, f"{field}.weights", length=n, what="weights")
    for k, w in enumerate(weights):
        if w < 0:
            raise InputError(
                f"{field}.weights[{k}]: {fmpq_to_str(w)} is negative; use weights >= 0"
            )
    total = sum(weights, flint.fmpq(0))
    if total != 1:
        raise InputError(
            f"{field}.weights: sum to {fmpq_to_str(total)}, not exactly 1; rescale them (write "
            'inexact values as strings such as "1/3")'
        )
    return points, weights


def merged_atoms(points: np.ndarray, weights: np.ndarray) -> Atoms:
    """Canonical form: equal atoms merged (weights added), zero weights dropped.

    Guarantee: exact (two measures are equal iff their canonical forms are equal).
    """
    atoms: Atoms = {}
    for y, w in zip(points, weights, strict=True):
        key = tuple(y)
        atoms[key] = atoms.get(key, flint.fmpq(0)) + w
    return {y: w for y, w in atoms.items() if w != 0}


def same_measure(mu: tuple[np.ndarray, np.ndarray], nu: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether two validated discrete measures are equal (exactly, after merging atoms).

    Raises
    ------
    ShapeError
        The measures live in different dimensions.

    Guarantee: exact.
    """
    if mu[0].shape[1] != nu[0].shape[1]:
        raise ShapeError(
            f"nu.points: {nu[0].shape[1]} coordinates, mu has {mu[0].shape[1]}; give two "
            "measures on the same space"
        )
    return merged_atoms(*mu) == merged_atoms(*nu)


def project(points: np.ndarray, direction: Sequence[Any]) -> np.ndarray:
    """Exact projections ``<u, y>`` of the atoms on ``u``, as an ``(n, 1)`` fmpq array.

    Guarantee: exact.
    """
    u = [flint.fmpq(c) for c in direction]
    out = np.empty((points.shape[0], 1), dtype=object)
    for i, y in enumerate(points):
        out[i, 0] = sum((a * b for a, b in zip(u, y, strict=True)), flint.fmpq(0))
    return out


def first_differing_moment(
    x_mu: Atoms, x_nu: Atoms, center: flint.fmpq
) -> tuple[int, flint.fmpq] | None:
    """Order ``m`` and difference ``M_m(mu) - M_m(nu)`` of the first differing moment about
    ``center`` of two 1-D measures in canonical form, or None if they are equal.

    Two distinct measures on N atoms in all differ in a moment of order <= N - 1 (the
    Vandermonde matrix of N distinct atoms is invertible), so the loop ends.

    Guarantee: exact.
    """
    if x_mu == x_nu:
        return None
    support = sorted(set(x_mu) | set(x_nu))
    diff = [x_mu.get(y, flint.fmpq(0)) - x_nu.get(y, flint.fmpq(0)) for y in support]
    power = [flint.fmpq(1)] * len(support)
    shifted = [y[0] - center for y in support]
    for m in range(1, len(support)):
        power = [p * s for p, s in zip(power, shifted, strict=True)]
        delta = sum((p * w for p, w in zip(power, diff, strict=True)), flint.fmpq(0))
        if delta != 0:
            return m, delta
    raise AssertionError("distinct measures on N atoms differ in a moment of order < N")


def cumulants_from_moments(moments: Sequence[flint.fmpq]) -> list[flint.fmpq]:
    """Cumulants ``kappa_1..kappa_J`` from raw moments ``m_0 = 1, m_1..m_J`` (exact).

    Recursion ``kappa_n = m_n - sum_{k=1}^{n-1} C(n-1, k-1) kappa_k m_{n-k}`` (the coefficients
    of log of the exponential generating function; proved in ``proofs/moment_matching.py``).

    Guarantee: exact.
    """
    m = [flint.fmpq(v) for v in moments]
    if not m or m[0] != 1:
        raise InputError("moments: m_0 must be 1 (a probability measure)")
    kappa: list[flint.fmpq] = [flint.fmpq(0)]  # kappa[0] unused
    for n in range(1, len(m)):
        kappa.append(
            m[n]
            - sum((comb(n - 1, k - 1) * kappa[k] * m[n - k] for k in range(1, n)), flint.fmpq(0))
        )
    return kappa[1:]
