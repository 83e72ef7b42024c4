"""The vectorised 53-bit ReLU engine (certified/flow/relu/_vec.py): containment of 50-digit
references (affine pieces region by region via exact matrix exponentials, mpmath findroot for
the crossings), points on / within 1e-15 of hyperplanes, leaky ReLU, boxes, non-dyadic
durations, mutations that break the validation, bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import references as ref
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_relu import coord, fields, scenarios

import certified
from certified.arith import Interval
from certified.errors import InputError, NonFiniteError, ShapeError
from certified.flow.relu import _vec
from certified.flow.relu import _vec_kernels as kern
from certified.flow.relu._vec import relu_flow_vectorised
from certified.flow.result import FlowStatus
from certified.models import Schedule

F = Fraction


def _inside(res, n, point) -> bool:
    """Reference (50 digits) inside enclosure n, compared exactly in rationals."""
    lo, hi = res.final.lo[n], res.final.hi[n]
    for k, v in enumerate(point):
        if isinstance(v, Fraction):
            q = v
        else:  # an mpf: exactly +-man * 2^exp (man_exp drops the sign)
            man, exp = v.man_exp
            q = Fraction(int(man)) * Fraction(2) ** int(exp) * (-1 if v < 0 else 1)
        # 50-digit references: allow 1e-40 relative, far below any float64 width
        slack = Fraction(1, 10**40) * (1 + abs(q))
        if not Fraction(float(lo[k])) - slack <= q <= Fraction(float(hi[k])) + slack:
            return False
    return True


def check(Ws, As, bs, taus, X, alpha=0, **kw):
    res = relu_flow_vectorised(Ws, As, bs, taus, np.array(X, dtype=float), **kw)
    assert res is not None and res.status is FlowStatus.SUCCESS
    for n, x in enumerate(X):
        e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in x], alpha=alpha)
        assert _inside(res, n, e), (n, res.final.lo[n], res.final.hi[n], e)
    return res


def _as_float_lists(Ws, As, bs):
    conv = lambda m: [[float(v) for v in row] for row in m]  # noqa: E731
    return [conv(W) for W in Ws], [conv(A) for A in As], [[float(v) for v in b] for b in bs]


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios())
@example(  # the example of test_relu: crossings during a long piece
    (
        [[[1.0, -1.0], [0.5, 1.0]]],
        [[[1.0, 0.5], [-1.0, 1.0]]],
        [[0.2, -0.1]],
        [F(1)],
        [[F(5, 8), F(13, 16)], [F(1, 5), F(-3, 10)]],
    )
)
def test_property_reference_inside_enclosure(scenario):
    """Random small fields (dyadic, so doubles), points exactly on and within 2^-50 of a
    hyperplane: zero misses."""
    Ws, As, bs, taus, X = scenario
    X = [[float(v) for v in x] for x in X]
    Ws, As, bs = _as_float_lists(Ws, As, bs)
    check(Ws, As, bs, taus, X)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=25)
@given(
    f=fields(d_max=3, p_max=3),
    x=st.lists(coord, min_size=3, max_size=3),
    alpha=st.sampled_from([F(1, 100), F(1, 4), F(1, 3), F(1)]),
)
def test_property_leaky_relu(f, x, alpha):
    """Leaky slopes, including 1/100 and 1/3 (not doubles: carried as intervals)."""
    d, _p, W, A, b = f
    Ws, As, bs = _as_float_lists([W], [A], [b])
    check(
        Ws, As, bs, [F(1, 2)], [[float(v) for v in x[:d]]], alpha=alpha,
        activation="leaky_relu", slope=alpha,
    )  # fmt: skip


def _random_schedule(seed, d, p, pieces, scale=1.0):
    rng = np.random.default_rng(seed)
    Ws = [rng.normal(size=(d, p)) / np.sqrt(p) * scale for _ in range(pieces)]
    As = [rng.normal(size=(p, d)) for _ in range(pieces)]
    bs = [rng.normal(size=p) for _ in range(pieces)]
    return Ws, As, bs, rng


def test_ensemble_against_references_with_many_crossings():
    """d = p = 4, eight pieces: many hyperplane crossings per point; every point checked."""
    Ws, As, bs, rng = _random_schedule(3, 4, 4, 8)
    X = rng.uniform(-1, 1, size=(12, 4)).tolist()
    res = check(Ws, As, bs, ["1/8"] * 8, X)
    assert res.hints["window_steps"] > 0  # crossings happened and were windowed
    assert res.max_width() < 1e-9


def test_non_dyadic_durations_and_tail():
    """Durations 1/3 and 2/7 are not doubles: the last sliver of each piece is a window."""
    Ws, As, bs, rng = _random_schedule(5, 3, 3, 2)
    X = rng.uniform(-1, 1, size=(5, 3)).tolist()
    check(Ws, As, bs, [F(1, 3), F(2, 7)], X)


def test_boxes_contain_sampled_images():
    Ws, As, bs, rng = _random_schedule(9, 3, 4, 3)
    lo = rng.uniform(-1, 1, size=(4, 3))
    hi = lo + 1e-6
    res = relu_flow_vectorised(Ws, As, bs, ["1/4"] * 3, Interval(lo, hi))
    for n in range(4):
        corners = [lo[n], hi[n], np.where([1, 0, 1], lo[n], hi[n])]
        for x in corners + [rng.uniform(lo[n], hi[n]) for _ in range(2)]:
            e = ref.piecewise_expm(Ws, As, bs, ["1/4"] * 3, [Fraction(v) for v in x])
            assert _inside(res, n, e)


def test_rational_parameters_are_declined_and_auto_falls_back():
    W, A, b = [[F(1, 3), F(1)], [F(-1), F(1, 2)]], [[F(1), F(2)], [F(1, 2), F(-1)]], [F(1, 5), 0]
    assert relu_flow_vectorised([W], [A], [b], ["1/2"], np.zeros((1, 2))) is None
    sched = Schedule.from_json(
        {
            "dimension": 2,
            "activation": "relu",
            "pieces": [
                {
                    "duration": "1/2",
                    "W": [["1/3", 1], [-1, "1/2"]],
                    "A": [[1, 2], ["1/2", -1]],
                    "b": ["1/5", 0],
                }
            ],
        }
    )
    X = np.random.default_rng(0).uniform(-1, 1, size=(1000, 2))
    res = certified.enclose_flow(sched, X)  # auto: falls back to the region engine
    assert res.hints["method"] == "relu-regions"
    with pytest.raises(InputError, match="doubles"):
        certified.enclose_flow(sched, X[:3], method="vectorised")


def test_auto_picks_the_vectorised_engine_for_many_points():
    Ws, As, bs, rng = _random_schedule(1, 3, 3, 2)
    sched = Schedule.from_json(
        {
            "dimension": 3,
            "activation": "relu",
            "pieces": [
                {"duration": "1/4", "W": W.tolist(), "A": A.tolist(), "b": b.tolist()}
                for W, A, b in zip(Ws, As, bs, strict=True)
            ],
        }
    )
    X = rng.uniform(-1, 1, size=(1000, 3))
    fast = certified.enclose_flow(sched, X)
    assert fast.hints["method"] == "relu-vectorised"
    slow = certified.enclose_flow(sched, X[:5], method="regions")
    # both certified: the enclosures of the same points intersect
    assert np.all(fast.final.lo[:5] <= slow.final.hi) and np.all(slow.final.lo <= fast.final.hi[:5])
    with pytest.raises(InputError, match="53 bits"):
        certified.enclose_flow(sched, X, method="vectorised", prec=128)


# --- mutations: a broken validation must be caught by the containment checks ----------------

_MUT = (
    [[[1.0, -1.0], [0.5, 1.0]]],
    [[[1.0, 0.5], [-1.0, 1.0]]],
    [[0.2, -0.1]],
    ["1"],
    [[0.625, 0.8125]],
)


def _misses(Ws, As, bs, taus, X) -> bool:
    res = relu_flow_vectorised(Ws, As, bs, taus, np.array(X))
    e = ref.piecewise_expm(Ws, As, bs, taus, [Fraction(v) for v in X[0]])
    return not _inside(res, 0, e)


def test_mutation_region_test_always_passing_is_caught(monkeypatch):
    assert not _misses(*_MUT)

    def always(zm, zr, want, check_, margin, th, ok, ok0):
        ok[:] = True
        ok0[:] = True

    monkeypatch.setattr(kern, "region_test", always)
    assert _misses(*_MUT)


def test_mutation_window_without_lipschitz_term_is_caught(monkeypatch):
    """Windows forced to be long (every step is a window) and missing their error term."""
    original = _vec._window_step

    def no_error(vp, c, r, w_lo, w_hi):
        cn, _ = original(vp, c, r, w_lo, w_hi)
        return cn, np.zeros_like(r)

    monkeypatch.setattr(_vec, "_window_step", no_error)
    monkeypatch.setattr(_vec, "_MAX_ITER", 0)  # every step a window
    assert _misses(*_MUT)


# --- bad input --------------------------------------------------------------------------------


def test_bad_input():
    W, A, b = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]
    with pytest.raises(NonFiniteError):
        relu_flow_vectorised([W], [A], [b], ["1"], np.array([[np.nan, 0.0]]))
    with pytest.raises(ShapeError):
        relu_flow_vectorised([W], [A], [b], ["1"], np.zeros((2, 3)))
    with pytest.raises(ShapeError):
        relu_flow_vectorised([W], [A], [b], ["1"], np.zeros((0, 2)))
    with pytest.raises(InputError):
        relu_flow_vectorised([W], [A], [b], ["-1"], np.zeros((1, 2)))
    with pytest.raises(InputError):
        relu_flow_vectorised([], [], [], [], np.zeros((1, 2)))


# --- the verified lambda_max bound (proofs/bounds.md#relu-vec-lognorm) --------------------------


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.integers(1, 16),
    scale=st.sampled_from([1e-6, 1.0, 1e3]),
    rank1=st.booleans(),
)
def test_lmax_bound_is_above_the_true_top_eigenvalue(seed, d, scale, rank1):
    """Against mpmath's symmetric eigensolver at 40 digits on the exact float matrix."""
    import mpmath

    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d)) * scale
    S = B[:, :1] @ B[:, :1].T if rank1 else 0.5 * (B + B.T)  # rank one: eigenvalues 0 and |b|^2
    out = np.empty(1)
    kern.lmax_verified(np.ascontiguousarray(S.reshape(1, -1)), np.zeros(d), d, out)
    g = np.empty(1)
    kern.gershgorin_mu(np.ascontiguousarray(S.reshape(1, -1)), np.zeros(d), d, g)
    with mpmath.workdps(40):
        ev = mpmath.eigsy(mpmath.matrix(S.tolist()), eigvals_only=True)
        top = max(ev)
        assert mpmath.mpf(float(out[0])) >= top  # inf (Cholesky failed) also passes
        assert mpmath.mpf(float(g[0])) >= top
    assert np.isfinite(out[0])
