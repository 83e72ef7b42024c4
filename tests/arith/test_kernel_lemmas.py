"""The lemmas of proofs/bounds.md that the kernels rely on, checked against exact references."""

from __future__ import annotations

import importlib.util
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.arith import _kernels as K  # noqa: N812

finite = st.floats(allow_nan=False, allow_infinity=False)
# bias towards the places where pred/succ are delicate: binade boundaries and subnormals
edges = st.sampled_from(
    [0.0, 5e-324, 1e-323, 2.0**-1022, 2.0**-1022 - 5e-324, 1.0, 2.0, 0.5, 1.7976931348623157e308]
)
doubles = st.one_of(finite, edges, edges.map(lambda v: -v))


def _load_constants():
    path = Path(__file__).resolve().parents[2] / "proofs" / "kernel_constants.py"
    spec = importlib.util.spec_from_file_location("kernel_constants", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@given(doubles)
@example(1.0)
@example(2.0**-1022)
@example(-(2.0**-1022))
@example(5e-324)
def test_dn_up_bracket_pred_succ(c):
    """#pred-succ: dn(c) <= pred(c) and up(c) >= succ(c)."""
    lo, hi = K.dn(c), K.up(c)
    assert lo <= math.nextafter(c, -math.inf)
    if abs(c) < 1.7976931348623157e308:
        assert hi >= math.nextafter(c, math.inf)
    else:
        assert hi >= c


@given(doubles, doubles)
@example(1.0, 2.0**-53)
@example(1.7976931348623157e308, 0.0)
@example(1.0, 1.7976931348623157e308)
def test_two_sum_bounds_are_exact_when_possible(a, b):
    """#two-sum: lo <= a + b <= hi exactly, and no widening when a + b is a double."""
    s = a + b
    if not math.isfinite(s):
        return
    lo, hi = K._sum_dn_up(a, b)
    exact = Fraction(a) + Fraction(b)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # reported as overflow by the kernels; legitimate only beyond the largest double
        assert abs(exact) > Fraction(1.7976931348623157e308)
        return
    assert Fraction(lo) <= exact <= Fraction(hi)
    if Fraction(s) == exact:
        assert lo == hi == s


@given(
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=-1.0, max_value=1.0),
)
def test_widening_lemma(y, frac, sign):
    """#widening: |y - f| <= eps|y| + eta with eps <= e(1-u)^2 implies lo <= f <= hi."""
    e = K.E_EXP
    eps = Fraction(e) * (1 - Fraction(1, 2**53)) ** 2
    f = Fraction(y) + Fraction(sign) * Fraction(frac) * (eps * abs(Fraction(y)) + Fraction(K.ETA))
    lo, hi = K.widen(y, e)
    assert Fraction(lo) <= f <= Fraction(hi)


def test_tables_are_what_the_lemmas_assume():
    """Coefficients are round-to-nearest values of 1/i! etc.; 2^k table is exact."""
    for i, c in enumerate(K.EXP_COEF):
        assert c == float(Fraction(1, math.factorial(i)))  # float(Fraction) rounds correctly
    for i, c in enumerate(K.EXPM1_COEF):
        assert c == float(Fraction(1, math.factorial(i + 1)))
    for i, c in enumerate(K.ATANH_COEF):
        assert c == float(Fraction(1, 2 * i + 1))
    for j, p in enumerate(K.POW2):
        assert Fraction(p) == Fraction(2) ** (j - K.POW2_OFFSET)
    assert Fraction(K.PHI) == Fraction(1, 2**53) * (1 + Fraction(1, 2**52))
    assert K.LN2_HI == float.fromhex("0x1.62e42fee00000p-1")
    assert int(Fraction(K.LN2_HI) * 2**32) == Fraction(K.LN2_HI) * 2**32  # 32 bits


def test_kernel_allowances_dominate_proved_errors():
    """proofs/kernel_constants.py evaluates each proved error in arb and compares."""
    kc = _load_constants()
    figures = kc.check_all()
    allowances = {"exp": K.E_EXP, "expm1": K.E_EXPM1, "log": K.E_LOG, "log1p": K.E_ATANH}
    for name, allowance in allowances.items():
        assert kc.ALLOWANCES[name][1] == allowance, f"{name}: kernel and proof disagree"
        assert figures[name][0] < allowance / 2.0**-53
    # the proof itself must be able to fail: a too small allowance is caught
    old = kc.ALLOWANCES["exp"]
    kc.ALLOWANCES["exp"] = (old[0], 2.0**-52)
    try:
        with pytest.raises(AssertionError):
            kc.check_all()
    finally:
        kc.ALLOWANCES["exp"] = old


@pytest.mark.parametrize("x", [-745.2, -700.0, -1.0, -1e-300, 0.0, 0.3466, 1.0, 700.0, 709.78])
def test_reduction_precondition_holds(x):
    """#exp-reduction: |r| <= 0.3466 over the whole argument range."""
    xs = np.linspace(x - 1.0, x + 1.0, 20001)
    xs = xs[(xs >= K.EXP_ARG_MIN) & (xs <= K.EXP_ARG_MAX)]
    for v in xs[::97]:
        k, r = K._reduce(float(v))
        assert abs(r) <= K.REDUCED_MAX
        assert k == float(int(k))


@pytest.mark.parametrize("name", ["exp", "expm1", "tanh"])
def test_nan_reaching_a_table_kernel_is_flagged_not_indexed(name):
    """A NaN (which validated inputs never contain) must not index the 2^k table out of
    range; it is reported as a broken precondition (relies on max(c, nan) == c)."""
    x = np.array([math.nan, 0.5, -math.nan])
    lo, hi, status = getattr(K, name)(x, x)
    assert status == K.BROKEN
    assert np.isfinite(lo[1]) and np.isfinite(hi[1])


def test_softmax_and_lse_with_endpoints_near_the_float_limit():
    """v_j - max(v) overflows to -inf for endpoints near -+max double: bounds stay valid."""
    big = 1.7976931348623157e308
    lo = np.array([[-big, -big, 0.0]])
    hi = np.array([[big / 2, -big, 0.0]])
    slo, shi, status = K.softmax_rows(lo, hi)
    assert status == K.OK
    assert np.all((0.0 <= slo) & (slo <= shi) & (shi <= 1.0))
    llo, lhi, status = K.logsumexp_rows(lo, hi)
    assert status == K.OK and llo[0] <= math.log(3) and lhi[0] >= big / 2
    _, _, status = K.logsumexp_rows(lo, np.array([[big, -big, 0.0]]))
    assert status == K.OVERFLOW  # log-sum-exp above the largest double: honestly reported
