"""Soundness of the sin and cos kernels (proofs/bounds.md#sincos).

References are mpmath values at 100 significant digits (more where the argument is huge),
taken at the exact double points; an enclosure ``[L, H]`` passes when the reference widened by
``10**-60`` relative (and clipped to ``[-1, 1]``) lies inside it -- far below the kernels'
2**-50 widening, far above mpmath's error. For intervals, the reference is the exact range:
the hull of the values at both endpoints and of ``+-1`` where ``j pi / 2`` with the right
residue lies inside, decided at a precision that resolves ``2x / pi`` for every double.

The mutation tests replace ``_kernels.sin`` / ``_kernels.cos`` (looked up at call time) by
deliberately broken kernels and require the same checks to fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from interval_strategies import DBL_MAX, TINY, doubles, intervals, random_inside, seeds

from certified.arith import Interval, _kernels
from certified.arith import interval as iv
from certified.errors import NonFiniteError

PI2 = math.pi / 2  # the double below pi/2
REF = 10**-60  # relative slack of the reference (mpmath's own error is ~1e-100)

# Corner points: zeros, subnormals, the Sterbenz boundary pi/4 of the first reduction step,
# neighbours of multiples of pi/2, the reduction limit 2^20, huge values (among them
# 6381956970095103 * 2^797, the double closest to a multiple of pi/2: beyond 2^20 anyway).
CORNERS = [
    0.0,
    -0.0,
    TINY,
    -TINY,
    2.2250738585072014e-308,
    1e-300,
    2.0**-27,
    1e-8,
    math.pi / 4,
    math.nextafter(math.pi / 4, 0.0),
    math.nextafter(math.pi / 4, 1.0),
    0.7853981633974484,
    PI2,
    math.nextafter(PI2, 2.0),
    math.pi,
    math.nextafter(math.pi, 4.0),
    3 * PI2,
    2 * math.pi,
    355.0,
    103993.0,
    104348.0,
    1e5 * math.pi,
    2.0**19,
    2.0**20,
    -(2.0**20),
    math.nextafter(2.0**20, 0.0),
    math.nextafter(2.0**20, math.inf),
    1e6,
    2.0**53,
    6381956970095103.0 * 2.0**797,
    1e300,
    DBL_MAX,
    -DBL_MAX,
]


def _near_multiples(n: int = 40) -> list[float]:
    """The doubles around j pi/2 for j = 1..n and a few large j."""
    out = []
    for j in [*range(1, n + 1), 1000, 12345, 667000]:
        c = j * math.pi / 2
        out += [c, math.nextafter(c, 0.0), math.nextafter(c, math.inf)]
    return out + [-x for x in out]


NEAR_MULTIPLES = _near_multiples()


# --- references --------------------------------------------------------------------------


def _dps(*xs: float) -> int:
    """Digits resolving 2x/pi to 100 digits beyond the integer part for every argument."""
    return 100 + max((max(0, math.frexp(x)[1]) for x in xs), default=0) * 31 // 100 + 10


def _ref_value(name: str, x: float) -> tuple[mpmath.mpf, mpmath.mpf]:
    """An interval [v - m, v + m] containing name(x), clipped to [-1, 1]."""
    with mpmath.workdps(_dps(x)):
        v = (mpmath.sin if name == "sin" else mpmath.cos)(mpmath.mpf(x))
        m = abs(v) * REF + mpmath.mpf(2) ** -1200
        return max(v - m, mpmath.mpf(-1)), min(v + m, mpmath.mpf(1))


def _ref_range(name: str, a: float, b: float) -> tuple[mpmath.mpf, mpmath.mpf]:
    """An interval containing {name(x) : a <= x <= b} (tight up to the reference slack)."""
    la, ha = _ref_value(name, a)
    lb, hb = _ref_value(name, b)
    lo, hi = min(la, lb), max(ha, hb)
    with mpmath.workdps(_dps(a, b)):
        nu_a = 2 * mpmath.mpf(a) / mpmath.pi
        nu_b = 2 * mpmath.mpf(b) / mpmath.pi
        j_lo, j_hi = int(mpmath.ceil(nu_a)), int(mpmath.floor(nu_b))
    shift = 0 if name == "sin" else 1
    residues = {(j + shift) % 4 for j in range(j_lo, min(j_hi, j_lo + 4) + 1)}
    if 1 in residues:
        hi = mpmath.mpf(1)
    if 3 in residues:
        lo = mpmath.mpf(-1)
    return lo, hi


def _inside(ref: tuple[mpmath.mpf, mpmath.mpf], lo: float, hi: float) -> bool:
    return mpmath.mpf(lo) <= ref[0] and ref[1] <= mpmath.mpf(hi)


def misses(name: str, X: Interval, seed: int) -> list[str]:
    """Points and ranges of X whose reference is not inside iv.<name>(X)."""
    Z = getattr(iv, name)(X)
    out = []
    if Z.shape != X.shape or not (np.all(Z.lo <= Z.hi) and np.all(np.isfinite(Z.lo))):
        return [f"{name}: invalid result {Z!r}"]
    rng = np.random.default_rng(seed)
    lo_, hi_ = np.asarray(X.lo), np.asarray(X.hi)
    points = [lo_, hi_, np.clip(lo_ / 2 + hi_ / 2, lo_, hi_)]
    points += [random_inside(lo_, hi_, rng) for _ in range(2)]
    for idx in np.ndindex(X.shape):
        a, b = float(lo_[idx]), float(hi_[idx])
        zl, zh = float(Z.lo[idx]), float(Z.hi[idx])
        if not (-1.0 <= zl and zh <= 1.0):
            out.append(f"{name}[{a!r}, {b!r}] = [{zl!r}, {zh!r}] leaves [-1, 1]")
        if not _inside(_ref_range(name, a, b), zl, zh):
            out.append(f"{name}[{a!r}, {b!r}]: range not inside [{zl!r}, {zh!r}]")
        for p in points:
            x = float(p[idx])
            if not _inside(_ref_value(name, x), zl, zh):
                out.append(f"{name}({x!r}) not inside [{zl!r}, {zh!r}] for [{a!r}, {b!r}]")
    return out


def check(name: str, X: Interval, seed: int = 0) -> None:
    found = misses(name, X, seed)
    assert not found, "\n".join(found[:10])


def _pin(lo: float, hi: float | None = None) -> Interval:
    return Interval(np.array([lo]), np.array([lo if hi is None else hi]))


# --- strategies ----------------------------------------------------------------------------

NAMES = ["sin", "cos"]
near_multiples = st.sampled_from(NEAR_MULTIPLES)
corner_doubles = st.sampled_from(CORNERS)
reduced_range = doubles(-(2.0**20), 2.0**20)
points = st.one_of(doubles(), reduced_range, doubles(-100.0, 100.0), near_multiples, corner_doubles)


@st.composite
def sin_intervals(draw: st.DrawFn) -> tuple[float, float]:
    """Points, narrow and wide intervals (crossing extrema), widths around 2 pi, and
    intervals with an endpoint next to a multiple of pi/2."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        x = draw(points)
        return x, x
    if kind == 1:
        a, b = draw(points), draw(points)
        return min(a, b), max(a, b)
    if kind == 2:
        a = draw(st.one_of(doubles(-1e4, 1e4), near_multiples))
        w = draw(st.one_of(st.floats(0.0, 7.0), st.sampled_from([2 * math.pi, 6.2831, 6.3])))
        return a, min(a + w, DBL_MAX)
    if kind == 3:
        a, b = draw(near_multiples), draw(near_multiples)
        return min(a, b), max(a, b)
    return draw(intervals())


@st.composite
def sin_interval_arrays(draw: st.DrawFn) -> Interval:
    n = draw(st.integers(1, 4))
    pairs = [draw(sin_intervals()) for _ in range(n)]
    return Interval(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))


@pytest.fixture(scope="module", autouse=True)
def _compiled_kernels() -> None:
    X = _pin(0.5, 1.0)
    iv.sin(X)
    iv.cos(X)


# --- containment -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@given(X=sin_interval_arrays(), seed=seeds())
@example(X=_pin(0.0), seed=0)
@example(X=_pin(-0.0), seed=0)
@example(X=_pin(TINY), seed=0)
@example(X=_pin(-TINY, TINY), seed=0)
@example(X=_pin(PI2), seed=0)
@example(X=_pin(math.nextafter(PI2, 2.0)), seed=0)
@example(X=_pin(math.pi), seed=0)
@example(X=_pin(PI2, math.nextafter(PI2, 2.0)), seed=0)
@example(X=_pin(0.0, math.pi), seed=0)
@example(X=_pin(1.0, 2.0), seed=0)  # crosses the maximum of sin
@example(X=_pin(3.0, 3.2), seed=0)  # crosses the minimum of cos
@example(X=_pin(4.0, 5.0), seed=0)  # crosses the minimum of sin
@example(X=_pin(-1.0, 1.0), seed=0)  # crosses the maximum of cos
@example(X=_pin(0.1, 0.1 + 2 * math.pi), seed=0)
@example(X=_pin(0.0, 6.2831), seed=0)
@example(X=_pin(-10.0, 10.0), seed=0)
@example(X=_pin(2.0**20), seed=0)
@example(X=_pin(math.nextafter(2.0**20, 0.0), 2.0**20), seed=0)
@example(X=_pin(2.0**20, math.nextafter(2.0**20, math.inf)), seed=0)
@example(X=_pin(1e300), seed=0)
@example(X=_pin(-DBL_MAX, DBL_MAX), seed=0)
@example(X=_pin(DBL_MAX), seed=0)
@example(X=_pin(667000 * math.pi / 2), seed=0)
def test_contains_mpmath(name: str, X: Interval, seed: int) -> None:
    check(name, X, seed)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("x", CORNERS + NEAR_MULTIPLES[:30] + NEAR_MULTIPLES[-9:])
def test_corner_points(name: str, x: float) -> None:
    one_ulp = min(math.nextafter(x, math.inf), DBL_MAX)
    check(name, Interval(np.array([x, x]), np.array([x, one_ulp])))


@pytest.mark.parametrize("name", NAMES)
def test_many_points_against_mpmath(name: str) -> None:
    """Dense sweep of the reduced range (every quadrant, many k) in one array call."""
    rng = np.random.default_rng(7)
    xs = np.concatenate(
        [rng.uniform(-20, 20, 400), rng.uniform(-(2.0**20), 2.0**20, 400), NEAR_MULTIPLES]
    )
    check(name, Interval(xs))


@pytest.mark.parametrize("name", NAMES)
@given(a=points, b=points)
def test_scalar_iv_kernel_matches_array_kernel(name: str, a: float, b: float) -> None:
    """_sin_iv/_cos_iv (for compiled callers) agree with the array kernels, and the point
    kernels agree with point intervals."""
    a, b = min(a, b), max(a, b)
    scalar = getattr(_kernels, f"_{name}_iv")(a, b)
    lo, hi, status = getattr(_kernels, name)(np.array([a]), np.array([b]))
    assert status == _kernels.OK
    assert scalar == (lo[0], hi[0])
    assert getattr(_kernels, f"_{name}_point")(a) == getattr(_kernels, f"_{name}_iv")(a, a)


# --- properties ------------------------------------------------------------------------------


@given(X=sin_interval_arrays())
def test_functional_equations_overlap(X: Interval) -> None:
    """sin(-X) = -sin(X) exactly (the kernels are odd/even by construction: rint, the split
    and Horner are symmetric), cos(-X) = cos(X), and sin^2 + cos^2 = 1 is not excluded."""
    S, C = iv.sin(X), iv.cos(X)
    Sn, Cn = iv.sin(-X), iv.cos(-X)
    assert np.array_equal(Sn.lo, -S.hi) and np.array_equal(Sn.hi, -S.lo)
    assert np.array_equal(Cn.lo, C.lo) and np.array_equal(Cn.hi, C.hi)
    one = iv.sqr(S) + iv.sqr(C)
    assert np.all(one.lo <= 1.0) and np.all(1.0 <= one.hi)


@pytest.mark.parametrize("name", NAMES)
def test_point_enclosures_are_tight(name: str) -> None:
    """A few ulps wide (relative 2^-44), as the other kernels; [-1, 1] beyond 2^20."""
    xs = np.concatenate([np.linspace(-30.0, 30.0, 601), [1e-300, TINY, 1e5, -123456.7]])
    Z = getattr(iv, name)(Interval(xs))
    scale = np.maximum(np.maximum(np.abs(Z.lo), np.abs(Z.hi)), 2.0**-1022)
    widths = (Z.hi - Z.lo) / scale
    assert widths.max() <= 2.0**-44, xs[np.argmax(widths)]
    assert iv.sin(Interval([2.0**21])).lo[0] == -1.0


def test_extremum_test_is_tight_away_from_extrema() -> None:
    """[1.6, 3] excludes pi/2 by 0.03: the maximum is sin(1.6), not 1."""
    Z = iv.sin(_pin(1.6, 3.0))
    assert Z.hi[0] < 1.0 and Z.lo[0] > 0.0
    Z = iv.cos(_pin(0.01, 3.1))  # no minimum (pi is outside)
    assert Z.lo[0] > -1.0 and Z.hi[0] < 1.0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_input_raises(name: str, bad: float) -> None:
    with pytest.raises(NonFiniteError):
        getattr(iv, name)([0.0, bad])


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_types(name: str) -> None:
    Z = getattr(iv, name)(Interval(np.zeros((2, 3)), np.ones((2, 3))))
    assert Z.shape == (2, 3) and Z.lo.dtype == np.float64
    assert getattr(iv, name)(0.5).shape == ()
    assert name in iv.__all__


def test_nan_in_compiled_callers_gives_the_trivial_enclosure() -> None:
    """Compiled callers pass unvalidated doubles: a NaN must give [-1, 1], not garbage."""
    assert _kernels._sin_point(math.nan) == (-1.0, 1.0)
    assert _kernels._cos_iv(math.nan, 1.0) == (-1.0, 1.0)
    assert _kernels._sin_iv(0.0, math.inf) == (-1.0, 1.0)


# --- the lemma's side conditions -------------------------------------------------------------


def test_tables_and_split_are_what_the_lemma_assumes() -> None:
    K = _kernels
    for i, c in enumerate(K.SIN_COEF):
        assert c == float(Fraction((-1) ** i, math.factorial(2 * i + 1)))
    for i, c in enumerate(K.COS_COEF):
        assert c == float(Fraction((-1) ** i, math.factorial(2 * i)))
    for p in (K.PIO2_1, K.PIO2_2):  # at most 33 significant bits: k * p exact for |k| < 2^20
        m, _ = math.frexp(p)
        assert (Fraction(m) * 2**33).denominator == 1
    assert K.INV_PIO2 == 2 / math.pi
    kmax = round(K.SINCOS_ARG_MAX * K.INV_PIO2)
    assert kmax < 2**20


@pytest.mark.parametrize("x", [0.5, 2.0, 1e3, 2.0**19, 2.0**20 - 0.5])
def test_reduction_precondition_holds(x: float) -> None:
    """#sincos: |r| <= 0.7854 over the argument range, and the first step is exact."""
    for v in np.linspace(x - 1.0, x + 1.0, 2001)[::7]:
        v = float(min(v, 2.0**20))
        k, r, bad = _kernels._sincos_reduce(v)
        assert not bad and abs(r) <= _kernels.SINCOS_REDUCED_MAX and k == float(int(k))
        exact = Fraction(v) - int(k) * Fraction(_kernels.PIO2_1)
        assert Fraction(v - k * _kernels.PIO2_1) == exact


def test_constants_match_the_proof() -> None:
    from test_kernel_lemmas import _load_constants

    kc = _load_constants()
    K = _kernels
    assert kc.ALLOWANCES["sincos"][1] == K.E_SINCOS
    assert float(kc.A_SINCOS) == K.A_SINCOS and float(kc.B_SINCOS) == K.B_SINCOS
    assert float(kc.SINCOS_DELTA) == K.SINCOS_DELTA
    assert float(kc.RHO_S.mid()) == K.SINCOS_REDUCED_MAX
    assert kc.SINCOS_ARG_MAX == K.SINCOS_ARG_MAX
    for name in ("PIO2_1", "PIO2_2", "PIO2_3", "INV_PIO2"):
        assert float(getattr(kc, name)) == getattr(K, name)
    figures = kc.check_all()
    assert figures["sincos"][0] < K.E_SINCOS / 2.0**-53
    # the check can fail: a too small absolute allowance is caught
    old = kc.A_SINCOS
    kc.A_SINCOS = old / 4
    try:
        with pytest.raises(AssertionError):
            kc.check_all()
    finally:
        kc.A_SINCOS = old


# --- mutation tests: the checks must catch broken kernels ------------------------------------


def numpy_sin(lo, hi):
    """np.sin at the endpoints, hull, not widened: unsound twice over."""
    a, b = np.sin(lo), np.sin(hi)
    return np.minimum(a, b), np.maximum(a, b), _kernels.OK


def numpy_cos(lo, hi):
    a, b = np.cos(lo), np.cos(hi)
    return np.minimum(a, b), np.maximum(a, b), _kernels.OK


def _endpoint_hull(point: Callable) -> Callable:
    """Correct point enclosures, but no extremum test: misses interior maxima and minima."""

    def kernel(lo, hi):
        out_lo, out_hi = np.empty(lo.shape), np.empty(lo.shape)
        for i in range(lo.shape[0]):
            la, ha = point(float(lo[i]))
            lb, hb = point(float(hi[i]))
            out_lo[i], out_hi[i] = min(la, lb), max(ha, hb)
        return out_lo, out_hi, _kernels.OK

    return kernel


def _midpoint_of(kernel: Callable) -> Callable:
    """The midpoint of each correct enclosure as a point: an un-widened kernel."""

    def broken(lo, hi):
        a, b, status = kernel(lo, hi)
        m = 0.5 * a + 0.5 * b
        return m, m.copy(), status

    return broken


def _shifted_quadrant(lo, hi):
    """cos in place of sin: a quadrant bookkeeping error."""
    return _kernels.cos(lo, hi)


BROKEN = {
    "numpy": {"sin": numpy_sin, "cos": numpy_cos},
    "no_extrema": {
        "sin": _endpoint_hull(_kernels._sin_point),
        "cos": _endpoint_hull(_kernels._cos_point),
    },
    "unwidened": {"sin": _midpoint_of(_kernels.sin), "cos": _midpoint_of(_kernels.cos)},
    "quadrant": {"sin": _shifted_quadrant, "cos": _kernels.sin},
}


def _property_fails(test: Callable, **strategies: st.SearchStrategy) -> bool:
    run = settings(database=None, phases=[Phase.generate], report_multiple_bugs=False)(
        given(**strategies)(test)
    )
    try:
        run()
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mutation", sorted(BROKEN))
def test_property_fails_with_broken_kernel(
    monkeypatch: pytest.MonkeyPatch, name: str, mutation: str
) -> None:
    def prop(X: Interval, seed: int) -> None:
        check(name, X, seed)

    strategies = {"X": sin_interval_arrays(), "seed": seeds()}
    assert not _property_fails(prop, **strategies)
    monkeypatch.setattr(_kernels, name, BROKEN[mutation][name])
    assert _property_fails(prop, **strategies)


@pytest.mark.parametrize(
    ("mutation", "name", "lo", "hi"),
    [
        ("numpy", "sin", 1.0, 1.0),  # np.sin(1.0) is a double; sin(1) is irrational
        ("numpy", "cos", 0.5, 0.5),
        ("no_extrema", "sin", 1.0, 2.0),  # pi/2 inside: the maximum 1 is missed
        ("no_extrema", "cos", 3.0, 3.2),  # pi inside: the minimum -1 is missed
        ("unwidened", "sin", PI2, PI2),
        ("unwidened", "cos", math.pi, math.pi),
        ("quadrant", "sin", 0.5, 0.5),
    ],
)
def test_broken_kernel_is_caught_at_pinned_input(
    monkeypatch: pytest.MonkeyPatch, mutation: str, name: str, lo: float, hi: float
) -> None:
    X = _pin(lo, hi)
    assert not misses(name, X, 0)
    monkeypatch.setattr(_kernels, name, BROKEN[mutation][name])
    assert misses(name, X, 0)
