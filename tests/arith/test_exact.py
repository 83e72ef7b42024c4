"""Tests of certified.arith.exact against Python's fractions / math as independent references."""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from fractions import Fraction

import flint
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.exact import (
    MAX_STRING_EXPONENT,
    dyadic_to_str,
    fmpq_array_to_float,
    fmpq_to_float,
    fmpq_to_str,
    is_dyadic,
    to_fmpq,
    to_fmpq_array,
    walk_array,
)
from certified.errors import (
    InputError,
    NonFiniteError,
    NumberFormatError,
    RangeOverflowError,
    ShapeError,
)

FLOAT_MAX = sys.float_info.max
TINY = 5e-324
finite_floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
DYADIC_RE = re.compile(r"0|-?[0-9]*[13579]\*2\^-?[0-9]+")
RATIONAL_RE = re.compile(r"-?[1-9][0-9]*/[1-9][0-9]*|-?[1-9][0-9]*|0")


def as_fraction(q: flint.fmpq) -> Fraction:
    assert isinstance(q, flint.fmpq)
    return Fraction(int(q.p), int(q.q))


# --- to_fmpq: floats and numpy scalars -------------------------------------------------------


@given(finite_floats)
@example(TINY)
@example(-TINY)
@example(FLOAT_MAX)
@example(-FLOAT_MAX)
@example(0.1)
@example(-0.0)
def test_float_converts_to_its_exact_binary_value(x: float) -> None:
    assert as_fraction(to_fmpq(x)) == Fraction(x)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_numpy_float_scalars_are_exact(dtype: type) -> None:
    x = dtype("0.1")
    num, den = x.as_integer_ratio()
    assert as_fraction(to_fmpq(x)) == Fraction(num, den)
    if dtype is not np.float64:
        assert to_fmpq(x) != to_fmpq(0.1)


@pytest.mark.parametrize("x", [np.int8(-7), np.uint64(2**64 - 1), np.int64(-(2**63))])
def test_numpy_integer_scalars(x: np.integer) -> None:
    assert as_fraction(to_fmpq(x)) == int(x)


def test_other_exact_types() -> None:
    assert to_fmpq(Fraction(-6, 4)) == flint.fmpq(-3, 2)
    assert to_fmpq(flint.fmpz(10) ** 50) == flint.fmpq(10**50)
    assert to_fmpq(Decimal("0.1")) == flint.fmpq(1, 10)
    assert to_fmpq(np.array(0.5)) == flint.fmpq(1, 2)
    assert to_fmpq(3**2000) == flint.fmpq(3**2000)  # beyond int<->str digit limits


# --- to_fmpq: strings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12", Fraction(12)),
        ("-0", Fraction(0)),
        ("+7", Fraction(7)),
        ("-1.25e-3", Fraction(-1, 800)),
        (".5", Fraction(1, 2)),
        ("-.5", Fraction(-1, 2)),
        ("1.", Fraction(1)),
        ("1E+400", Fraction(10**400)),
        ("2.5e-400", Fraction(25, 10**401)),
        ("0.1", Fraction(1, 10)),
        ("1e+0000000000000000000000000005", Fraction(10**5)),
        ("0" * 100 + "1", Fraction(1)),
        ("-22/7", Fraction(-22, 7)),
        ("6/4", Fraction(3, 2)),
        ("  3/4\n", Fraction(3, 4)),
        ("3*2^-1074", Fraction(3, 2**1074)),
        ("-5*2^3", Fraction(-40)),
        ("0x1.8p-3", Fraction(3, 16)),
        ("-0X.8P+1", Fraction(-1)),
        ("0x10", Fraction(16)),
        ("0x1.fffffffffffffp+1023", Fraction(FLOAT_MAX)),
    ],
)
def test_strings_parse_exactly(text: str, expected: Fraction) -> None:
    assert as_fraction(to_fmpq(text)) == expected


def test_decimal_string_is_not_the_double() -> None:
    assert to_fmpq("0.1") != to_fmpq(0.1)
    assert to_fmpq("0.1") == flint.fmpq(1, 10)


@st.composite
def decimal_strings(draw: st.DrawFn) -> tuple[str, Fraction]:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.text("0123456789", max_size=30))
    frac = draw(st.text("0123456789", max_size=30))
    if not whole and not frac:
        whole = "0"
    point = "." if frac or draw(st.booleans()) else ""
    exp = draw(st.none() | st.integers(-500, 500))
    if exp is None:
        exp_text = ""
    else:
        marker = draw(st.sampled_from(["e", "E"]))
        exp_text = marker + (f"{exp:+d}" if draw(st.booleans()) else str(exp))
    text = f"{sign}{whole}{point}{frac}{exp_text}"
    value = Fraction(int(whole + frac or "0")) * Fraction(10) ** ((exp or 0) - len(frac))
    return text, -value if sign == "-" else value


@given(decimal_strings())
def test_decimal_strings_match_independent_reference(
    case: tuple[str, Fraction],
) -> None:
    text, value = case
    assert as_fraction(to_fmpq(text)) == value
    assert as_fraction(to_fmpq(text)) == Fraction(text)  # Python's exact decimal parser


@given(st.fractions())
def test_rational_strings(q: Fraction) -> None:
    assert as_fraction(to_fmpq(f"{q.numerator}/{q.denominator}")) == q
    assert as_fraction(to_fmpq(f"{3 * q.numerator}/{3 * q.denominator}")) == q


@given(finite_floats)
@example(TINY)
@example(FLOAT_MAX)
def test_hex_float_strings(x: float) -> None:
    assert as_fraction(to_fmpq(x.hex())) == Fraction(x)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (float("nan"), NonFiniteError),
        (float("inf"), NonFiniteError),
        (-float("inf"), NonFiniteError),
        (np.float32("nan"), NonFiniteError),
        (np.float64("-inf"), NonFiniteError),
        (Decimal("NaN"), NonFiniteError),
        ("nan", NonFiniteError),
        ("-Infinity", NonFiniteError),
        ("abc", NumberFormatError),
        ("", NumberFormatError),
        ("1 /3", NumberFormatError),
        ("1/-3", NumberFormatError),
        ("1_000", NumberFormatError),
        ("1,5", NumberFormatError),
        ("1.5/2", NumberFormatError),
        ("\u0661\u0662", NumberFormatError),  # Arabic-Indic digits
        ("0x", NumberFormatError),
        ("3*2^", NumberFormatError),
        ("1e1000001", NumberFormatError),
        ("1e-99999999999999999999999999999999", NumberFormatError),
        ("1*2^-1000001", NumberFormatError),
        ("0x1p1000001", NumberFormatError),
        (None, NumberFormatError),
        ([1], NumberFormatError),
        (1j, NumberFormatError),
        (b"1", NumberFormatError),
        ("1/0", InputError),
        ("-0/0", InputError),
        (True, InputError),
        (np.bool_(False), InputError),
    ],
)
def test_bad_input_raises_specific_error(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^W\[0\]\[1\]: "):
        to_fmpq(bad, "W[0][1]")


def test_number_format_message_says_what_to_use() -> None:
    with pytest.raises(NumberFormatError) as info:
        to_fmpq("abc", "W[0][1]")
    assert str(info.value) == (
        'W[0][1]: \'abc\' is not a number; use an integer, a decimal, "p/q" or "m*2^e"'
    )
    assert "\n" not in str(info.value)


def test_largest_allowed_exponent_is_accepted() -> None:
    assert to_fmpq(f"1e-{MAX_STRING_EXPONENT}") == flint.fmpq(1, flint.fmpz(10) ** 10**6)
    assert to_fmpq(f"1*2^{MAX_STRING_EXPONENT}") == flint.fmpq(flint.fmpz(2) ** 10**6)


# --- arrays ----------------------------------------------------------------------------------


def test_array_from_nested_lists() -> None:
    a = to_fmpq_array([[1, "1/3"], [0.5, "-2e-1"]], "X")
    assert a.dtype == object and a.shape == (2, 2)
    assert list(a.ravel()) == [1, flint.fmpq(1, 3), flint.fmpq(1, 2), flint.fmpq(-1, 5)]
    assert all(isinstance(v, flint.fmpq) for v in a.ravel())


@given(st.lists(finite_floats, min_size=1, max_size=12))
def test_array_from_numpy_floats_is_exact(xs: list[float]) -> None:
    arr = np.array(xs).reshape(-1, 1)
    a = to_fmpq_array(arr, "X")
    assert a.shape == arr.shape
    assert [as_fraction(v) for v in a.ravel()] == [Fraction(x) for x in xs]


def test_array_shapes() -> None:
    assert to_fmpq_array([], "X").shape == (0,)
    assert to_fmpq_array([[], []], "X").shape == (2, 0)
    assert to_fmpq_array(3, "X").shape == ()
    assert to_fmpq_array(np.zeros((2, 3, 4), dtype=np.int32), "X").shape == (2, 3, 4)
    assert walk_array(((1, 2), [3, 4]), "X") == (
        (2, 2),
        [("X[0][0]", 1), ("X[0][1]", 2), ("X[1][0]", 3), ("X[1][1]", 4)],
    )


@pytest.mark.parametrize(
    "ragged",
    [
        [[1, 2], [3]],
        [[1, 2], 3],
        [1, [2]],
        [[[1]], [[1, 2]]],
        [np.zeros(2), np.zeros(3)],
    ],
)
def test_ragged_arrays_raise_shape_error(ragged: object) -> None:
    with pytest.raises(ShapeError, match=r"^X\["):
        to_fmpq_array(ragged, "X")


def test_array_errors_name_the_index() -> None:
    with pytest.raises(NumberFormatError, match=r"^X\[3\]\[1\]: 'abc'"):
        to_fmpq_array([[0, 0]] * 3 + [[0, "abc"]], "X")
    bad = np.zeros((4, 2))
    bad[3, 1] = np.nan
    with pytest.raises(NonFiniteError, match=r"^X\[3\]\[1\]: "):
        to_fmpq_array(bad, "X")
    with pytest.raises(InputError, match=r"^X\[0\]: False is a boolean"):
        to_fmpq_array(np.array([False, True]), "X")


# --- canonical strings -----------------------------------------------------------------------


@given(st.fractions())
@example(Fraction(0))
@example(Fraction(-5))
def test_fmpq_to_str_round_trip_and_canonical(q: Fraction) -> None:
    s = fmpq_to_str(to_fmpq(q))
    assert RATIONAL_RE.fullmatch(s)
    assert as_fraction(to_fmpq(s)) == q
    expected = str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"
    assert s == expected


def test_fmpq_to_str_reduces() -> None:
    assert fmpq_to_str(to_fmpq("6/4")) == "3/2"
    assert fmpq_to_str(to_fmpq("-4/2")) == "-2"
    assert fmpq_to_str(to_fmpq("-0/7")) == "0"


@given(finite_floats)
@example(0.0)
@example(-0.0)
@example(1.0)
@example(3.0)
@example(TINY)
@example(-TINY)
@example(2.2250738585072014e-308)  # least normal
@example(FLOAT_MAX)
@example(-FLOAT_MAX)
def test_dyadic_round_trip_over_floats(x: float) -> None:
    q = to_fmpq(x)
    assert is_dyadic(q)
    s = dyadic_to_str(q)
    assert DYADIC_RE.fullmatch(s), s
    assert as_fraction(to_fmpq(s)) == Fraction(x)
    assert dyadic_to_str(to_fmpq(s)) == s


@given(st.integers(-(10**30), 10**30), st.integers(-3000, 3000))
def test_dyadic_strings_are_canonical(m: int, e: int) -> None:
    s = f"{m}*2^{e}"
    q = to_fmpq(s)
    assert as_fraction(q) == Fraction(m) * Fraction(2) ** e
    canon = dyadic_to_str(q)
    assert DYADIC_RE.fullmatch(canon)
    assert to_fmpq(canon) == q
    if m % 2 != 0:
        assert canon == f"{m}*2^{e}"


def test_dyadic_examples() -> None:
    assert dyadic_to_str(to_fmpq(0)) == "0"
    assert dyadic_to_str(to_fmpq(3)) == "3*2^0"
    assert dyadic_to_str(to_fmpq(-4)) == "-1*2^2"
    assert dyadic_to_str(to_fmpq(0.375)) == "3*2^-3"
    assert dyadic_to_str(to_fmpq(TINY)) == "1*2^-1074"


def test_non_dyadic() -> None:
    assert not is_dyadic(to_fmpq("1/3"))
    assert not is_dyadic(to_fmpq("0.1"))
    assert is_dyadic(to_fmpq("3/4"))
    with pytest.raises(InputError, match="not dyadic"):
        dyadic_to_str(to_fmpq("1/10"))


# --- correctly rounded conversion to float ---------------------------------------------------


@st.composite
def rationals_over_float_range(draw: st.DrawFn) -> Fraction:
    """Rationals with magnitudes from far below the subnormals to far above FLOAT_MAX."""
    kind = draw(st.sampled_from(["fraction", "scaled", "near_float"]))
    if kind == "fraction":
        return draw(st.fractions())
    if kind == "scaled":
        num = draw(st.integers(-(2**80), 2**80).filter(bool))
        den = draw(st.integers(1, 2**80))
        return Fraction(num, den) * Fraction(2) ** draw(st.integers(-1200, 1100))
    x = Fraction(draw(finite_floats))
    offset = Fraction(draw(st.integers(-4, 4)), 4) * Fraction(2) ** draw(st.integers(-1080, 980))
    return x + offset


def reference_nearest(q: Fraction) -> float | None:
    try:
        return float(q)  # CPython rounds int/int correctly (ties to even)
    except OverflowError:
        return None


@given(rationals_over_float_range())
@example(Fraction(1, 10))
@example(Fraction(1, 3))
@example(Fraction(1, 2**1075))  # tie between 0 and the least subnormal
@example(Fraction(3, 2**1076))
@example(Fraction(-1, 2**2000))
@example(Fraction(FLOAT_MAX) + Fraction(1, 10**9))
@example(Fraction(2**1024 - 2**970))  # tie between FLOAT_MAX and 2**1024
@example(Fraction(2**1024 - 2**970 - 1))
@example(-Fraction(2**1024))
@example(Fraction(2**53 + 1))  # tie, rounds to even
@example(Fraction(2**53 + 3))
def test_fmpq_to_float_is_correctly_rounded(q: Fraction) -> None:
    exact = to_fmpq(q)
    try:
        down = fmpq_to_float(exact, "down")
    except RangeOverflowError:
        down = None
        assert q < -Fraction(FLOAT_MAX)
    try:
        up = fmpq_to_float(exact, "up")
    except RangeOverflowError:
        up = None
        assert q > Fraction(FLOAT_MAX)
    if down is None:
        assert up == -FLOAT_MAX
    elif up is None:
        assert down == FLOAT_MAX
    else:
        assert Fraction(down) <= q <= Fraction(up)
        assert up == down if Fraction(down) == q else up == math.nextafter(down, math.inf)
    nearest = reference_nearest(q)
    if nearest is None:
        with pytest.raises(RangeOverflowError, match="exceeds float64"):
            fmpq_to_float(exact, "nearest")
    else:
        got = fmpq_to_float(exact, "nearest")
        assert got == nearest and math.copysign(1, got) == math.copysign(1, nearest)


def test_fmpq_to_float_edges() -> None:
    assert fmpq_to_float(to_fmpq("1*2^-2000"), "up") == TINY
    assert fmpq_to_float(to_fmpq("1*2^-2000"), "down") == 0.0
    assert fmpq_to_float(to_fmpq("-1*2^-2000"), "down") == -TINY
    assert math.copysign(1, fmpq_to_float(to_fmpq("-1*2^-2000"), "up")) == -1.0
    assert fmpq_to_float(to_fmpq("1e400"), "down") == FLOAT_MAX
    assert fmpq_to_float(to_fmpq("-1e400"), "up") == -FLOAT_MAX
    assert fmpq_to_float(to_fmpq("1e-5000"), "nearest") == 0.0
    assert fmpq_to_float(to_fmpq(0), "up") == 0.0
    with pytest.raises(RangeOverflowError, match="exceeds float64"):
        fmpq_to_float(to_fmpq("1e400"), "up")
    with pytest.raises(RangeOverflowError, match="exceeds float64"):
        fmpq_to_float(to_fmpq(f"-1e{MAX_STRING_EXPONENT}"), "down")
    with pytest.raises(InputError, match="rounding"):
        fmpq_to_float(to_fmpq(1), "zero")  # type: ignore[arg-type]


@given(finite_floats)
def test_fmpq_to_float_is_identity_on_floats(x: float) -> None:
    for rounding in ("down", "up", "nearest"):
        assert fmpq_to_float(to_fmpq(x), rounding) == x


def test_fmpq_array_to_float() -> None:
    a = to_fmpq_array([["1/3", "2"], ["-1/10", "1*2^-1074"]], "A")
    down = fmpq_array_to_float(a, "down")
    up = fmpq_array_to_float(a, "up")
    assert down.dtype == np.float64 and down.shape == (2, 2)
    for d, u, q in zip(down.ravel(), up.ravel(), a.ravel(), strict=True):
        assert Fraction(float(d)) <= as_fraction(q) <= Fraction(float(u))
    assert down[0, 0] < up[0, 0] and down[1, 1] == up[1, 1] == TINY
    with pytest.raises(RangeOverflowError, match=r"^A\[1\]: "):
        fmpq_array_to_float(["1", "1e400"], "up", "A")


@settings(max_examples=50)
@given(st.lists(rationals_over_float_range(), min_size=1, max_size=5))
def test_fmpq_array_to_float_matches_scalar(qs: list[Fraction]) -> None:
    exact = [to_fmpq(q) for q in qs]
    try:
        expected = [fmpq_to_float(q, "nearest") for q in exact]
    except RangeOverflowError:
        return
    assert fmpq_array_to_float(exact, "nearest").tolist() == expected
