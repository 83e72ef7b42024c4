"""Theorem F's switch count L against mpmath at 60 digits, and its parameter checks (p >= d:
the erratum of theorems.md section 9; q in [1, d/(d-1)); epsilon > 0)."""

import math
from fractions import Fraction

import flint
import mpmath
import pytest
import sympy
from hypothesis import example, given
from hypothesis import strategies as st

from certified.cube import check_parameters, formula_switches
from certified.errors import DomainError, InputError


def _reference(d, p, eps, q):
    """L = ceil(2d/p) + ceil((3^(1+d/q) sqrt(d)/eps)^e / (p-d+1)) - 1, e = d/(1+d/q-d), with
    60 digits after the point (x may have hundreds before it)."""

    def x_at(dps):
        with mpmath.workdps(dps):
            d_ = mpmath.mpf(d)
            q_, eps_ = (mpmath.mpf(int(v.p)) / int(v.q) for v in (q, eps))
            e = d_ / (1 + d_ / q_ - d_)
            return (mpmath.mpf(3) ** (1 + d_ / q_) * mpmath.sqrt(d_) / eps_) ** e / (p - d + 1)

    dps = 60 + max(0, int(mpmath.log10(x_at(30))))
    with mpmath.workdps(dps):
        x = x_at(dps)
        ceil = int(mpmath.ceil(x))
        if abs(x - mpmath.nint(x)) < mpmath.mpf(10) ** -40:  # an integer? sympy decides exactly
            r = sympy.Rational
            qs, es = r(int(q.p), int(q.q)), r(int(eps.p), int(eps.q))
            e = r(d) / (1 + r(d) / qs - d)
            xs = (sympy.Integer(3) ** (1 + r(d) / qs) * sympy.sqrt(d) / es) ** e / (p - d + 1)
            ceil = int(sympy.ceiling(sympy.nsimplify(xs)))
        return math.ceil(2 * d / p) + ceil - 1


@given(
    d=st.integers(1, 3),
    extra=st.integers(0, 3),
    eps=st.fractions(min_value="1/50", max_value=2).filter(lambda x: x > 0),
    t=st.fractions(min_value=0, max_value="9/10"),
)
@example(d=2, extra=0, eps=Fraction(1, 20), t=0)  # 583,200 exactly
@example(d=1, extra=0, eps=Fraction(1, 2), t=0)  # 18 exactly
@example(d=3, extra=0, eps=Fraction(1, 50), t=Fraction(22418, 24920))  # x ~ 10^150
def test_formula_matches_mpmath(d, extra, eps, t):
    # q = 1 + t (d/(d-1) - 1) in [1, d/(d-1)) (q = 1 + 2t for d = 1)
    q = 1 + t * 2 if d == 1 else 1 + t * (Fraction(d, d - 1) - 1)
    q, eps = (flint.fmpq(v.numerator, v.denominator) for v in (Fraction(q), eps))
    got = formula_switches(d, d + extra, eps, q)
    if got is not None:
        assert got == _reference(d, d + extra, eps, q)


def test_formula_known_values():
    # d = 2, q = 1, eps = 1/20: (27 sqrt 2 * 20)^2 = 583,200 exactly; p = 2: 4/2 + 583200 - 1
    assert formula_switches(2, 2, "1/20", 1) == 583201
    assert formula_switches(2, 4, "1/20", 1) == 1 + math.ceil(583200 / 3) - 1
    assert formula_switches(3, 3, "0.05", "1.49999") is None  # over 10,000 digits


@pytest.mark.parametrize(
    ("d", "p", "eps", "q", "error", "match"),
    [
        (2, 1, "0.1", 1, DomainError, "p >= d .*erratum"),
        (3, 2, "0.1", 1, DomainError, "p = 2 < d = 3"),
        (2, 2, "0", 1, InputError, "epsilon: 0 is not positive"),
        (2, 2, "-1/2", 1, InputError, "epsilon"),
        (2, 2, "0.1", 2, DomainError, r"q: 2 is outside \[1, 2/1\)"),
        (3, 3, "0.1", "3/2", DomainError, r"outside \[1, 3/2\)"),
        (2, 2, "0.1", "1/2", DomainError, "q: 1/2 is outside"),
        (2, 2.0, "0.1", 1, InputError, "width: expected an integer"),
        (2, True, "0.1", 1, InputError, "width"),
    ],
)
def test_bad_parameters(d, p, eps, q, error, match):
    with pytest.raises(error, match=match):
        check_parameters(d, p, eps, q)


def test_d_one_allows_any_q():
    assert check_parameters(1, 1, "1/2", 7)[2] == 7
