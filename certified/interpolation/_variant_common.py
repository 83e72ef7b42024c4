"""Helpers shared by the interpolation variants (classification, semi-autonomous,
autonomous): exact parsing of point sets and exact rational linear algebra.

Guarantee: exact.
"""

from __future__ import annotations

from typing import Any

import flint
import numpy as np

from certified.arith.exact import fmpq_to_str, to_fmpq, to_fmpq_array
from certified.errors import DomainError, InputError, ShapeError

__all__ = [
    "as_points",
    "check_distinct",
    "dot",
    "integer_nullspace",
    "positive_time",
    "require_dimension_two",
]

_ZERO = flint.fmpq(0)


def as_points(X: Any, field: str, d: int | None = None) -> np.ndarray:
    """``X`` as an (N, d) object array of fmpq with N >= 1 (and the given d).

    Raises
    ------
    ShapeError
        Not a non-empty 2-D array, or d differs.
    NonFiniteError, NumberFormatError
        A bad number, named.

    Guarantee: exact.
    """
    a = to_fmpq_array(X, field)
    if a.size == 0 or (a.ndim == 2 and a.shape[0] == 0):
        raise ShapeError(f"{field}: no points (N = 0); give at least one point")
    if a.ndim != 2:
        raise ShapeError(
            f"{field}: expected an N x d array (one point per row), got shape {a.shape}"
        )
    if a.shape[0] == 0:
        raise ShapeError(f"{field}: no points (N = 0); give at least one point")
    if a.shape[1] == 0:
        raise ShapeError(f"{field}: points of dimension 0; give d >= 1 coordinates")
    if d is not None and a.shape[1] != d:
        raise ShapeError(
            f"{field}: points have {a.shape[1]} coordinates but the other data have {d}; "
            "give every point the same dimension"
        )
    return a


def check_distinct(X: np.ndarray, field: str) -> None:
    """Raise InputError naming two equal rows of X.

    Guarantee: exact.
    """
    seen: dict[tuple, int] = {}
    for n, row in enumerate(X):
        key = tuple(row)
        if key in seen:
            raise InputError(
                f"{field}[{n}]: equal to {field}[{seen[key]}]; the points must be pairwise "
                "distinct (remove or merge the duplicate)"
            )
        seen[key] = n


def require_dimension_two(d: int, what: str) -> None:
    """Raise DomainError when d = 1 (flows in R^1 preserve order).

    Guarantee: exact.
    """
    if d < 2:
        raise DomainError(
            f"X: dimension d = {d}: {what} needs d >= 2, because the flow of an ODE in R^1 "
            "preserves the order of points; embed the data in R^2 (append a zero coordinate)"
        )


def positive_time(time: Any) -> flint.fmpq:
    """The time horizon as an exact positive rational.

    Guarantee: exact.
    """
    T = to_fmpq(time, "time")
    if T <= 0:
        raise InputError(f"time: {fmpq_to_str(T)} is not positive; give a time T > 0")
    return T


def dot(u: Any, v: Any) -> flint.fmpq:
    """Exact inner product.

    Guarantee: exact.
    """
    return sum((a * b for a, b in zip(u, v, strict=True)), _ZERO)


def integer_nullspace(rows: list[list[flint.fmpq]], d: int) -> list[list[flint.fmpz]]:
    """A basis of ``{a in Q^d : r·a = 0 for every row r}``, as integer vectors.

    Guarantee: exact.
    """
    if not rows:
        return [[flint.fmpz(int(i == k)) for i in range(d)] for k in range(d)]
    scaled = []
    for r in rows:
        den = flint.fmpz(1)
        for q in r:
            den = den * q.q // flint.fmpz.gcd(den, q.q)
        scaled.append([(q * den).p for q in r])
    basis, nullity = flint.fmpz_mat(scaled).nullspace()
    out = []
    for k in range(nullity):
        col = [basis[i, k] for i in range(d)]
        g = flint.fmpz(0)
        for c in col:
            g = flint.fmpz.gcd(g, c)
        out.append([c // g for c in col] if g > 1 else col)
    return out
