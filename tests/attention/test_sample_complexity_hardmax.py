"""Hardmax family: bounds contain 50-digit references; verdicts; bad input."""

from __future__ import annotations

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.attention import Attention, Head
from certified.attention.hardmax_complexity import hardmax_sup_bounds
from certified.attention.populations import GaussianPopulation, UniformBox
from certified.attention.sample_complexity import check_rate_claim
from certified.errors import InputError
from certified.verdict import Outcome

DPS = 50


def _mp(q):
    q = flint.fmpq(*q.as_integer_ratio()) if isinstance(q, float) else flint.fmpq(q)
    return mpmath.mpf(int(q.p)) / int(q.q)


def ref_hardmax_error(layer, pop, Y, x):
    """min over maximisers i of |G y_i/√(2 log n) − GΣa/√(aᵀΣa)|_2 at DPS digits."""
    with mpmath.workdps(DPS + 10):
        head = layer.heads[0]
        d = layer.d
        A = [[_mp(v) for v in row] for row in head.bilinear_unscaled()]
        G = [[_mp(v) for v in row] for row in head.value_output()]
        S = [[_mp(v) for v in row] for row in pop.cov]
        xs = [_mp(v) for v in x]
        a = [sum(A[k][j] * xs[k] for k in range(d)) for j in range(d)]
        Ys = [[_mp(v) for v in row] for row in np.asarray(Y, dtype=object)]
        s = [sum(y[j] * a[j] for j in range(d)) for y in Ys]
        top = max(s)
        Sa = [sum(S[i][j] * a[j] for j in range(d)) for i in range(d)]
        q = mpmath.sqrt(sum(a[i] * Sa[i] for i in range(d)))
        sn = mpmath.sqrt(2 * mpmath.log(len(Ys)))
        out = []
        for y, si in zip(Ys, s, strict=True):
            if si == top:
                v = [y[j] / sn - Sa[j] / q for j in range(d)]
                Gv = [sum(G[i][j] * v[j] for j in range(d)) for i in range(d)]
                out.append(mpmath.sqrt(sum(t * t for t in Gv)))
        return min(out)


def _points(rng, d, R, m):
    v = rng.standard_normal((m, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v * R * (0.05 + 0.95 * rng.random((m, 1)))


def _check(layer, pop, Y, R, b, rng, m=10):
    with mpmath.workdps(DPS):
        w = b.witness
        assert any(v != 0 for v in w) and sum(_mp(v) ** 2 for v in w) <= _mp(b.R) ** 2
        assert _mp(b.lower) <= ref_hardmax_error(layer, pop, Y, w)
        for x in _points(rng, layer.d, float(R), m):
            assert ref_hardmax_error(layer, pop, Y, x) <= _mp(b.upper)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_hardmax_bounds_contain_references(d):
    rng = np.random.default_rng(d)
    Q = np.round(rng.standard_normal((d, d)) * 8) / 8 + np.eye(d)
    layer = Attention.single(Q, np.eye(d), np.eye(d), scaled=False)
    S = (np.eye(d) + 0.25 * np.ones((d, d))).tolist()
    pop = GaussianPopulation([0.5] * d, S)
    Y = pop.sample(60, rng)
    b = hardmax_sup_bounds(layer, pop, Y, 2, rel_tol=0.1, max_boxes=1500)
    assert b.upper is not None and 0 < b.lower <= b.upper
    _check(layer, pop, Y, 2, b, rng)


@settings(max_examples=10)
@given(n=st.integers(2, 15), seed=st.integers(0, 2**16), R=st.sampled_from([0.5, 4.0]))
@example(n=2, seed=0, R=0.5)
def test_property_hardmax_containment(n, seed, R):
    rng = np.random.default_rng(seed)
    layer = Attention.single([[1, 0.5], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0.5, 1]], scaled=False)
    pop = GaussianPopulation([0, 0], [[1, 0], [0, 2]])
    Y = pop.sample(n, rng)
    Y[-1] = Y[0]  # a duplicated token: ties between maximisers everywhere it wins
    b = hardmax_sup_bounds(layer, pop, Y, R, rel_tol=0.5, max_boxes=300)
    if b.upper is not None:
        _check(layer, pop, Y, R, b, rng, m=4)


def test_hardmax_claims():
    layer = Attention.single([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], scaled=False)
    pop = GaussianPopulation([0, 0], [[1, 0], [0, 1]])
    Y = pop.sample(200, np.random.default_rng(7))
    b = hardmax_sup_bounds(layer, pop, Y, 1, rel_tol=0.05, max_boxes=3000)
    logn = mpmath.log(200)
    big = flint.fmpq(int(2 * float(b.upper) * float(logn) * 1000) + 1, 1000)
    v = check_rate_claim(layer, pop, Y, 1, big, rate="log", family="hardmax")
    assert v.verdict is Outcome.VERIFIED
    small = flint.fmpq(int(float(b.lower) * float(logn) * 500), 1000)
    v = check_rate_claim(layer, pop, Y, 3, small, rate="log", family="hardmax")
    assert v.verdict is Outcome.REFUTED
    with mpmath.workdps(DPS):
        assert ref_hardmax_error(layer, pop, Y, v.counterexample) > _mp(small) / logn


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"population": UniformBox.cube(1)}, "needs a GaussianPopulation"),
        ({"population": GaussianPopulation([0], [[0]])}, "positive definite"),
        ({"samples": [[0.5]]}, "n >= 2"),
        ({"R": 0}, "R: 0 is not > 0"),
        (
            {"layer": Attention((Head([[1]], [[1]], [[1]]), Head([[1]], [[1]], [[2]])))},
            "one head",
        ),
    ],
)
def test_hardmax_bad_input(kwargs, text):
    args = {
        "layer": Attention.single([[1]], [[1]], [[1]]),
        "population": GaussianPopulation([0], [[1]]),
        "samples": [[0.5], [-1.0], [2.0]],
        "R": 1,
    }
    args.update(kwargs)
    with pytest.raises(InputError, match=text):
        hardmax_sup_bounds(args["layer"], args["population"], args["samples"], args["R"])


def test_bad_family():
    layer = Attention.single([[1]], [[1]], [[1]])
    with pytest.raises(InputError, match="family"):
        check_rate_claim(layer, GaussianPopulation([0], [[1]]), [[0.0], [1.0]], 1, 1, family="x")
