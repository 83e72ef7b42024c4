"""Tests of certified.arith.ball: precision control, conversion, exact endpoints, containment."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import flint
import numpy as np
import pytest
from flint import arb, arb_mat, ctx, fmpq
from hypothesis import example, given
from hypothesis import strategies as st

from certified.arith.ball import (
    MAX_PREC,
    MIN_PREC,
    arb_mat_endpoints,
    arb_matrix,
    arb_vector,
    ball_subset,
    check_precision,
    contains,
    endpoints,
    mid_rad,
    precision,
    require_finite,
    to_arb,
)
from certified.errors import (
    DomainError,
    InputError,
    NonFiniteError,
    NumberFormatError,
    PrecisionError,
    ShapeError,
)

precisions = st.integers(MIN_PREC, 300)
finite_floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
exact_rationals = st.fractions() | st.builds(
    lambda q, k: q * Fraction(2) ** k, st.fractions(), st.integers(-1100, 1100)
)


@pytest.fixture(autouse=True)
def _restore_flint_context() -> Iterator[None]:
    """Self-contained stand-in for the project-wide fixture: leave ctx as found."""
    prec, cap = ctx.prec, ctx.cap
    yield
    ctx.prec, ctx.cap = prec, cap


def frac(q: fmpq) -> Fraction:
    return Fraction(int(q.p), int(q.q))


@st.composite
def exact_balls(draw: st.DrawFn) -> arb:
    """Balls with a dyadic midpoint and a radius that python-flint rounds up to a mag."""
    mid = (draw(st.integers(-(2**80), 2**80)), draw(st.integers(-200, 200)))
    rad = (draw(st.integers(0, 2**30 - 1)), draw(st.integers(-250, 150)))
    return arb(mid, rad)


# --- python-flint behaviour this module relies on --------------------------------------------


def test_python_flint_constructor_facts() -> None:
    with precision(10):
        third = arb(fmpq(1, 3))
        assert third.mid().man_exp()[0].bit_length() <= 10 and third.rad() > 0  # rounded
        assert arb(0.1).rad() == 0 and arb(2**200 + 1).rad() == 0  # exact
        assert arb((2**100 + 1, -1074)).mid().man_exp() == (2**100 + 1, -1074)
        assert arb_mat([[arb(2**100 + 1)]])[0, 0].rad() == 0
    with precision(200):
        precise = arb(fmpq(1, 3))
    with precision(10):  # lower() is rounded to ctx.prec: not the exact endpoint
        rounded_lower = Fraction(*map(int, precise.lower().man_exp()[:1]))
        rounded_lower *= Fraction(2) ** int(precise.lower().man_exp()[1])
        assert rounded_lower < frac(endpoints(precise)[0])
    assert arb("nan").contains(1) and arb(0, "inf").contains(10**100)  # why require_finite


# --- precision -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -5, 7, MAX_PREC + 1, 10**9, 2.5, 53.0, True, False, "53", None])
def test_check_precision_rejects(bad: object) -> None:
    with pytest.raises(PrecisionError, match=r"^prec: .*use an int between"):
        check_precision(bad)


@pytest.mark.parametrize("good", [MIN_PREC, 53, MAX_PREC, np.int64(100)])
def test_check_precision_accepts(good: int) -> None:
    assert check_precision(good) == int(good) and type(check_precision(good)) is int


def test_precision_restores_after_normal_exit() -> None:
    ctx.prec, ctx.cap = 53, 10
    with precision(200, cap=25) as bits:
        assert bits == 200 and ctx.prec == 200 and ctx.cap == 25
    assert (ctx.prec, ctx.cap) == (53, 10)


def test_precision_restores_after_exception() -> None:
    ctx.prec, ctx.cap = 71, 12
    with pytest.raises(ZeroDivisionError), precision(300, cap=40):
        1 / 0  # noqa: B018
    assert (ctx.prec, ctx.cap) == (71, 12)


def test_precision_nested() -> None:
    ctx.prec, ctx.cap = 53, 10
    with precision(100):
        assert (ctx.prec, ctx.cap) == (100, 10)
        with precision(20, cap=5):
            assert (ctx.prec, ctx.cap) == (20, 5)
            with pytest.raises(RuntimeError), precision(400):
                raise RuntimeError
            assert (ctx.prec, ctx.cap) == (20, 5)
        assert (ctx.prec, ctx.cap) == (100, 10)
    assert (ctx.prec, ctx.cap) == (53, 10)


@pytest.mark.parametrize(("bits", "cap"), [(3, None), (53, 0), (53, 2.0), (53, True)])
def test_precision_validates_before_changing_state(bits: int, cap: object) -> None:
    ctx.prec, ctx.cap = 53, 10
    with pytest.raises(PrecisionError), precision(bits, cap=cap):  # type: ignore[arg-type]
        pass
    assert (ctx.prec, ctx.cap) == (53, 10)


# --- to_arb ----------------------------------------------------------------------------------


@given(exact_rationals, precisions)
@example(Fraction(1, 3), MIN_PREC)
@example(Fraction(-1, 10), 53)
def test_to_arb_encloses_rationals_at_the_given_precision(q: Fraction, prec: int) -> None:
    ctx.prec = 17  # the global precision must not matter
    ball = to_arb(q, prec)
    assert ctx.prec == 17
    lo, hi = endpoints(ball)
    assert frac(lo) <= q <= frac(hi)
    assert frac(hi - lo) <= abs(q) * Fraction(2) ** (2 - prec)  # rounded at prec, not at 17
    if q.denominator & (q.denominator - 1) == 0:
        assert lo == hi  # dyadic values stay exact


@given(finite_floats, precisions)
@example(5e-324, MIN_PREC)
@example(1.7976931348623157e308, MIN_PREC)
def test_to_arb_floats_are_exact(x: float, prec: int) -> None:
    lo, hi = endpoints(to_arb(x, prec))
    assert frac(lo) == frac(hi) == Fraction(x)
    lo, hi = endpoints(to_arb(np.float32(x) if abs(x) < 3e38 else 1.0, prec))
    assert lo == hi


def test_to_arb_strings_and_ints() -> None:
    assert endpoints(to_arb(2**300 + 1, MIN_PREC)) == (
        fmpq(2**300 + 1),
        fmpq(2**300 + 1),
    )
    lo, hi = endpoints(to_arb("0.1", 60))
    assert lo < fmpq(1, 10) < hi and to_arb(0.1, 60).mid() != to_arb("0.1", 60).mid()


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (float("nan"), NonFiniteError),
        (float("inf"), NonFiniteError),
        ("inf", NonFiniteError),
        (arb("nan"), NonFiniteError),
        (arb("inf"), NonFiniteError),
        (arb(1, "inf"), NonFiniteError),
        ("abc", NumberFormatError),
        (True, InputError),
    ],
)
def test_to_arb_rejects(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^b\[2\]: "):
        to_arb(bad, 53, "b[2]")


def test_to_arb_rejects_bad_precision() -> None:
    with pytest.raises(PrecisionError):
        to_arb(1, 0)


def test_to_arb_passes_finite_arb_through() -> None:
    ball = arb(fmpq(1, 3))
    assert to_arb(ball, 8) is ball


# --- require_finite, endpoints, containment --------------------------------------------------


@pytest.mark.parametrize(
    "ball",
    [arb("nan"), arb("inf"), arb("-inf"), arb(1, "inf"), arb(0, "nan"), arb(1) / 0],
)
def test_non_finite_balls_rejected_everywhere(ball: arb) -> None:
    with pytest.raises(NonFiniteError, match=r"^B: "):
        require_finite(ball, "B")
    with pytest.raises(NonFiniteError):
        contains(ball, 1)
    with pytest.raises(NonFiniteError):
        endpoints(ball)
    with pytest.raises(NonFiniteError):
        mid_rad(ball)
    with pytest.raises(NonFiniteError):
        ball_subset(arb(1), ball)
    with pytest.raises(NonFiniteError):
        ball_subset(ball, arb(1))
    with pytest.raises(NonFiniteError, match=r"^W\[0\]\[1\]: "):
        arb_matrix([[0, ball]], 53, "W")
    with pytest.raises(NonFiniteError, match=r"^W\[1\]\[0\]: "):
        arb_matrix(arb_mat([[1, 2], [ball, 3]]), 53, "W")


def test_require_finite_type() -> None:
    with pytest.raises(InputError, match=r"^B: expected a flint.arb"):
        require_finite(1.0, "B")  # type: ignore[arg-type]
    assert require_finite(arb(2), "B") == arb(2)


@given(exact_balls())
def test_endpoints_match_flint_at_sufficient_precision(ball: arb) -> None:
    lo, hi = endpoints(ball)
    mid, rad = mid_rad(ball)
    assert lo == mid - rad and hi == mid + rad and rad >= 0
    with precision(MAX_PREC):  # python-flint's own outward rounding is exact here
        ref_lo = ball.lower().man_exp()
        ref_hi = ball.upper().man_exp()
    assert frac(lo) == Fraction(int(ref_lo[0])) * Fraction(2) ** int(ref_lo[1])
    assert frac(hi) == Fraction(int(ref_hi[0])) * Fraction(2) ** int(ref_hi[1])


@given(exact_rationals, precisions)
def test_endpoints_are_exact_and_independent_of_ctx(q: Fraction, prec: int) -> None:
    ball = to_arb(q, prec)
    first = endpoints(ball)
    with precision(MIN_PREC):
        assert endpoints(ball) == first
    assert frac(first[0]) <= q <= frac(first[1])


@given(exact_balls(), finite_floats)
def test_contains_agrees_with_flint_on_exact_points(ball: arb, x: float) -> None:
    # arb.contains on two finite exact balls is a certain, exact comparison
    assert contains(ball, x) == ball.contains(arb(x))


@given(exact_rationals, exact_rationals, precisions)
def test_contains_is_exact_comparison(q: Fraction, r: Fraction, prec: int) -> None:
    ball = to_arb(q, prec)
    lo, hi = endpoints(ball)
    assert contains(ball, q)
    assert contains(ball, r) == (frac(lo) <= r <= frac(hi))
    assert contains(ball, lo) and contains(ball, hi)
    eps = fmpq(1, 10**60)
    assert not contains(ball, lo - eps) and not contains(ball, hi + eps)


def test_contains_input_forms() -> None:
    # [0.25, 0.75]; arb(mid, rad) rounds the radius up to a 30-bit mag (even arb(0, 1) gets
    # radius 1 + 2**-29), a power-of-two radius given as (man, exp) stays exact
    ball = arb((1, -1), (1, -2))
    assert contains(ball, "1/4") and contains(ball, "0.75") and contains(ball, 0.5)
    assert not contains(ball, "0.7500000000000000000000000000001")
    assert contains(ball, arb(0.25))
    with pytest.raises(InputError, match="ball_subset"):
        contains(ball, arb(0.5, 0.1))
    with pytest.raises(NumberFormatError, match=r"^x: "):
        contains(ball, "abc")
    with pytest.raises(NonFiniteError):
        contains(ball, float("nan"))


@given(exact_balls(), exact_balls())
def test_ball_subset_is_exact(inner: arb, outer: arb) -> None:
    i_lo, i_hi = endpoints(inner)
    o_lo, o_hi = endpoints(outer)
    expected = o_lo <= i_lo and i_hi <= o_hi
    assert ball_subset(inner, outer) == expected
    assert ball_subset(inner, outer) == outer.contains(inner)
    assert ball_subset(inner, inner)


def test_ball_subset_boundaries() -> None:
    outer = arb(0, (1, 0))  # [-1, 1]
    assert ball_subset(arb((1, -1), (1, -1)), outer)  # [0, 1]
    assert not ball_subset(arb((1, -1), (2**29 + 1, -30)), outer)  # radius just above 1/2
    assert not ball_subset(arb((-1, 0), (1, -40)), outer)
    assert ball_subset(outer, outer)


def test_huge_exponent_has_no_exact_endpoints() -> None:
    with precision(53):
        huge = arb(2) ** (2**30)
    with pytest.raises(DomainError, match="exponent"):
        endpoints(huge)


# --- vectors and matrices --------------------------------------------------------------------


def test_arb_vector() -> None:
    ctx.prec = 11
    v = arb_vector([1, "1/3", 0.1, arb(2)], 80, "b")
    assert ctx.prec == 11
    assert len(v) == 4 and all(isinstance(e, arb) for e in v)
    for ball, value in zip(v, [1, "1/3", 0.1, 2], strict=True):
        assert contains(ball, value)
    assert frac(mid_rad(v[1])[1]) < Fraction(1, 2**75)
    w = arb_vector(np.array([0.5, 2.0]), 53)
    assert [endpoints(e) for e in w] == [(fmpq(1, 2), fmpq(1, 2)), (fmpq(2), fmpq(2))]
    assert arb_vector([], 53) == []


@pytest.mark.parametrize("bad", [[[1]], 3, [[1, 2], [3]]])
def test_arb_vector_shape_errors(bad: object) -> None:
    with pytest.raises(ShapeError, match=r"^b"):
        arb_vector(bad, 53, "b")


@given(
    st.lists(st.lists(exact_rationals, min_size=3, max_size=3), min_size=1, max_size=4),
    precisions,
)
def test_arb_matrix_encloses_entries(rows: list[list[Fraction]], prec: int) -> None:
    m = arb_matrix([[f"{q.numerator}/{q.denominator}" for q in row] for row in rows], prec, "W")
    assert (m.nrows(), m.ncols()) == (len(rows), 3)
    lower, upper = arb_mat_endpoints(m)
    assert lower.shape == upper.shape == (len(rows), 3)
    for i, row in enumerate(rows):
        for j, q in enumerate(row):
            assert frac(lower[i, j]) <= q <= frac(upper[i, j])
            assert (lower[i, j], upper[i, j]) == endpoints(m[i, j])


def test_arb_matrix_inputs() -> None:
    a = np.array([[0.1, 2.0], [-3.0, 5e-324]])
    m = arb_matrix(a, 53, "A")
    lower, upper = arb_mat_endpoints(m)
    assert all(
        frac(lower[i, j]) == frac(upper[i, j]) == Fraction(float(a[i, j]))
        for i in range(2)
        for j in range(2)
    )
    q = flint.fmpq_mat([[1, 2], [3, fmpq(1, 3)]])
    mq = arb_matrix(q, 40)
    assert contains(mq[1, 1], "1/3") and mq[0, 1].rad() == 0
    existing = arb_mat([[1, 2]])
    assert arb_matrix(existing, 53) is existing


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        [[1, 2], [3]],
        [[1, 2], 3],
        [],
        [[]],
        [[[1]]],
        5,
        np.zeros((2, 2, 2)),
        arb_mat(0, 3),
    ],
)
def test_arb_matrix_shape_errors(bad: object) -> None:
    with pytest.raises(ShapeError, match=r"^W"):
        arb_matrix(bad, 53, "W")


def test_arb_matrix_element_errors_name_index() -> None:
    with pytest.raises(NumberFormatError, match=r"^W\[1\]\[0\]: 'x'"):
        arb_matrix([[1, 2], ["x", 3]], 53, "W")
    with pytest.raises(PrecisionError):
        arb_matrix([[1]], 4, "W")


def test_arb_mat_endpoints_rejects_non_matrix() -> None:
    with pytest.raises(InputError, match=r"^M: expected a flint.arb_mat"):
        arb_mat_endpoints([[1]], "M")  # type: ignore[arg-type]


def test_public_functions_leave_ctx_unchanged() -> None:
    ctx.prec, ctx.cap = 29, 7
    to_arb("1/3", 200)
    arb_vector(["1/7"], 300)
    arb_matrix([["1/11"]], 400)
    endpoints(arb(fmpq(1, 3)))
    assert (ctx.prec, ctx.cap) == (29, 7)
