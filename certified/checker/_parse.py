"""Strict reading of certificate values: JSON value -> exact numbers and shapes (bytes -> JSON
value: ``_reader.py``). Specification: ``proofs/format.md`` (sections 1 "Encoding", 2
"Numbers", 3 "Top level"), and its "Bounds of a check" for the meter of a check.
Everything here either returns a value that denotes exactly what the file says or raises
:class:`Rejected`; nothing is rounded, defaulted or guessed."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from math import isqrt
from typing import Any

import flint

# Resource limits (proofs/format.md sections 1, 2 and 4). Each bounds the work of checking.
MAX_BYTES = 256 * 1024 * 1024  # largest certificate file, in bytes
MAX_DEPTH = 32  # deepest nesting of JSON arrays and objects
MAX_TOKENS = 2**24  # most [ { , outside strings: bounds the number of JSON values (memory)
MAX_DIGITS = 4000  # longest digit run of a number's integers (below CPython's int limit, 4300)
MAX_EXPONENT = 10000  # largest |e| in a dyadic "m*2^e"
MAX_HEIGHT_BITS = 65536  # largest height (bits of numerator or denominator) formed in a replay
# Largest replay cost: a step of a point through a piece of width p costs (p + 1) * d * w *
# isqrt(w) with w = 1 + h // 64, h the largest height (bits) of its operands.
MAX_REPLAY_COST = 10**7
# The meter of a check (format.md section 1, "Bounds"): the numbers of a file may hold at most
# MAX_NUMBER_BITS + 8 * (bytes of the file) bits beyond one word each (2^|e| of a dyadic counted
# before it is formed), and the work no rule budget counts (sums, common denominators, products
# of exact numbers) is at most MAX_WORK + (bytes) units, w * isqrt(w) for an operation on w words.
MAX_NUMBER_BITS = 2**24
MAX_WORK = 10**7

_INT_BOUND = 10**MAX_DIGITS  # |n| < _INT_BOUND  <=>  n has at most MAX_DIGITS digits


class Rejected(Exception):  # noqa: N818 (named after the verdict it carries)
    """The certificate is not accepted; the message is the reason (one line)."""


def show(value: Any, limit: int = 60) -> str:
    """Short, one-line rendering of a value for a reason string."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_METER: list = [None]  # [bits, work, top] of the check under way (None: producers' calls)


@contextlib.contextmanager
def metered(size: int = MAX_BYTES) -> Iterator[None]:
    """A fresh meter for the block (one check of a file of ``size`` bytes)."""
    previous, _METER[0] = _METER[0], [MAX_NUMBER_BITS + 8 * size, MAX_WORK + size, 128]
    try:
        yield
    finally:
        _METER[0] = previous


def _charge_bits(bits: int, where: str, height: int) -> None:
    if (meter := _METER[0]) is not None:
        meter[0], meter[2] = meter[0] - bits, max(meter[2], height)
        if meter[0] < 0:
            raise Rejected(f"resource limit: {where}: the numbers take too many bits for the file")


def words(bits: int) -> int:
    """The cost of one operation on numbers of ``bits`` bits, in word operations."""
    w = 1 + bits // 64
    return w * isqrt(w)


def charge(operations: int, bits: int, what: str) -> None:
    """Charge, before doing it, ``operations`` exact operations on numbers of at most ``bits``
    bits (or arb operations at that precision) to the meter; Rejected past MAX_WORK."""
    if (meter := _METER[0]) is not None:
        meter[1] -= operations * words(bits)
        if meter[1] < 0:
            raise Rejected(f"resource limit: {what}: beyond the work allowed for the file")


def top() -> int:
    """A bound on the height of every number read so far in this check (uncharged numbers:
    at most 19 digits times 2^62; 128 if unmetered)."""
    return 128 if _METER[0] is None else _METER[0][2]


def exact_sum(values: list, what: str) -> flint.fmpq:
    """The exact sum, each addition charged at the running sum's height (coprime denominators
    make it grow); Rejected past MAX_HEIGHT_BITS."""
    total, bits = flint.fmpq(0), 0
    for i, v in enumerate(values):
        charge(1, max(bits, v.height_bits()), what)
        total += v
        if i & 15 == 15 or bits > 64:
            bits = total.height_bits()
            if bits > MAX_HEIGHT_BITS:
                raise Rejected(f"resource limit: {what}: a sum beyond {MAX_HEIGHT_BITS} bits")
    return total


def common_bits(values: list) -> int:
    """A bound on the height (bits) of every sum of the exact ``values`` and of their integer
    multiples' sums, numerators scaled to a common denominator: the largest height plus the bits
    of a common denominator (the largest power of two dividing one, plus each distinct odd part).
    Dyadics and repeated denominators stay small; coprime giant denominators add up."""
    odd, two, height = set(), 0, 0
    for v in values:
        q = int(v.q)
        low = (q & -q).bit_length() - 1
        two, height = max(two, low), max(height, v.height_bits())
        if q >> low > 1:
            odd.add(q >> low)
    return height + two + sum(o.bit_length() for o in odd)


def exact_product(A: list, B: list, what: str) -> flint.fmpq_mat:
    """The exact product of the rows ``A`` (r x k) and ``B`` (k x c) of exact numbers, charged
    before it is done: r k c / 16 operations (python-flint's fmpq_mat products, in C) and the
    r c entries, on numbers of at most the rows' common height plus the columns' (format.md
    "Bounds of a check"); scanning the heights costs r k + k c operations."""
    r, k, c = len(A), len(B), len(B[0])
    charge(r * k + k * c, top(), what)
    bits = max(map(common_bits, A)) + max(map(common_bits, zip(*B, strict=True))) + k.bit_length()
    charge(r * k * c // 16 + r * c, bits, what)
    return flint.fmpq_mat(A) * flint.fmpq_mat(B)


# --- exact numbers ----------------------------------------------------------------------------

_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)", re.ASCII)
_RATIONAL = re.compile(r"-?([1-9][0-9]*)/([1-9][0-9]*)", re.ASCII)
_DYADIC = re.compile(r"-?([1-9][0-9]*)\*2\^(0|-?[1-9][0-9]*)", re.ASCII)


def _size(run: str) -> int:
    """Bits beyond one word (62) of an integer of the digit run ``run`` (at most, before it is
    formed: 10/3 bits a digit)."""
    return len(run) * 10 // 3 if len(run) > 18 else 0


def _digits(run: str, where: str) -> int:
    if len(run) > MAX_DIGITS:
        raise Rejected(f"{where}: integer with more than {MAX_DIGITS} digits")
    _charge_bits(_size(run), where, len(run) * 10 // 3 + 4)
    return int(run)


_POW2: dict[int, flint.fmpz] = {}


def _pow2(k: int) -> flint.fmpz:
    """``2^k`` for ``0 <= k <= MAX_EXPONENT``, memoised (at most MAX_EXPONENT + 1 entries)."""
    v = _POW2.get(k)
    if v is None:
        v = _POW2[k] = flint.fmpz(2) ** k
    return v


# Fast path: as `exact` on valid numbers of at most MAX_DIGITS characters; anything else raises
# _Slow and is decided by `exact` (tests/checker/test_parse_fast.py compares the two).
_QUICK_RATIONAL = re.compile(r"(-?[1-9][0-9]*)/([1-9][0-9]*)", re.ASCII)
_QUICK_DYADIC = re.compile(r"(-?[1-9][0-9]*)\*2\^(0|-?[1-9][0-9]{0,4})", re.ASCII)


class _Slow(Exception):  # noqa: N818 (control flow, never escapes this module)
    pass


_QUICK_ZERO = flint.fmpq(0)


def _quick(value: Any) -> flint.fmpq:
    if value == "0":
        return _QUICK_ZERO
    if type(value) is int and -(2**62) < value < 2**62:
        return flint.fmpq(value)
    if type(value) is not str or len(value) > MAX_DIGITS:
        raise _Slow
    if "*" in value:
        m = _QUICK_DYADIC.fullmatch(value)
        if m is None:
            raise _Slow
        mantissa, e = int(m[1]), int(m[2])
        if not mantissa & 1 or abs(e) > MAX_EXPONENT:
            raise _Slow
        if abs(e) > 62 or len(m[1]) > 19:
            h = len(m[1]) * 10 // 3 + 4
            _charge_bits(_size(m[1]) + abs(e), "a dyadic", h + e if e > 0 else max(h, -e))
        two = _POW2.get(abs(e)) or _pow2(abs(e))
        return flint.fmpq(mantissa, two) if e < 0 else flint.fmpq(mantissa * two)
    if "/" in value:
        m = _QUICK_RATIONAL.fullmatch(value)
        if m is None:
            raise _Slow
        if len(value) > 38:
            h = max(len(m[1]), len(m[2])) * 10 // 3 + 4
            _charge_bits(_size(m[1]) + _size(m[2]), "a rational", h)
        q = flint.fmpz(m[2])
        r = flint.fmpq(flint.fmpz(m[1]), q)
        if q == 1 or r.q != q:  # "p/1", or not in lowest terms
            raise _Slow
        return r
    if _INTEGER.fullmatch(value) is None or value == "-0":
        raise _Slow
    if len(value) > 19:
        _charge_bits(_size(value), "an integer", len(value) * 10 // 3 + 4)
    return flint.fmpq(int(value))


def exact_row(items: list, where: str) -> list[flint.fmpq]:
    """``[exact(x, f"{where}[i]") for i, x in enumerate(items)]``, faster."""
    try:
        return [_quick(x) for x in items]
    except _Slow:
        return [exact(x, f"{where}[{i}]") for i, x in enumerate(items)]


def exact(value: Any, where: str) -> flint.fmpq:
    """The exact rational a certificate number denotes (proofs/format.md section 2)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Rejected(f'{where}: {show(value)} is not an exact number (integer, "p/q", "m*2^e")')
    if isinstance(value, int):
        if not -_INT_BOUND < value < _INT_BOUND:
            raise Rejected(f"{where}: integer with more than {MAX_DIGITS} digits")
        _charge_bits(
            0 if -(2**62) < value < 2**62 else value.bit_length(), where, value.bit_length()
        )
        return flint.fmpq(value)
    negative = value.startswith("-")
    # the three forms are told apart by their separator (one pattern tried per number)
    form = _DYADIC if "*" in value else _RATIONAL if "/" in value else _INTEGER
    m = form.fullmatch(value)
    if m is None:
        raise Rejected(f"{where}: {show(value)} is not an exact number (no decimals, blanks, +)")
    if form is _INTEGER:
        if value == "-0":
            raise Rejected(f'{where}: "-0" is not canonical; write 0')
        magnitude = flint.fmpq(_digits(m[1], where))
    elif form is _RATIONAL:
        p, q = _digits(m[1], where), _digits(m[2], where)
        if q == 1 or flint.fmpz(p).gcd(q) != 1:
            raise Rejected(f"{where}: {show(value)} is not in lowest terms with denominator >= 2")
        magnitude = flint.fmpq(p, q)
    else:
        mantissa = _digits(m[1], where)
        if len(m[2].lstrip("-")) > 5 or abs(int(m[2])) > MAX_EXPONENT:
            raise Rejected(f"{where}: dyadic exponent beyond +/-{MAX_EXPONENT}")
        if mantissa % 2 == 0:
            raise Rejected(f"{where}: dyadic {show(value)} has an even mantissa; make it odd")
        e = int(m[2])
        _charge_bits(
            abs(e) if abs(e) > 62 else 0, where, abs(e) + (len(m[1]) * 10 // 3 + 4) * (e > 0)
        )
        two_e = _pow2(abs(e))
        magnitude = flint.fmpq(mantissa * two_e) if e >= 0 else flint.fmpq(mantissa, two_e)
    return -magnitude if negative else magnitude


# --- structure ---------------------------------------------------------------------------------


def fields(value: Any, where: str, required: tuple[str, ...]) -> dict[str, Any]:
    """``value`` as an object with exactly the keys ``required``."""
    if not isinstance(value, dict):
        raise Rejected(f"{where}: expected an object, got {type(value).__name__}")
    for key in required:
        if key not in value:
            raise Rejected(f"{where}: missing field {key!r}")
    for key in value:
        if key not in required:
            raise Rejected(f"{where}: unknown field {show(key)}")
    return value


def array(value: Any, where: str, length: int | None = None, minimum: int = 1) -> list[Any]:
    """``value`` as a JSON array of the given length (or of at least ``minimum`` elements)."""
    if not isinstance(value, list):
        raise Rejected(f"{where}: expected an array, got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise Rejected(f"{where}: expected {length} elements, got {len(value)}")
    if len(value) < minimum:
        raise Rejected(f"{where}: expected at least {minimum} elements, got {len(value)}")
    return value


def vector(value: Any, where: str, length: int | None = None) -> list[flint.fmpq]:
    """A non-empty array of exact numbers."""
    return exact_row(array(value, where, length), where)


def matrix(value: Any, where: str, rows: int | None, cols: int | None) -> list[list[flint.fmpq]]:
    """A rows x cols array of arrays of exact numbers (``None``: any size >= 1, rectangular)."""
    items = array(value, where, rows)
    out: list[list[flint.fmpq]] = []
    for i, row in enumerate(items):
        out.append(vector(row, f"{where}[{i}]", cols))
        cols = len(out[0])
    return out


def small_integer(value: Any, where: str, lo: int, hi: int) -> int:
    """A JSON integer in [lo, hi] (structural integers are never strings)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"{where}: expected a JSON integer, got {show(value)}")
    if not lo <= value <= hi:
        raise Rejected(f"{where}: {value} is outside [{lo}, {hi}]")
    return value


def string(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    """A JSON string among ``allowed``."""
    if not isinstance(value, str):
        raise Rejected(f"{where}: expected a string, got {show(value)}")
    if value not in allowed:
        raise Rejected(f"{where}: {show(value)} is not one of {', '.join(allowed)}")
    return value


def positive(value: Any, where: str) -> flint.fmpq:
    """An exact number > 0."""
    x = exact(value, where)
    if x <= 0:
        raise Rejected(f"{where}: must be > 0")
    return x


def measure(value: Any, where: str, d: int | None = None) -> tuple[list, list]:
    """Points (N x d), weights >= 0 summing exactly to 1, optional "normalized_from_sum" > 0."""
    record = isinstance(value, dict) and "normalized_from_sum" in value  # format.md section 4
    fields(value, where, ("points", "weights", "normalized_from_sum")[: 2 + record])
    if record:
        positive(value["normalized_from_sum"], f"{where}.normalized_from_sum")
    points = matrix(value["points"], f"{where}.points", None, d)
    weights = vector(value["weights"], f"{where}.weights", len(points))
    if any(w < 0 for w in weights):
        raise Rejected(f"{where}.weights: a weight is negative (they must be >= 0)")
    if exact_sum(weights, f"{where}.weights") != 1:
        raise Rejected(f"{where}.weights: the weights do not sum to exactly 1")
    return points, weights


def box_rows(value: Any, where: str, n: int | None, d: int) -> list[list[tuple]]:
    """N x d x [lo, hi] exact numbers with lo <= hi."""
    boxes = []
    for i, point in enumerate(array(value, where, n)):
        box = []
        for k, pair in enumerate(array(point, f"{where}[{i}]", d)):
            lo, hi = vector(pair, f"{where}[{i}][{k}]", 2)
            if lo > hi:
                raise Rejected(f"{where}[{i}][{k}]: lower end exceeds upper end")
            box.append((lo, hi))
        boxes.append(box)
    return boxes
