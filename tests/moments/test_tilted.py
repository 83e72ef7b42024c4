"""Tilted moments, G = grad log Z and the identity instance checks in ball arithmetic:
containment against exact values and 60-digit mpmath references, consistency of the identity
checks, exact cumulants, bad input."""

from __future__ import annotations

import mpmath
import pytest
from flint import fmpq
from hypothesis import example, given
from hypothesis import strategies as st
from moment_pairs import PTE_2, PTE_5, measures, mp_inside, reference_gradient, small_rationals

from certified.arith.ball import contains, endpoints, precision
from certified.errors import InputError, NonFiniteError, PrecisionError, ShapeError
from certified.moments import (
    check_cumulants,
    check_gradient_identity,
    check_moment_identity,
    cumulants_from_moments,
    discrete_measure,
    log_partition_gradient,
    merged_atoms,
    same_measure,
    tilted_moment_series,
    tilted_moments,
)
from certified.moments.tilted import IdentityCheck, _coefficients, _residual_check


def _contains_ref(ball, ref, digits=60):
    lo, hi = endpoints(ball)
    return mp_inside(ref, lo, hi, digits)


@given(measures(), st.data())
@example(([[0], [4], [5]], None), None)
@example(([[0]], [fmpq(1)]), None)  # regression: exact ball of width 0
def test_gradient_contains_mpmath_reference(measure, data):
    d = len(measure[0][0])
    q = [fmpq(1, 3)] * d if data is None else [data.draw(small_rationals) for _ in range(d)]
    balls = log_partition_gradient(measure, q, 128)
    ref = reference_gradient(measure, q)
    assert all(_contains_ref(g, r) for g, r in zip(balls, ref, strict=True))


@given(measures(d=1), small_rationals)
def test_tilted_moments_contain_reference(measure, b):
    Ls = tilted_moments(measure, b, 4, 128)
    pts, w = measure
    with mpmath.workdps(60):
        e = [
            mpmath.mpf(int(wi.p))
            / int(wi.q)
            * mpmath.exp(mpmath.mpf(int((b * y[0]).p)) / int((b * y[0]).q))
            for y, wi in zip(pts, w, strict=True)
        ]
        z = mpmath.fsum(e)
        for k, ball in enumerate(Ls):
            ref = (
                mpmath.fsum(
                    ei * (mpmath.mpf(int(y[0].p)) / int(y[0].q)) ** k
                    for ei, y in zip(e, pts, strict=True)
                )
                / z
            )
            assert _contains_ref(ball, ref)
    assert contains(Ls[0], 1)


def test_tilted_moments_at_zero_are_the_exact_moments():
    x = [fmpq(0), fmpq(4), fmpq(5)]
    Ls = tilted_moments(([[v] for v in x], None), 0, 5, 96)
    for k, ball in enumerate(Ls):
        assert contains(ball, sum(v**k for v in x) / 3)


@given(measures(d=1), st.sampled_from([fmpq(0), fmpq(1, 2), fmpq(-3, 4), fmpq(2)]))
@example(PTE_5[0], fmpq(1, 16))
def test_moment_identity_instance_is_consistent_and_tight(measure, b0):
    if not isinstance(measure, tuple):
        measure = ([[x] for x in measure], None)
    check = check_moment_identity(measure, b0=b0, kmax=3, order=7, prec=160)
    assert check.consistent
    assert check.checked == 4 * 6
    assert check.max_residual < fmpq(1, 2**60)


@given(measures(d=1))
@example(([[0], [4], [5]], None))
def test_cumulants_are_derivatives_of_l1_at_zero(measure):
    check = check_cumulants(measure, order=8, prec=160)
    assert check.consistent and check.checked == 8
    assert check.max_residual < fmpq(1, 2**60)


@given(measures(d=3, max_atoms=4), st.lists(small_rationals, min_size=3, max_size=3))
@example(([[0, 0, 0]], [fmpq(1)]), [0, 0, 0])  # regression: arb_series.coeffs() drops zeros
def test_gradient_is_grad_log_partition(measure, q):
    check = check_gradient_identity(measure, q, prec=128)
    assert check.consistent and check.checked == 3
    assert check.max_residual < fmpq(1, 2**80)


def test_series_coefficients_contain_exact_taylor_coefficients():
    # mu = (delta_0 + delta_1) / 2: L_1(b) = e^b / (1 + e^b) = 1/2 + b/4 - b^3/48 + b^5/480 ...
    series = _coefficients(tilted_moment_series(([[0], [1]], None), 0, 1, 7, 128)[1], 7)
    exact = [fmpq(1, 2), fmpq(1, 4), 0, fmpq(-1, 48), 0, fmpq(1, 480), 0]
    assert all(contains(c, e) for c, e in zip(series, exact, strict=True))


def test_residual_check_refutes_a_wrong_identity():
    """The check has teeth: L_2 + L_1 L_1 is not the derivative of L_1."""
    s = tilted_moment_series((PTE_2[0], None), fmpq(1, 3), 2, 6, 128)
    with precision(128, cap=6):
        lhs = _coefficients(s[1].derivative(), 5)
        wrong = _coefficients(s[2] + s[1] * s[1], 5)
    bad = _residual_check("wrong", list(zip(lhs, wrong, strict=True)))
    assert isinstance(bad, IdentityCheck) and not bad.consistent


def test_cumulants_from_moments_known_values():
    p = fmpq(1, 3)  # Bernoulli(p): every raw moment is p
    k = cumulants_from_moments([1, p, p, p, p])
    assert k == [p, p * (1 - p), p * (1 - p) * (1 - 2 * p), p * (1 - p) * (1 - 6 * p + 6 * p * p)]
    with pytest.raises(InputError):
        cumulants_from_moments([2, 1])


def test_merging_and_equality():
    a = discrete_measure(([[0], [0], [1]], ["1/4", "1/4", "1/2"]))
    b = discrete_measure(([[1], [0], [7]], ["1/2", "1/2", 0]))
    assert merged_atoms(*a) == merged_atoms(*b) == {(fmpq(0),): fmpq(1, 2), (fmpq(1),): fmpq(1, 2)}
    assert same_measure(a, b)
    with pytest.raises(ShapeError):
        same_measure(a, discrete_measure(([[0, 1]], None)))


@pytest.mark.parametrize(
    "measure, error, text",
    [
        (([[0], [1]], ["1/2", "1/3"]), InputError, "not exactly 1"),
        (([[0], [1]], [0.7, 0.3]), InputError, "not exactly 1"),  # the doubles sum to > 1
        (([[0], [1]], ["3/2", "-1/2"]), InputError, "negative"),
        (([[0], [float("nan")]], None), NonFiniteError, "points[1][0]"),
        (([[0], [1]], ["1/2", float("inf")]), NonFiniteError, "weights[1]"),
        (([[0, 1], [1]], None), ShapeError, "points[1]"),
        (([[0], [1]], ["1"]), ShapeError, "weights"),
        (([], None), ShapeError, "empty"),
        (([[]], None), ShapeError, "empty"),
        ("points", InputError, "pair"),
        ({"points": [[0]], "extra": 1}, InputError, "keys"),
    ],
)
def test_bad_measures_are_rejected_with_specific_errors(measure, error, text):
    with pytest.raises(error, match=None) as info:
        discrete_measure(measure)
    assert text in str(info.value)


def test_bad_arguments():
    with pytest.raises(PrecisionError):
        log_partition_gradient(([[0]], None), [0], 4)
    with pytest.raises(ShapeError):
        log_partition_gradient(([[0, 1]], None), [0], 64)
    with pytest.raises(ShapeError):
        tilted_moments(([[0, 1]], None), 0, 2, 64)
    with pytest.raises(InputError):
        tilted_moment_series(([[0]], None), 0, 2, 0, 64)
    with pytest.raises(NonFiniteError):
        tilted_moments(([[0]], None), float("nan"), 2, 64)
