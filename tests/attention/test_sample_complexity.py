"""Token-sample complexity: containment against 50-digit mpmath references, verdicts, bad input."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith.ball import endpoints
from certified.attention import Attention, Head
from certified.attention.populations import (
    GaussianPopulation,
    UniformBox,
    langevin,
    langevin_derivative_range,
    langevin_range,
)
from certified.attention.sample_complexity import (
    check_rate_claim,
    error_at,
    rate_threshold,
    sup_error_bounds,
)
from certified.errors import InputError, ShapeError
from certified.verdict import Outcome

DPS = 50


def _mp(q) -> mpmath.mpf:
    q = flint.fmpq(*q.as_integer_ratio()) if isinstance(q, float) else flint.fmpq(q)
    return mpmath.mpf(int(q.p)) / int(q.q)


def _ref_langevin(t):
    if t == 0:
        return mpmath.mpf(0)
    # coth t − 1/t cancels about 2 log10(1/|t|) digits: add them
    with mpmath.extradps(2 * max(0, int(-mpmath.log10(abs(t)))) + 20):
        r = mpmath.coth(t) - 1 / t
    return +r


def ref_error(layer: Attention, pop, Y, x) -> mpmath.mpf:
    """|Γ[μ_n](x) − Γ[μ](x)|_2 at DPS digits, from the formulas of theorems.md §9."""
    with mpmath.workdps(DPS + 10):
        d = layer.d
        xs = [_mp(v) for v in x]
        Ys = [[_mp(v) for v in row] for row in np.asarray(Y, dtype=object)]
        total = [mpmath.mpf(0)] * d
        for head in layer.heads:
            A = [[_mp(v) for v in row] for row in head.bilinear_unscaled()]
            scale = 1 / mpmath.sqrt(head.k) if layer.scaled else mpmath.mpf(1)
            G = [[_mp(v) for v in row] for row in head.value_output()]
            a = [scale * sum(A[k][j] * xs[k] for k in range(d)) for j in range(d)]
            s = [sum(y[j] * a[j] for j in range(d)) for y in Ys]
            top = max(s)
            w = [mpmath.exp(v - top) for v in s]
            Z = sum(w)
            emp = [sum(wi * y[j] for wi, y in zip(w, Ys, strict=True)) / Z for j in range(d)]
            if isinstance(pop, GaussianPopulation):
                E = [
                    _mp(pop.mean[i]) + sum(_mp(pop.cov[i, j]) * a[j] for j in range(d))
                    for i in range(d)
                ]
            else:
                c = [(_mp(lo) + _mp(hi)) / 2 for lo, hi in zip(pop.lower, pop.upper, strict=True)]
                h = [(_mp(hi) - _mp(lo)) / 2 for lo, hi in zip(pop.lower, pop.upper, strict=True)]
                E = [c[j] + h[j] * _ref_langevin(h[j] * a[j]) for j in range(d)]
            diff = [emp[j] - E[j] for j in range(d)]
            for i in range(d):
                total[i] += sum(G[i][j] * diff[j] for j in range(d))
        return mpmath.sqrt(sum(v * v for v in total))


def _in_ball(rng, d, R, m):
    v = rng.standard_normal((m, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    r = R * rng.random((m, 1)) ** (1 / d) * (1 - 2**-30)
    pts = v * r
    return np.vstack([pts, v * R * (1 - 2**-30)])  # also points next to the sphere


def _layer(d, scale=0.5, scaled=False, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.round(rng.standard_normal((d, d)) * scale * 8) / 8
    V = np.round(rng.standard_normal((d, d)) * 8) / 8
    return Attention.single(Q, np.eye(d), V, scaled=scaled)


def _frac(q) -> mpmath.mpf:
    return _mp(q)


def _check_contains(layer, pop, Y, R, b, rng, m=12):
    with mpmath.workdps(DPS):
        assert _frac(b.lower) <= ref_error(layer, pop, Y, b.witness)  # the witness is real
        assert sum(_mp(v) ** 2 for v in b.witness) <= _mp(b.R) ** 2
        for x in _in_ball(rng, layer.d, float(R), m):
            assert ref_error(layer, pop, Y, x) <= _frac(
                b.upper
            )  # the upper bound is an upper bound


@pytest.mark.parametrize(
    ("d", "pop"),
    [
        (1, GaussianPopulation([0.5], [[2]])),
        (2, GaussianPopulation([0, 1], [[1, "1/2"], ["1/2", 1]])),
        (2, UniformBox.cube(2)),
        (2, UniformBox([-1, 0], ["1/3", 2])),
        (3, UniformBox.cube(3)),
    ],
)
def test_bounds_contain_50_digit_references(d, pop):
    rng = np.random.default_rng(d)
    layer = _layer(d, seed=d)
    Y = pop.sample(40, rng)
    R = 1.5
    b = sup_error_bounds(layer, pop, Y, R, rel_tol=0.1, max_boxes=600)
    assert 0 < b.lower <= b.upper
    _check_contains(layer, pop, Y, R, b, rng)
    if b.resolved:
        assert b.upper <= b.lower * flint.fmpq(11, 10) * (1 + flint.fmpq(1, 2**20))


def test_multi_head_scaled_and_residual():
    rng = np.random.default_rng(5)
    h1 = Head([[1, 0.5], [0, 1]], [[1, 0], [0.25, 1]], [[1, 0], [0, -1]])
    h2 = Head([[0.5, 0]], [[0, 1]], [[0.5, 0.5], [0, 1]])
    layer = Attention((h1, h2), residual=True, scaled=True)
    pop = GaussianPopulation([0, 0], [[1, 0], [0, "1/4"]])
    Y = pop.sample(30, rng)
    b = sup_error_bounds(layer, pop, Y, 2, rel_tol=0.2, max_boxes=800)
    _check_contains(layer, pop, Y, 2, b, rng)


def test_sup_is_tight_in_one_dimension():
    # d = 1: a dense 50-digit scan of [−R, R] must land in [lower, upper]
    pop = GaussianPopulation([0], [[1]])
    layer = Attention.single([[1]], [[1]], [[1]], scaled=False)
    Y = pop.sample(25, np.random.default_rng(3))
    b = sup_error_bounds(layer, pop, Y, 2, rel_tol=0.01, max_boxes=4000)
    assert b.resolved
    with mpmath.workdps(20):
        scan = max(ref_error(layer, pop, Y, [x]) for x in np.linspace(-2, 2, 401))
    assert _frac(b.lower) * (1 - mpmath.mpf(2) ** -40) <= scan * (1 + mpmath.mpf("0.011"))
    assert scan <= _frac(b.upper)


@settings(max_examples=12)
@given(
    d=st.integers(1, 2),
    n=st.integers(1, 12),
    R=st.sampled_from([0.25, 1.0, 3.0]),
    seed=st.integers(0, 2**16),
    uniform=st.booleans(),
)
@example(d=1, n=1, R=3.0, seed=0, uniform=True)
def test_property_containment(d, n, R, seed, uniform):
    rng = np.random.default_rng(seed)
    pop = UniformBox.cube(d) if uniform else GaussianPopulation([0] * d, np.eye(d).tolist())
    layer = _layer(d, seed=seed)
    Y = pop.sample(n, rng)
    b = sup_error_bounds(layer, pop, Y, R, rel_tol=0.5, max_boxes=200)
    _check_contains(layer, pop, Y, R, b, rng, m=4)


def test_error_at_contains_reference():
    pop = UniformBox(["-1/2", -2], [1, 3])
    layer = _layer(2, scale=1.0, seed=9)
    Y = pop.sample(30, np.random.default_rng(9))
    for x in ([0, 0], [1e-12, -1e-13], ["1/3", "-2/7"], [2.5, -1.25]):
        _, norm = error_at(layer, pop, Y, x)
        with mpmath.workdps(DPS):
            ref = ref_error(layer, pop, Y, [flint.fmpq(v) if isinstance(v, str) else v for v in x])
            lo, hi = endpoints(norm)
            assert _frac(lo) <= ref <= _frac(hi)
            assert hi - lo < flint.fmpq(1, 10**30)


@pytest.mark.parametrize("t", ["0", "1e-300", "-3e-20", "1/1000", "1/2", "-7", "40", "1e6"])
def test_langevin_contains_reference(t):
    q = flint.fmpq(t) if "/" in t else flint.fmpq(*float(t).as_integer_ratio())
    lo, hi = endpoints(langevin(q, 128))
    with mpmath.workdps(400):
        ref = _ref_langevin(_mp(q))
        assert _frac(lo) <= ref <= _frac(hi)
        if q != 0:
            assert _frac(hi - lo) <= abs(_frac(lo)) * mpmath.mpf(2) ** -100


def test_langevin_ranges_are_monotone_enclosures():
    with mpmath.workdps(60):
        for mid, rad in ((0.0, 0.5), (0.3, 0.1), (-2.0, 1.5), (5.0, 0.25)):
            t = flint.arb(mid, rad)
            Lr, Dr = langevin_range(t, 128), langevin_derivative_range(t, 128)
            for s in np.linspace(mid - rad, mid + rad, 21):
                sm = _mp(s)
                deriv = mpmath.mpf(1) / 3 if s == 0 else 1 / sm**2 - 1 / mpmath.sinh(sm) ** 2
                assert _frac(endpoints(Lr)[0]) <= _ref_langevin(sm) <= _frac(endpoints(Lr)[1])
                assert _frac(endpoints(Dr)[0]) <= deriv <= _frac(endpoints(Dr)[1])


def test_claim_verdicts_and_counterexample():
    pop = GaussianPopulation([0, 0], [[1, 0], [0, 1]])
    layer = _layer(2, seed=4)
    Y = pop.sample(100, np.random.default_rng(4))
    b = sup_error_bounds(layer, pop, Y, 1, rel_tol=0.05, max_boxes=2000)
    big = b.upper * 10 * 2  # C/√n = 2 upper
    v = check_rate_claim(layer, pop, Y, 1, big)
    assert v.verdict is Outcome.VERIFIED and v.bounds.upper <= v.threshold_lower
    small = b.lower * 10 / 2  # C/√n = lower / 2
    v = check_rate_claim(layer, pop, Y, 1, small)
    assert v.verdict is Outcome.REFUTED
    with mpmath.workdps(DPS):
        assert ref_error(layer, pop, Y, v.counterexample) > _frac(small) / 10
    v = check_rate_claim(layer, pop, Y, 1, (b.lower + b.upper) * 5, max_boxes=1)
    assert v.verdict is Outcome.UNDECIDED and "max_boxes" in v.message


def test_log_rate_threshold():
    lo, hi = rate_threshold(3, 100, "log", 128)
    with mpmath.workdps(40):
        assert _frac(lo) <= 3 / mpmath.log(100) <= _frac(hi)
    lo, hi = rate_threshold("1/2", 10**4, "sqrt", 128)
    assert lo <= flint.fmpq(1, 200) <= hi


def test_budget_exhausted_bounds_still_hold():
    pop = UniformBox.cube(2)
    layer = _layer(2, scale=1.5, seed=2)
    Y = pop.sample(50, np.random.default_rng(2))
    b = sup_error_bounds(layer, pop, Y, 3, rel_tol=0.001, max_boxes=5)
    assert not b.resolved and b.boxes <= 5 + 2 * 256
    _check_contains(layer, pop, Y, 3, b, np.random.default_rng(0), m=6)


def test_mutated_closed_form_is_caught(monkeypatch):
    # a wrong population map (L replaced by tanh) must show up as a reference outside
    import certified.attention.populations as populations

    pop = UniformBox.cube(1)
    layer = Attention.single([[2]], [[1]], [[1]], scaled=False)
    Y = pop.sample(20, np.random.default_rng(1))
    monkeypatch.setattr(populations, "langevin", lambda q, prec: flint.arb(q).tanh())
    _, norm = error_at(layer, pop, Y, [1])
    with mpmath.workdps(DPS):
        ref = ref_error(layer, pop, Y, [1])
        lo, hi = endpoints(norm)
        assert not (_frac(lo) <= ref <= _frac(hi))


# --- bad input ------------------------------------------------------------------------------------

LAYER1 = Attention.single([[1]], [[1]], [[1]])
POP1 = GaussianPopulation([0], [[1]])


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"R": 0}, InputError, "R: 0 is not > 0"),
        ({"R": -1}, InputError, "R: -1 is not > 0"),
        ({"R": float("nan")}, InputError, "R"),
        ({"samples": np.zeros((0, 1))}, ShapeError, "samples"),
        ({"samples": [[0.0, 1.0]]}, ShapeError, "coordinates"),
        ({"samples": [[float("inf")]]}, InputError, "samples"),
        ({"max_boxes": 0}, InputError, "max_boxes"),
        ({"rel_tol": 0}, InputError, "rel_tol"),
        ({"layer": Attention.single([[1]], [[1]], [[1]], causal=True)}, InputError, "causal"),
        ({"population": UniformBox.cube(2)}, ShapeError, "population d = 2"),
        ({"population": "N(0,1)"}, InputError, "population"),
    ],
)
def test_bad_input_sup(kwargs, error, text):
    args = {"layer": LAYER1, "population": POP1, "samples": [[0.5], [-1.0]], "R": 1}
    args.update(kwargs)
    layer, pop, Y, R = args.pop("layer"), args.pop("population"), args.pop("samples"), args.pop("R")
    with pytest.raises(error, match=text):
        sup_error_bounds(layer, pop, Y, R, **args)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: GaussianPopulation([0, 0], [[1, 2], [2, 1]]), "not positive semidefinite"),
        (lambda: GaussianPopulation([0, 0], [[1, 0], [1, 1]]), "not symmetric"),
        (lambda: GaussianPopulation([0, 0], [[1]]), "cov: has shape"),
        (lambda: UniformBox([0, 1], [1, 1]), r"upper\[1\]"),
        (lambda: UniformBox([0], [1, 2]), "upper: has 2 entries"),
        (lambda: UniformBox.cube(0), "d: 0"),
    ],
)
def test_bad_populations(make, text):
    with pytest.raises((InputError, ShapeError), match=text):
        make()


@pytest.mark.parametrize(
    ("C", "rate", "samples", "text"),
    [
        (0, "sqrt", [[0.5]], "C: 0 is not > 0"),
        (-1, "sqrt", [[0.5]], "C: -1 is not > 0"),
        (1, "cubic", [[0.5]], "rate"),
        (1, "log", [[0.5]], "n >= 2"),
    ],
)
def test_bad_claims(C, rate, samples, text):
    with pytest.raises(InputError, match=text):
        check_rate_claim(LAYER1, POP1, samples, 1, C, rate=rate)


def test_rate_sweep_rows_and_fit():
    from certified.attention.sample_complexity import rate_sweep

    pop = GaussianPopulation([0, 0], [[1, 0], [0, 1]])
    layer = _layer(2, seed=1)
    out = rate_sweep(layer, pop, [5, 20], [0.5, 2], rel_tol=0.2, max_boxes=400)
    assert [(r["n"], r["R"]) for r in out["rows"]] == [(5, 0.5), (20, 0.5), (5, 2.0), (20, 2.0)]
    Y = pop.sample(20, np.random.default_rng(0))  # the sweep's draw (seed 0), nested prefixes
    for r in out["rows"]:
        assert r["lower"] <= r["upper"]
        with mpmath.workdps(30):
            x = np.array([r["R"] * (1 - 2**-20), 0.0])
            assert float(ref_error(layer, pop, Y[: r["n"]], x)) <= r["upper"] * (1 + 2**-40)
    C = out["C"]
    slope = (np.log(C[2.0]) - np.log(C[0.5])) / 1.5
    assert abs(out["slope"] - slope) < 1e-9


def test_claim_mode_refines_past_the_tolerance():
    # a threshold inside a 20 % gap: claim mode keeps refining until it is decided
    pop = GaussianPopulation([0], [[1]])
    layer = Attention.single([[1]], [[1]], [[1]], scaled=False)
    Y = pop.sample(30, np.random.default_rng(11))
    b = sup_error_bounds(layer, pop, Y, 2, rel_tol=0.2, max_boxes=2000)
    t = (b.lower + b.upper) / 2
    C = t * flint.fmpq(int(mpmath.log(30) * 10**12), 10**12)
    v = check_rate_claim(layer, pop, Y, 2, C, rate="log", max_boxes=20000)
    assert v.verdict.decided
    with mpmath.workdps(DPS):
        thr = _frac(C) / mpmath.log(30)
        if v.verdict is Outcome.REFUTED:
            assert ref_error(layer, pop, Y, v.counterexample) > thr
        else:
            for x in np.linspace(-2, 2, 81):
                assert ref_error(layer, pop, Y, [x]) <= thr


_CI = __import__("os").environ.get("CI", "").lower() == "true"


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 300] if _CI else [10, 100, 1000, 10_000])
@pytest.mark.parametrize("R", [0.5, 4] if _CI else [0.5, 1, 2, 4])
def test_acceptance_grid(n, R):
    # the instances: n = 10 .. 10^4, R = 0.5 .. 4 (d = 2, Gaussian tokens)
    layer = Attention.single([[0.5, 0.25], [0, 0.5]], np.eye(2), [[1, 0], [0.5, 1]], scaled=False)
    pop = GaussianPopulation([0, 0], [[1, 0], [0, 1]])
    Y = pop.sample(n, np.random.default_rng(0))
    b = sup_error_bounds(layer, pop, Y, R, rel_tol=0.05, max_boxes=20000)
    assert b.resolved and b.upper <= b.lower * flint.fmpq(21, 20) * (1 + flint.fmpq(1, 2**20))
    _check_contains(layer, pop, Y, R, b, np.random.default_rng(n), m=5)
