"""Construction, bad input, three-valued comparisons and conversions of Interval."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import arb, ctx, fmpq
from hypothesis import given
from hypothesis import strategies as st

from certified.arith import Interval, Tri, TriArray
from certified.arith import interval as iv
from certified.arith.fpu import check_fpu_state
from certified.errors import (
    CertifiedError,
    DomainError,
    EmptyIntervalError,
    FPUStateError,
    InputError,
    NonFiniteError,
    PrecisionError,
    ShapeError,
)


@pytest.mark.parametrize(
    ("lo", "hi", "error", "words"),
    [
        (float("nan"), 1.0, NonFiniteError, "lo"),
        (0.0, float("inf"), NonFiniteError, "hi"),
        ([0.0, -np.inf], None, NonFiniteError, "lo[1]"),
        (2.0, 1.0, EmptyIntervalError, "exceeds"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], ShapeError, "broadcast"),
        ([[1.0], [2.0, 3.0]], None, ShapeError, "rectangular"),
        (True, None, InputError, "bool"),
        (["a"], None, InputError, "dtype"),
        (2**60, None, InputError, "2^53"),
    ],
)
def test_bad_input_is_rejected_with_a_specific_error(lo, hi, error, words):
    with pytest.raises(error, match=None) as info:
        Interval(lo, hi)
    assert isinstance(info.value, CertifiedError)
    assert words in str(info.value)


def test_operations_reject_bad_operands():
    X = Interval([1.0, 2.0])
    with pytest.raises(NonFiniteError):
        X + np.array([np.nan, 1.0])
    with pytest.raises(ShapeError):
        X * Interval([1.0, 2.0, 3.0])
    with pytest.raises(InputError):
        iv.pown(X, 1.5)
    with pytest.raises(InputError):
        iv.pown(X, True)
    with pytest.raises(ShapeError):
        iv.isum(Interval(np.zeros((2, 0))), axis=1)
    with pytest.raises(ShapeError):
        iv.isum(X, axis=3)
    with pytest.raises(ShapeError):
        Interval(np.ones((2, 3))) @ Interval(np.ones((2, 3)))
    with pytest.raises(ShapeError):
        iv.dot(X, Interval([1.0]))
    with pytest.raises(PrecisionError):
        X.to_balls(0)
    with pytest.raises(DomainError):
        iv.log(Interval([-1.0, 1.0]))


def test_intervals_have_no_truth_value_and_no_hash():
    X = Interval([1.0, 2.0])
    with pytest.raises(TypeError):
        bool(X)
    with pytest.raises(TypeError):
        hash(X)
    with pytest.raises(TypeError):
        bool(X < 3.0)
    with pytest.raises(TypeError):
        bool(Tri.UNKNOWN)


def test_three_valued_comparisons():
    X = Interval([0.0, 0.0, 3.0], [1.0, 3.0, 4.0])
    t = X.lt(Interval(2.0, 2.5))
    assert isinstance(t, TriArray)
    assert t[0] is Tri.TRUE
    assert t[1] is Tri.UNKNOWN
    assert t[2] is Tri.FALSE
    assert t.all() is Tri.FALSE
    assert t.any() is Tri.TRUE
    assert (X[:1] < 2.0).all() is Tri.TRUE
    assert (Tri.TRUE & Tri.UNKNOWN) is Tri.UNKNOWN
    assert (Tri.FALSE & Tri.UNKNOWN) is Tri.FALSE
    assert (Tri.TRUE | Tri.UNKNOWN) is Tri.TRUE
    assert ~Tri.TRUE is Tri.FALSE


def test_negative_zero_and_scalars():
    X = Interval(-0.0, 0.0)
    assert X.shape == ()
    assert str(np.signbit(X.lo)) == "False"
    Y = Interval(1.0) / Interval([-50.0, -10.0])
    assert Y.shape == (2,)
    assert np.all(Y.lo <= -0.02) and np.all(Y.hi >= -0.1)


def test_results_are_read_only():
    X = Interval([1.0, 2.0])
    with pytest.raises(ValueError):
        X.lo[0] = 5.0
    with pytest.raises(ValueError):
        (X * X).hi[0] = 0.0


def test_from_exact_is_tightest():
    X = Interval.from_exact(["1/10", "0.1", 3, "1/3"])
    for lo, hi, q in zip(X.lo, X.hi, [Fraction(1, 10)] * 2 + [3, Fraction(1, 3)], strict=True):
        assert Fraction(lo) <= q <= Fraction(hi)
        if Fraction(lo) != q:
            assert np.nextafter(lo, np.inf) == hi  # one ulp wide: tightest
    assert X.lo[2] == X.hi[2] == 3.0


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(0, 1e3, allow_nan=False),
    st.integers(8, 200),
)
def test_ball_round_trip_contains(mid, width, prec):
    X = Interval(mid, mid + width)
    b = X.to_balls(prec)
    assert b.lower() <= arb(mid) and b.upper() >= arb(mid + width)
    Y = Interval.from_balls(b)
    assert Y.lo <= mid and Y.hi >= mid + width


def test_from_balls_rejects_non_finite_balls():
    with pytest.raises(NonFiniteError):
        Interval.from_balls(arb("nan"))
    with pytest.raises(NonFiniteError):
        Interval.from_balls([arb(1), arb("inf")])


def test_from_balls_encloses_exact_rationals():
    old = ctx.prec
    ctx.prec = 200
    try:
        balls = [arb(fmpq(1, 3)), arb(fmpq(-2, 7))]
    finally:
        ctx.prec = old
    Y = Interval.from_balls(balls)
    assert Fraction(Y.lo[0]) <= Fraction(1, 3) <= Fraction(Y.hi[0])
    assert Fraction(Y.lo[1]) <= Fraction(-2, 7) <= Fraction(Y.hi[1])


def test_fpu_check_passes_here_and_reports_a_broken_environment(monkeypatch):
    check_fpu_state()
    from certified.arith import fpu

    monkeypatch.setattr(fpu, "_expectations", lambda: [("round-to-nearest", 1.0, 2.0)])
    with pytest.raises(FPUStateError, match="round-to-nearest"):
        check_fpu_state()


def test_mid_and_width_bounds():
    X = Interval([-1e308, 0.1, 5.0], [1e308, 0.3, 5.0])
    m = X.mid()
    assert np.all((X.lo <= m) & (m <= X.hi))
    w = X.width_upper()
    assert w[0] == np.inf  # 2e308 is beyond the float range: inf is the honest upper bound
    for lo, hi, wi in zip(X.lo[1:], X.hi[1:], w[1:], strict=True):
        assert Fraction(wi) >= Fraction(hi) - Fraction(lo)
    r = X.rad_upper()
    for lo, hi, mi, ri in zip(X.lo, X.hi, m, r, strict=True):
        assert Fraction(ri) >= max(Fraction(hi) - Fraction(mi), Fraction(mi) - Fraction(lo))


def test_matmul_work_arrays_are_per_thread():
    """matmul reuses work arrays; concurrent products in threads must not share them."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    mats = [(rng.standard_normal((16, 32)), rng.standard_normal((32, 400))) for _ in range(8)]

    def product(ab):
        a, b = ab
        C = Interval(a) @ Interval(b - 1e-9, b + 1e-9)
        return C, a, b

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(product, mats * 3))
    for C, a, b in results:
        for i, j in [(0, 0), (15, 399), (7, 123)]:
            exact = sum(Fraction(a[i, k]) * Fraction(b[k, j]) for k in range(32))
            assert Fraction(C.lo[i, j]) <= exact <= Fraction(C.hi[i, j])


def test_matmul_of_point_matrices_is_tight_and_tiny_values_stay_sound():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((8, 8)), rng.standard_normal((8, 5))
    C = Interval(a) @ Interval(b)
    # the a priori bound: width about 2 gamma_n |a||b| (no radius from the point operands)
    assert np.all(C.width_upper() <= 4 * (8 + 2) * 2.0**-53 * (np.abs(a) @ np.abs(b)))
    tiny = Interval(a * 1e-300) @ Interval(b * 1e-10)  # products near the subnormal range
    for i in range(8):
        exact = sum(Fraction(a[i, k] * 1e-300) * Fraction(b[k, 0] * 1e-10) for k in range(8))
        assert Fraction(tiny.lo[i, 0]) <= exact <= Fraction(tiny.hi[i, 0])
