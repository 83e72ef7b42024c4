"""Discrete probability measures ``Σ_k a_k δ_{x_k}`` with exact weights.

A :class:`Measure` holds its points as exact rationals (a float input is its exact binary
value; strings such as ``"1/3"`` or ``"0.1"`` are read exactly) together with the tightest
float64 enclosure of every coordinate, and its weights as exact rationals that sum to exactly 1.
The float enclosures feed the vectorised rigorous cost bounds of
:mod:`certified.transport._costs`; the exact values go into certificates.
"""

from __future__ import annotations

import os
from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_array_to_float, fmpq_to_float, fmpq_to_str
from certified.errors import InputError, NonFiniteError, RangeOverflowError, ShapeError

__all__ = ["Measure"]


def _float_points(points: np.ndarray) -> np.ndarray:
    """A float32 / float64 array of points as float64, exactly (or raise)."""
    if points.ndim != 2:
        raise ShapeError(
            f"points: expected an n x d array (one point per row), got shape {points.shape}; "
            "reshape 1-D data with .reshape(-1, 1)"
        )
    x = np.array(points, dtype=np.float64, order="C")  # a copy; exact from float32/64
    if not np.all(np.isfinite(x)):
        i, k = np.argwhere(~np.isfinite(x))[0]
        raise NonFiniteError(f"points[{i}][{k}]: {x[i, k]!r} is not finite; use finite numbers")
    return x


class Measure:
    """A discrete probability measure ``μ = Σ_k weights[k] δ_{points[k]}`` on ``R^d``.

    Parameters
    ----------
    points : array_like, shape (n, d)
        Atoms, ``n >= 1``, ``d >= 1``: floats (their exact binary values), ints, exact strings
        (``"1/3"``, ``"0.1"``), ``fmpq``. Repeated points are allowed.
    weights : array_like, shape (n,), optional
        Exact non-negative weights summing to exactly 1 (floats are read exactly, so ten
        times ``0.1`` does not sum to 1: write ``"1/10"``, or use :meth:`normalized`).
        Default: uniform, exactly ``1/n`` each.

    Raises
    ------
    ShapeError
        Points not an ``n x d`` array, ``n = 0`` or ``d = 0``, weights of the wrong length.
    NonFiniteError
        A NaN or infinite coordinate or weight.
    InputError
        A negative weight, or weights whose exact sum is not 1.

    Guarantee: exact (points and weights are the exact rationals given; ``points_lo`` and
    ``points_hi`` are the tightest float64 bounds on each coordinate).
    """

    __slots__ = (
        "_hi", "_lo", "_points", "_weights", "_wfloat", "exact_float", "normalized_from",
        "uniform",
    )  # fmt: skip

    def __init__(self, points: Any, weights: Any = None) -> None:
        if isinstance(points, Measure):
            raise InputError("points: already a Measure; pass it directly")
        if isinstance(points, np.ndarray) and points.dtype in (np.float64, np.float32):
            lo = _float_points(points)
            if lo.shape[0] == 0 or lo.shape[1] == 0:
                raise ShapeError(f"points: empty array of shape {lo.shape}; give n >= 1 points")
            self._points: np.ndarray | None = None  # exact values built on demand
            self._lo = self._hi = lo
            self.exact_float = True
        else:
            from certified.io import exact_matrix

            q = exact_matrix(points, "points", row_what="points", col_what="coordinates")
            self._points = q
            try:
                self._lo = fmpq_array_to_float(q, "down", "points")
                self._hi = fmpq_array_to_float(q, "up", "points")
            except RangeOverflowError as exc:
                raise RangeOverflowError(f"{exc}; rescale the points") from None
            self.exact_float = bool(np.array_equal(self._lo, self._hi))
        for a in (self._lo, self._hi):
            a.flags.writeable = False
        n = self._lo.shape[0]
        if weights is None:
            self._weights = np.empty(n, dtype=object)
            self._weights[:] = [flint.fmpq(1, n)] * n
            self.uniform = True
        else:
            self._weights = _exact_weights(weights, n)
            self.uniform = all(w == self._weights[0] for w in self._weights)
        self._weights.flags.writeable = False
        if self._points is not None:
            self._points.flags.writeable = False
        self._wfloat: np.ndarray | None = None
        self.normalized_from: flint.fmpq | None = None
        """The exact sum the given weights were divided by (:meth:`normalized`,
        ``from_file(normalize=True)``), None when they were used as given; recorded in
        certificates as ``"normalized_from_sum"``."""

    @classmethod
    def normalized(cls, points: Any, weights: Any) -> Measure:
        """The measure with weights ``w_k / Σ w`` (exact rational division); ``Σ w`` is kept
        in :attr:`normalized_from` (None when it is 1) and recorded by :meth:`to_json`.

        Guarantee: exact.
        """
        from certified.io import exact_vector

        n = np.shape(points)[0] if np.ndim(points) else 0
        w = exact_vector(weights, "weights", length=n, what="weights (one per point)")
        total = sum(w, flint.fmpq(0))
        if any(x < 0 for x in w) or total <= 0:
            raise InputError("weights: need non-negative weights with a positive sum")
        out = cls(points, [x / total for x in w])
        out.normalized_from = None if total == 1 else total
        return out

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, normalize: bool = False) -> Measure:
        """Read JSON ``{"points": n x d, "weights": n}`` (:func:`certified.io.read_measure`;
        ``normalize``: weights divided exactly by their sum instead of refused when it is not 1).

        Guarantee: exact.
        """
        from certified.io import read_measure_file

        points, weights, total = read_measure_file(path, normalize=normalize)
        out = cls(points, weights)
        out.normalized_from = total
        return out

    # --- views ---------------------------------------------------------------------------

    @property
    def n(self) -> int:
        """Number of atoms."""
        return self._lo.shape[0]

    @property
    def d(self) -> int:
        """Dimension of the ambient space."""
        return self._lo.shape[1]

    @property
    def points(self) -> np.ndarray:
        """Exact atoms, ``dtype=object`` array of ``fmpq``, shape (n, d)."""
        if self._points is None:
            flat = [flint.fmpq(*v.as_integer_ratio()) for v in self._lo.ravel().tolist()]
            out = np.empty(len(flat), dtype=object)
            out[:] = flat
            out.flags.writeable = False
            self._points = out.reshape(self._lo.shape)
        return self._points

    @property
    def weights(self) -> np.ndarray:
        """Exact weights, ``dtype=object`` array of ``fmpq`` summing to exactly 1."""
        return self._weights

    @property
    def points_lo(self) -> np.ndarray:
        """Largest float64 lower bounds on the coordinates (read-only)."""
        return self._lo

    @property
    def points_hi(self) -> np.ndarray:
        """Smallest float64 upper bounds on the coordinates (read-only)."""
        return self._hi

    @property
    def points_float(self) -> np.ndarray:
        """Nearest float64 points (heuristic use only: producers, plots)."""
        if self.exact_float:
            return self._lo
        return fmpq_array_to_float(self.points, "nearest", "points")

    @property
    def weights_float(self) -> np.ndarray:
        """Nearest float64 weights (heuristic use only: producers)."""
        if self._wfloat is None:
            if self.uniform:
                self._wfloat = np.full(self.n, 1.0 / self.n)
            else:
                self._wfloat = np.array([fmpq_to_float(w, "nearest") for w in self._weights])
        return self._wfloat

    def to_json(self) -> dict[str, Any]:
        """The measure input format ``{"points": n x d, "weights": n}`` with exact strings,
        and ``"normalized_from_sum"`` when the weights were divided by their sum.

        Guarantee: exact.
        """
        from certified.certificates import exact_number

        out = {
            "points": [[exact_number(v) for v in row] for row in self.points],
            "weights": [exact_number(w) for w in self._weights],
        }
        if self.normalized_from is not None:
            out["normalized_from_sum"] = exact_number(self.normalized_from)
        return out

    def __repr__(self) -> str:
        kind = "uniform" if self.uniform else "weighted"
        return f"Measure(n={self.n}, d={self.d}, {kind})"


def _exact_weights(weights: Any, n: int) -> np.ndarray:
    from certified.io import exact_vector

    w = exact_vector(weights, "weights", length=n, what="weights (one per point)")
    for k, x in enumerate(w):
        if x < 0:
            raise InputError(f"weights[{k}]: {fmpq_to_str(x)} is negative; weights are >= 0")
    total = sum(w, flint.fmpq(0))
    if total != 1:
        raise InputError(
            f"weights: sum to {fmpq_to_str(total)}, not exactly 1; rescale them "
            '(Measure.normalized), writing inexact values as strings such as "1/3"'
        )
    return w


def as_measure(x: Any, name: str) -> Measure:
    """``x`` if it is a :class:`Measure`, else the uniform measure on the points ``x``.

    Guarantee: exact."""
    if isinstance(x, Measure):
        return x
    if x is None:
        raise InputError(f"{name}: expected a Measure or an n x d array of points, got None")
    try:
        return Measure(x)
    except InputError as exc:
        raise type(exc)(f"{name}: {exc}") from None
