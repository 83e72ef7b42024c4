"""Balls over python-flint: precision control, conversion in, exact endpoints out.

python-flint's working precision ``flint.ctx.prec`` and series cap ``flint.ctx.cap`` are
process-global (and not thread-safe). The only place this package changes them is
:func:`precision`, which always restores both; every public function here takes its
precision explicitly and leaves the global state as it found it.

Facts about python-flint 0.9 that this module relies on (checked by ``tests/arith/test_ball.py``):

* ``arb(int)``, ``arb(fmpz)``, ``arb(float)``, ``arb((man, exp))`` and ``arb(arb)`` are exact
  at any ``ctx.prec``; ``arb(fmpq)`` and ``arb(str)`` round to ``ctx.prec`` bits (a ball
  containing the value).
* ``arb_mat([[arb, ...], ...])`` copies the balls exactly.
* ``ball.mid()`` and ``ball.rad()`` are exact arbs whose ``man_exp()`` gives the exact
  dyadic value; ``ball.lower()`` / ``ball.upper()`` are *rounded outward to ctx.prec*, so
  exact endpoints are computed here as ``mid -/+ rad`` in rational arithmetic.
* A ball with a NaN or infinite midpoint or radius "contains" everything
  (``arb('nan').contains(1)`` is True), hence :func:`require_finite` before any containment.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import flint
import numpy as np

from certified.arith.exact import to_fmpq, walk_array
from certified.errors import (
    DomainError,
    InputError,
    NonFiniteError,
    PrecisionError,
    ShapeError,
)

__all__ = [
    "MAX_CAP",
    "MAX_EXACT_EXPONENT",
    "MAX_PREC",
    "MIN_PREC",
    "arb_mat_endpoints",
    "arb_matrix",
    "arb_vector",
    "ball_subset",
    "check_precision",
    "contains",
    "endpoints",
    "mid_rad",
    "precision",
    "require_finite",
    "to_arb",
]

MIN_PREC = 8
"""Smallest accepted working precision in bits."""
MAX_PREC = 1 << 16
"""Largest accepted working precision in bits (65536, about 19700 decimal digits)."""
MAX_CAP = 1 << 16
"""Largest accepted series length ``ctx.cap``."""
MAX_EXACT_EXPONENT = 1 << 24
"""Balls with a binary exponent beyond ``+/-MAX_EXACT_EXPONENT`` have no exact rational
endpoints here (they would need megabytes of digits)."""


def _check_int(value: Any, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PrecisionError(
            f"{field}: {value!r} is not an integer {what}; use an int between {low} and {high}"
        )
    if not low <= int(value) <= high:
        raise PrecisionError(
            f"{field}: {int(value)} is out of range; use an int between {low} and {high}"
        )
    return int(value)


def check_precision(prec: Any, field: str = "prec") -> int:
    """Validate a working precision in bits.

    Parameters
    ----------
    prec : int
        Bits of working precision, ``MIN_PREC <= prec <= MAX_PREC``. ``bool`` and floats
        (even integral ones) are rejected.
    field : str
        Name of the input for the error message.

    Returns
    -------
    int

    Raises
    ------
    PrecisionError

    Guarantee: exact.
    """
    return _check_int(prec, field, MIN_PREC, MAX_PREC, "number of bits")


@contextmanager
def precision(bits: int, cap: int | None = None) -> Iterator[int]:
    """Set ``flint.ctx.prec`` (and ``flint.ctx.cap`` if given) for the duration of a block.

    Both are validated before anything changes and restored in ``finally``, also when the
    block raises; nested uses restore in order.

    Parameters
    ----------
    bits : int
        Working precision, see :func:`check_precision`.
    cap : int, optional
        Series length, ``1 <= cap <= MAX_CAP``; unchanged if omitted.

    Yields
    ------
    int
        The precision in effect.

    Raises
    ------
    PrecisionError

    Guarantee: none (state management only); restores the global context.
    """
    bits = check_precision(bits)
    if cap is not None:
        cap = _check_int(cap, "cap", 1, MAX_CAP, "number of series terms")
    old_prec, old_cap = flint.ctx.prec, flint.ctx.cap
    try:
        flint.ctx.prec = bits
        if cap is not None:
            flint.ctx.cap = cap
        yield bits
    finally:
        flint.ctx.prec = old_prec
        flint.ctx.cap = old_cap


def require_finite(ball: flint.arb, field: str = "ball") -> flint.arb:
    """Reject a ball whose midpoint or radius is NaN or infinite; return it otherwise.

    Such balls "contain" every number, so this runs before any containment test.

    Raises
    ------
    NonFiniteError
        The ball is not finite.
    InputError
        ``ball`` is not a :class:`flint.arb`.

    Guarantee: exact (a returned ball has finite midpoint and radius).
    """
    if not isinstance(ball, flint.arb):
        raise InputError(
            f"{field}: expected a flint.arb, got {type(ball).__name__}; convert with to_arb"
        )
    if not ball.is_finite():
        raise NonFiniteError(
            f"{field}: {ball.str(radius=True)} has a NaN or infinite midpoint or radius; "
            "use finite inputs or a higher precision"
        )
    return ball


def _dyadic_to_fmpq(man_exp: tuple[flint.fmpz, flint.fmpz], field: str) -> flint.fmpq:
    man, exp = man_exp
    if man == 0:
        return flint.fmpq(0)
    if abs(exp) > MAX_EXACT_EXPONENT:
        raise DomainError(
            f"{field}: binary exponent {exp} is beyond +/-{MAX_EXACT_EXPONENT}, too large for "
            "exact rational endpoints; rescale the problem"
        )
    e = int(exp)
    if e >= 0:
        return flint.fmpq(man * flint.fmpz(2) ** e)
    return flint.fmpq(man, flint.fmpz(2) ** (-e))


def mid_rad(ball: flint.arb, field: str = "ball") -> tuple[flint.fmpq, flint.fmpq]:
    """Exact midpoint and radius of a finite ball.

    Raises
    ------
    NonFiniteError
        The ball is not finite.
    DomainError
        An exponent is beyond ``MAX_EXACT_EXPONENT``.

    Guarantee: exact (the ball is the set ``[mid - rad, mid + rad]``).
    """
    require_finite(ball, field)
    mid = _dyadic_to_fmpq(ball.mid().man_exp(), field)
    rad = _dyadic_to_fmpq(ball.rad().man_exp(), field)
    return mid, rad


def endpoints(ball: flint.arb, field: str = "ball") -> tuple[flint.fmpq, flint.fmpq]:
    """Exact lower and upper endpoints ``mid - rad`` and ``mid + rad`` of a finite ball.

    Unlike ``ball.lower()`` / ``ball.upper()``, which python-flint rounds outward to the
    current ``ctx.prec``, these are the endpoints themselves.

    Raises
    ------
    NonFiniteError
        The ball is not finite.

    Guarantee: exact.
    """
    mid, rad = mid_rad(ball, field)
    return mid - rad, mid + rad


def contains(ball: flint.arb, x: Any, field: str = "ball") -> bool:
    """Whether the exact number ``x`` lies in ``ball`` (closed), decided exactly.

    Parameters
    ----------
    ball : flint.arb
        Must be finite.
    x : number accepted by :func:`~certified.arith.exact.to_fmpq`, or an exact arb
        Floats mean their binary value, strings their exact decimal/rational value.

    Raises
    ------
    NonFiniteError
        The ball (or ``x``) is not finite.
    InputError
        ``x`` is an inexact arb (use :func:`ball_subset`) or not a number.

    Guarantee: exact (True iff ``lower <= x <= upper``).
    """
    lo, hi = endpoints(ball, field)
    if isinstance(x, flint.arb):
        x_lo, x_hi = endpoints(x, "x")
        if x_lo != x_hi:
            raise InputError(
                "x: is an inexact ball, not a number; use ball_subset for ball containment"
            )
        q = x_lo
    else:
        q = to_fmpq(x, "x")
    return lo <= q <= hi


def ball_subset(inner: flint.arb, outer: flint.arb) -> bool:
    """Whether every point of ``inner`` lies in ``outer``, decided exactly.

    Raises
    ------
    NonFiniteError
        Either ball is not finite.

    Guarantee: exact (True iff ``[inner] is a subset of [outer]``).
    """
    in_lo, in_hi = endpoints(inner, "inner")
    out_lo, out_hi = endpoints(outer, "outer")
    return out_lo <= in_lo and in_hi <= out_hi


def to_arb(x: Any, prec: int, field: str = "value") -> flint.arb:
    """A ball containing the exact number ``x``.

    Parameters
    ----------
    x : number accepted by :func:`~certified.arith.exact.to_fmpq`, or flint.arb
        Dyadic values (ints, floats, dyadic rationals or strings) give an exact ball of radius
        0, whatever ``prec``; other rationals are rounded to a ball at ``prec`` bits. An arb
        is returned unchanged after :func:`require_finite`.
    prec : int
        Working precision in bits for the rounding (see :func:`check_precision`).
    field : str
        Name of the input for error messages.

    Raises
    ------
    PrecisionError, NonFiniteError, NumberFormatError, InputError

    Guarantee: encloses ``x`` (exactly equal when ``x`` is dyadic).
    """
    prec = check_precision(prec)
    if isinstance(x, flint.arb):
        return require_finite(x, field)
    if isinstance(x, float):
        to_fmpq(x, field)  # rejects NaN and inf with a named error
        return flint.arb(x)
    q = to_fmpq(x, field)
    den = int(q.q)
    if den & (den - 1) == 0:
        return flint.arb((q.p, -(den.bit_length() - 1)))
    with precision(prec):
        return flint.arb(q)


def arb_vector(x: Any, prec: int, field: str = "value") -> list[flint.arb]:
    """Convert a 1-D list or array of numbers (or arbs) to a list of balls.

    Parameters
    ----------
    x : 1-D list/tuple/ndarray
        Elements as in :func:`to_arb`; may be empty.
    prec : int
    field : str
        Errors name the element, e.g. ``"b[2]"``.

    Raises
    ------
    ShapeError
        ``x`` is not one-dimensional.

    Guarantee: element ``i`` encloses ``x[i]``.
    """
    prec = check_precision(prec)
    shape, leaves = walk_array(x, field)
    if len(shape) != 1:
        raise ShapeError(f"{field}: has shape {shape}; use a 1-D list or array")
    return [to_arb(leaf, prec, label) for label, leaf in leaves]


def arb_matrix(x: Any, prec: int, field: str = "value") -> flint.arb_mat:
    """Convert a 2-D list or array of numbers (or arbs), or an arb_mat, to an arb_mat.

    Parameters
    ----------
    x : 2-D nested list/tuple/ndarray, flint.arb_mat, flint.fmpq_mat or flint.fmpz_mat
        At least one row and one column; rows of equal length. Elements as in
        :func:`to_arb`. An arb_mat is returned unchanged after a finiteness check.
    prec : int
    field : str
        Errors name the element, e.g. ``"W[0][1]"``.

    Raises
    ------
    ShapeError
        ``x`` is not 2-D, is ragged, or has no rows or no columns.

    Guarantee: entry ``(i, j)`` encloses ``x[i][j]``.
    """
    prec = check_precision(prec)
    if isinstance(x, flint.arb_mat):
        for i in range(x.nrows()):
            for j in range(x.ncols()):
                require_finite(x[i, j], f"{field}[{i}][{j}]")
        if x.nrows() == 0 or x.ncols() == 0:
            raise ShapeError(
                f"{field}: has shape ({x.nrows()}, {x.ncols()}); use at least one row and column"
            )
        return x
    if isinstance(x, (flint.fmpq_mat, flint.fmpz_mat)):
        x = [[x[i, j] for j in range(x.ncols())] for i in range(x.nrows())]
    shape, leaves = walk_array(x, field)
    if len(shape) != 2 or 0 in shape:
        raise ShapeError(
            f"{field}: has shape {shape}; use a 2-D list or array with at least one row "
            "and one column"
        )
    rows, cols = shape
    entries = [to_arb(leaf, prec, label) for label, leaf in leaves]
    return flint.arb_mat([entries[i * cols : (i + 1) * cols] for i in range(rows)])


def arb_mat_endpoints(m: flint.arb_mat, field: str = "matrix") -> tuple[np.ndarray, np.ndarray]:
    """Exact entry-wise lower and upper endpoints of a finite arb_mat.

    Returns
    -------
    lower, upper : numpy.ndarray
        ``dtype=object`` of :class:`flint.fmpq`, shape ``(nrows, ncols)``.

    Raises
    ------
    NonFiniteError
        Some entry is not finite (named ``field[i][j]``).
    InputError
        ``m`` is not an arb_mat.

    Guarantee: exact.
    """
    if not isinstance(m, flint.arb_mat):
        raise InputError(
            f"{field}: expected a flint.arb_mat, got {type(m).__name__}; convert with arb_matrix"
        )
    lower = np.empty((m.nrows(), m.ncols()), dtype=object)
    upper = np.empty((m.nrows(), m.ncols()), dtype=object)
    for i in range(m.nrows()):
        for j in range(m.ncols()):
            lower[i, j], upper[i, j] = endpoints(m[i, j], f"{field}[{i}][{j}]")
    return lower, upper
