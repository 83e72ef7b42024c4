"""Exact numbers: parsing to :class:`flint.fmpq`, canonical strings, correctly rounded floats.

Every number that enters rigorous code passes through :func:`to_fmpq`, which never rounds:
a float is read as the exact binary64 value it stores (``float.as_integer_ratio``), a decimal
string as the exact decimal it spells (``"0.1"`` is 1/10, not the double nearest to it).

String grammar (``re.ASCII``; leading and trailing whitespace is ignored, whitespace *inside*
a number is an error, as are ``_`` separators and a ``+`` sign on a denominator)::

    integer   [+-]?D+                          "12", "-7"
    decimal   [+-]?(D+.?D*|.D+)([eE][+-]?D+)?  "-1.25e-3", ".5", "1E+400"
    rational  [+-]?D+/D+                       "-22/7"        (denominator 0 is an error)
    dyadic    [+-]?D+*2^[+-]?D+                "3*2^-1074"
    hex float [+-]?0[xX](H+.?H*|.H+)([pP][+-]?D+)?   "0x1.8p-3"   (exact, binary exponent)

Written exponents are limited to ``|e| <= MAX_STRING_EXPONENT`` so that a typo such as
``"1e999999999"`` fails fast instead of exhausting memory. ``"nan"``, ``"inf"`` and
``"infinity"`` (any case, any sign) raise :class:`~certified.errors.NonFiniteError`.

Canonical output formats:

* :func:`fmpq_to_str`: ``"p/q"`` in lowest terms with ``q > 1``, or ``"p"`` for an integer.
* :func:`dyadic_to_str`: ``"0"`` for zero, otherwise always ``"m*2^e"`` with ``m`` odd (an
  integer too: ``3 -> "3*2^0"``, ``4 -> "1*2^2"``, ``-0.5 -> "-1*2^-1"``).
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import flint
import numpy as np

from certified.errors import (
    InputError,
    NonFiniteError,
    NumberFormatError,
    RangeOverflowError,
    ShapeError,
)

__all__ = [
    "approx_str",
    "MAX_STRING_EXPONENT",
    "Rounding",
    "dyadic_to_str",
    "float_to_fmpq",
    "fmpq_array_to_float",
    "fmpq_to_float",
    "fmpq_to_str",
    "is_dyadic",
    "to_fmpq",
    "to_fmpq_array",
    "walk_array",
]

MAX_STRING_EXPONENT = 10**6
"""Largest ``|e|`` accepted in a written exponent (``1e<e>``, ``*2^<e>``, ``0x1p<e>``)."""

Rounding = Literal["down", "up", "nearest"]

_FIX = 'use an integer, a decimal, "p/q" or "m*2^e"'

_SIGN = r"(?P<sign>[+-]?)"
_EXP_DIGITS = r"(?P<exp>[+-]?[0-9]+)"
_INTEGER_RE = re.compile(_SIGN + r"(?P<int>[0-9]+)", re.ASCII)
_DECIMAL_RE = re.compile(
    _SIGN
    + r"(?:(?P<int>[0-9]+)\.?(?P<frac>[0-9]*)|\.(?P<frac2>[0-9]+))(?:[eE]"
    + _EXP_DIGITS
    + ")?",
    re.ASCII,
)
_RATIONAL_RE = re.compile(_SIGN + r"(?P<num>[0-9]+)/(?P<den>[0-9]+)", re.ASCII)
_DYADIC_RE = re.compile(_SIGN + r"(?P<man>[0-9]+)\*2\^" + _EXP_DIGITS, re.ASCII)
_HEX_RE = re.compile(
    _SIGN
    + r"0[xX](?:(?P<int>[0-9a-fA-F]+)\.?(?P<frac>[0-9a-fA-F]*)|\.(?P<frac2>[0-9a-fA-F]+))"
    + r"(?:[pP]"
    + _EXP_DIGITS
    + ")?",
    re.ASCII,
)
_NONFINITE_RE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.ASCII | re.IGNORECASE)

_FLOAT64_MAX = float.fromhex("0x1.fffffffffffffp+1023")
_FLOAT64_MIN_EXP = -1074  # exponent of the least subnormal, 2**-1074
_FLOAT64_MANT_BITS = 53


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _exponent(text: str, s: str, field: str) -> int:
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > len(str(MAX_STRING_EXPONENT)) or int(digits or "0") > MAX_STRING_EXPONENT:
        raise NumberFormatError(
            f"{field}: {_show(s)} has an exponent beyond +/-{MAX_STRING_EXPONENT}; "
            "write the number without such an extreme exponent"
        )
    return -int(digits or "0") if text.startswith("-") else int(digits or "0")


def _scaled(mantissa: flint.fmpz, base: int, exp: int) -> flint.fmpq:
    if exp >= 0:
        return flint.fmpq(mantissa * flint.fmpz(base) ** exp)
    return flint.fmpq(mantissa, flint.fmpz(base) ** (-exp))


def _parse_string(s: str, field: str) -> flint.fmpq:
    t = s.strip()
    if (m := _INTEGER_RE.fullmatch(t)) is not None:
        value = flint.fmpq(flint.fmpz(m["int"]))
    elif (m := _RATIONAL_RE.fullmatch(t)) is not None:
        den = flint.fmpz(m["den"])
        if den == 0:
            raise InputError(f"{field}: {_show(s)} has denominator 0; use a nonzero denominator")
        value = flint.fmpq(flint.fmpz(m["num"]), den)
    elif (m := _DYADIC_RE.fullmatch(t)) is not None:
        value = _scaled(flint.fmpz(m["man"]), 2, _exponent(m["exp"], s, field))
    elif (m := _DECIMAL_RE.fullmatch(t)) is not None:
        whole, frac = (m["int"], m["frac"]) if m["int"] is not None else ("", m["frac2"])
        exp = _exponent(m["exp"], s, field) if m["exp"] is not None else 0
        value = _scaled(flint.fmpz(whole + frac), 10, exp - len(frac))
    elif (m := _HEX_RE.fullmatch(t)) is not None:
        whole, frac = (m["int"], m["frac"]) if m["int"] is not None else ("", m["frac2"])
        exp = _exponent(m["exp"], s, field) if m["exp"] is not None else 0
        value = _scaled(flint.fmpz(int(whole + frac, 16)), 2, exp - 4 * len(frac))
    elif _NONFINITE_RE.fullmatch(t) is not None:
        raise NonFiniteError(f"{field}: {_show(s)} is not finite; use a finite number")
    else:
        raise NumberFormatError(f"{field}: {_show(s)} is not a number; {_FIX}")
    return -value if m["sign"] == "-" else value


def to_fmpq(x: Any, field: str = "value") -> flint.fmpq:
    """Convert a number to the exact rational it denotes.

    Parameters
    ----------
    x : int, float, numpy scalar, Fraction, Decimal, flint.fmpz, flint.fmpq or str
        Floats (Python and numpy, any width) are read as their exact binary value; strings
        follow the grammar in the module docstring and are parsed exactly, never via float.
    field : str
        Name of the input, used in error messages (e.g. ``"W[0][1]"``).

    Returns
    -------
    flint.fmpq

    Raises
    ------
    NonFiniteError
        ``x`` is a NaN or an infinity (also as a string).
    NumberFormatError
        ``x`` is a string outside the grammar, has an exponent beyond ``MAX_STRING_EXPONENT``,
        or is of a type that is not a number.
    InputError
        ``x`` is a bool, or a ``"p/q"`` string with ``q = 0``.

    Guarantee: exact.
    """
    if isinstance(x, (bool, np.bool_)):
        raise InputError(f"{field}: {x!r} is a boolean, not a number; use 0 or 1")
    if isinstance(x, flint.fmpq):
        return x
    if isinstance(x, (int, flint.fmpz, np.integer)):
        return flint.fmpq(flint.fmpz(int(x)) if isinstance(x, np.integer) else x)
    if isinstance(x, (float, np.floating, Decimal)):
        if not (x.is_finite() if isinstance(x, Decimal) else np.isfinite(x)):
            raise NonFiniteError(f"{field}: {x!r} is not finite; use a finite number")
        num, den = x.as_integer_ratio()
        return flint.fmpq(num, den)
    if isinstance(x, Fraction):
        return flint.fmpq(x.numerator, x.denominator)
    if isinstance(x, str):
        return _parse_string(x, field)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return to_fmpq(x[()], field)
    if isinstance(x, numbers.Rational):
        return flint.fmpq(int(x.numerator), int(x.denominator))
    raise NumberFormatError(
        f"{field}: {_show(x)} of type {type(x).__name__} is not a number; {_FIX}"
    )


float_to_fmpq = to_fmpq
"""Alias of :func:`to_fmpq`: a float converts to its exact binary value."""


def _is_sequence(x: Any) -> bool:
    return isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0)


def walk_array(x: Any, field: str = "value") -> tuple[tuple[int, ...], list[tuple[str, Any]]]:
    """Shape and leaves, in row-major order, of a nested list/tuple/ndarray.

    Lists, tuples and numpy arrays of dimension >= 1 are sequences; anything else (including
    strings) is a leaf. A numeric ndarray is read via ``tolist``, which keeps the exact values
    (``longdouble`` elements stay ``longdouble``).

    Parameters
    ----------
    x : nested sequence or scalar
    field : str
        Name of the input; leaves are labelled ``field[i][j]...``.

    Returns
    -------
    shape : tuple of int
    leaves : list of (label, leaf)

    Raises
    ------
    ShapeError
        The nesting is ragged (sibling sequences of different lengths or depths).

    Guarantee: exact (no value is converted).
    """
    if isinstance(x, np.ndarray) and x.dtype != object and x.ndim > 0:
        x = x.tolist()

    def shape_of(node: Any, label: str) -> tuple[int, ...]:
        if not _is_sequence(node):
            return ()
        shapes = [shape_of(child, f"{label}[{i}]") for i, child in enumerate(node)]
        if any(s != shapes[0] for s in shapes[1:]):
            bad = next(i for i, s in enumerate(shapes) if s != shapes[0])
            raise ShapeError(
                f"{label}[{bad}]: shape {shapes[bad]} differs from {label}[0] with shape "
                f"{shapes[0]}; make the nested lists rectangular"
            )
        return (len(node), *(shapes[0] if shapes else ()))

    shape = shape_of(x, field)
    leaves: list[tuple[str, Any]] = []

    def collect(node: Any, label: str) -> None:
        if _is_sequence(node):
            for i, child in enumerate(node):
                collect(child, f"{label}[{i}]")
        else:
            leaves.append((label, node))

    collect(x, field)
    return shape, leaves


def to_fmpq_array(x: Any, field: str = "value") -> np.ndarray:
    """Convert a nested list or numpy array of numbers to an object array of exact rationals.

    Parameters
    ----------
    x : nested list/tuple, numpy array or scalar
        Elements as accepted by :func:`to_fmpq`.
    field : str
        Name of the input; errors name the element, e.g. ``"X[3][1]"``.

    Returns
    -------
    numpy.ndarray
        ``dtype=object``, same shape as ``x``, every element a :class:`flint.fmpq`.

    Raises
    ------
    ShapeError
        ``x`` is ragged.
    NonFiniteError, NumberFormatError, InputError
        As :func:`to_fmpq`, for the first offending element.

    Guarantee: exact.
    """
    shape, leaves = walk_array(x, field)
    out = np.empty(len(leaves), dtype=object)
    for k, (label, leaf) in enumerate(leaves):
        out[k] = to_fmpq(leaf, label)
    return out.reshape(shape)


def fmpq_to_str(q: flint.fmpq) -> str:
    """Canonical exact string of a rational: ``"p/q"`` in lowest terms (``q > 1``) or ``"p"``.

    Guarantee: exact (``to_fmpq(fmpq_to_str(q)) == q``).
    """
    q = to_fmpq(q, "q")
    return str(q.p) if q.q == 1 else f"{q.p}/{q.q}"


def _power_of_two_exponent(n: int) -> int | None:
    """``k`` if ``n == 2**k`` (``n > 0``), else ``None``."""
    return n.bit_length() - 1 if n & (n - 1) == 0 else None


def is_dyadic(q: flint.fmpq) -> bool:
    """Whether ``q`` is ``m * 2**e`` for integers ``m``, ``e``.

    Guarantee: exact.
    """
    q = to_fmpq(q, "q")
    return _power_of_two_exponent(int(q.q)) is not None


def dyadic_to_str(q: flint.fmpq) -> str:
    """Canonical string ``"m*2^e"`` (``m`` odd) of a dyadic rational, ``"0"`` for zero.

    Integers are written the same way (``3 -> "3*2^0"``, ``-4 -> "-1*2^2"``) so each dyadic
    has exactly one string.

    Raises
    ------
    InputError
        ``q`` is not dyadic (its reduced denominator is not a power of two).

    Guarantee: exact (``to_fmpq(dyadic_to_str(q)) == q``).
    """
    q = to_fmpq(q, "q")
    shift = _power_of_two_exponent(int(q.q))
    if shift is None:
        raise InputError(
            f"q: {fmpq_to_str(q)} is not dyadic (denominator is not a power of 2); "
            "use fmpq_to_str for general rationals"
        )
    if q == 0:
        return "0"
    m = int(q.p)
    zeros = (m & -m).bit_length() - 1
    return f"{flint.fmpz(m >> zeros)}*2^{zeros - shift}"


def fmpq_to_float(q: Any, rounding: Rounding, field: str = "value") -> float:
    """Correctly rounded binary64 value of an exact rational.

    Parameters
    ----------
    q : flint.fmpq or anything :func:`to_fmpq` accepts
    rounding : {"down", "up", "nearest"}
        ``"down"``: largest double ``<= q``; ``"up"``: smallest double ``>= q``;
        ``"nearest"``: nearest double, ties to even (as IEEE 754 and ``float(Fraction)``).
        Subnormals are produced where due; a zero result rounded from a negative value is
        ``-0.0`` (as in IEEE 754).

    Returns
    -------
    float

    Raises
    ------
    RangeOverflowError
        The correctly rounded result is infinite (``"up"`` of ``q > max double``,
        ``"down"`` of ``q < -max double``, ``"nearest"`` of ``|q| >= 2**1024 - 2**970``).
        The other direction returns ``+/-max double``.
    InputError
        ``rounding`` is not one of the three modes.

    Notes
    -----
    ``field`` names the input in error messages. The algorithm is integer-only: with
    ``e = max(k - 53, -1074)`` for ``2**(k-1) <= |q| < 2**(k+1)``, ``n = floor(|q| / 2**e)``
    and the remainder decide the rounding, so no intermediate double is ever formed.

    Guarantee: exact rounding: ``"down"`` is a lower bound and ``"up"`` an upper bound on
    ``q``, each the nearest double on its side.
    """
    if rounding not in ("down", "up", "nearest"):
        raise InputError(
            f"rounding: {rounding!r} is not a rounding mode; use 'down', 'up' or 'nearest'"
        )
    q = to_fmpq(q, field)
    if q == 0:
        return 0.0
    negative = q < 0
    a, b = abs(int(q.p)), int(q.q)
    # Rounding of the magnitude: "down" of a negative number moves away from zero.
    away = (rounding == "up") != negative if rounding != "nearest" else None
    # a/b lies in [2**(k-1), 2**(k+1)).
    k = a.bit_length() - b.bit_length()
    if k - 1 >= 1024:
        n, e = 1 << _FLOAT64_MANT_BITS, 1024 - _FLOAT64_MANT_BITS  # certainly overflows
    else:
        e = max(k - _FLOAT64_MANT_BITS, _FLOAT64_MIN_EXP)
        num, den = (a, b << e) if e >= 0 else (a << -e, b)
        n, r = divmod(num, den)
        if n >= 1 << _FLOAT64_MANT_BITS:  # k overestimated the magnitude by one bit
            e += 1
            num, den = (a, b << e) if e >= 0 else (a << -e, b)
            n, r = divmod(num, den)
        if r:
            if away is None:
                if 2 * r > den or (2 * r == den and n & 1):
                    n += 1
            elif away:
                n += 1
    # n * 2**e is the rounded magnitude, n <= 2**53.
    if e + n.bit_length() > 1024:
        if away is False:
            return -_FLOAT64_MAX if negative else _FLOAT64_MAX
        sign = "-" if negative else ""
        raise RangeOverflowError(
            f"{field}: magnitude of {sign}~2^{k} exceeds float64 (max ~1.8e308) when rounded "
            f"{rounding}; keep this value as an exact rational or a ball"
        )
    value = math.ldexp(float(n), e)
    return -value if negative else value


def approx_str(q: Any, digits: int = 6) -> str:
    """A short decimal of an exact number of any magnitude, for messages (``1.5``,
    ``1.11111e+4999``). Guarantee: none (display only)."""
    q = to_fmpq(q)
    try:
        return f"{fmpq_to_float(q, 'nearest'):.{digits}g}"
    except RangeOverflowError:
        return flint.arb(q).str(digits, radius=False)


def fmpq_array_to_float(a: Any, rounding: Rounding, field: str = "value") -> np.ndarray:
    """Element-wise :func:`fmpq_to_float` of an array of exact numbers.

    Parameters
    ----------
    a : array-like of numbers accepted by :func:`to_fmpq`
    rounding : {"down", "up", "nearest"}
    field : str
        Name of the input for error messages.

    Returns
    -------
    numpy.ndarray
        ``float64``, same shape as ``a``.

    Guarantee: exact rounding element-wise (see :func:`fmpq_to_float`).
    """
    shape, leaves = walk_array(a, field)
    out = np.empty(len(leaves), dtype=np.float64)
    for k, (label, leaf) in enumerate(leaves):
        out[k] = fmpq_to_float(to_fmpq(leaf, label), rounding, label)
    return out.reshape(shape)
