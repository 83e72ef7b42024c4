"""Soundness, exactness, property and bad-input tests of certified.flow.relu.

References (tests/flow/references.py) are computed with mpmath at 50 digits, independently
of the arb engine: the one-neuron closed form, ``mpmath.expm`` region by region with
``mpmath.findroot`` for the crossing times, and ``mpmath.odefun``.
"""

from __future__ import annotations

import json
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest
import references as ref
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from certified.arith import Interval
from certified.errors import (
    CertifiedError,
    InputError,
    NonFiniteError,
    PrecisionError,
    ShapeError,
)
from certified.flow import (
    FlowEnclosure,
    FlowStatus,
    NotLaminarError,
    gronwall_lipschitz,
    laminar_flow_exact,
    relu_flow,
    relu_flow_float64,
    relu_flow_jacobian,
)
from certified.flow.relu import _points, _region

F = Fraction


# --- helpers --------------------------------------------------------------------------------


def _mp(x) -> mpmath.mpf:
    return ref._mp(x)


def contains(result: FlowEnclosure, n: int, point, tol: float = 1e-40) -> bool:
    """Whether the reference point lies in enclosure n; ``tol`` (relative) is the accuracy of
    the 50-digit references, far below any float64 enclosure width (exact results are
    compared exactly elsewhere)."""
    lo, hi = result.final.lo[n], result.final.hi[n]
    with mpmath.workdps(60):
        slack = [mpmath.mpf(tol) * (1 + abs(_mp(v))) for v in point]
        return all(
            mpmath.mpf(float(lo[k])) - slack[k]
            <= _mp(point[k])
            <= mpmath.mpf(float(hi[k])) + slack[k]
            for k in range(len(point))
        )


def frac(q: flint.fmpq) -> Fraction:
    return Fraction(int(q.p), int(q.q))


def exact_laminar(W, A, b, tau, x, alpha=Fraction(0)):
    """x + tau sum_i w_i sigma(a_i.x + b_i) in Fractions."""
    d, p = len(W), len(W[0])
    out = list(x)
    for i in range(p):
        z = sum(A[i][k] * x[k] for k in range(d)) + b[i]
        s = z if z > 0 else alpha * z
        for r in range(d):
            out[r] += tau * W[r][i] * s
    return out


def check_against_reference(Ws, As, bs, taus, X, alpha=0, **kw) -> FlowEnclosure:
    """Certified flow vs the 50-digit piecewise reference: every certified point contains it."""
    r = relu_flow(Ws, As, bs, taus, X, **kw)
    assert r.enclosures.shape == (1, len(X), len(X[0]))
    for n in range(len(X)):
        if str(n) in r.hints["rejected"]:
            assert r.status is FlowStatus.STEP_REJECTED and r.message
            continue
        expected = ref.piecewise_expm(Ws, As, bs, taus, list(X[n]), alpha=alpha)
        assert contains(r, n, expected), (n, r.final.lo[n], r.final.hi[n], expected)
    return r


# --- strategies -----------------------------------------------------------------------------

small = st.integers(-8, 8).map(lambda k: F(k, 4))
coord = st.integers(-16, 16).map(lambda k: F(k, 8))
durations_st = st.integers(1, 4).map(lambda k: F(k, 8))


@st.composite
def fields(draw, d_max: int = 3, p_max: int = 3):
    d = draw(st.integers(1, d_max))
    p = draw(st.integers(1, p_max))
    W = [[draw(small) for _ in range(p)] for _ in range(d)]
    A = [[draw(small) for _ in range(d)] for _ in range(p)]
    b = [draw(small) for _ in range(p)]
    return d, p, W, A, b


@st.composite
def scenarios(draw):
    """A one- or two-piece schedule and points, some exactly on a hyperplane of the first
    piece, some within 2^-50 (< 1e-15) of one."""
    pieces = draw(st.integers(1, 2))
    d, p, W, A, b = draw(fields())
    Ws, As, bs = [W], [A], [b]
    for _ in range(pieces - 1):
        _, _, W2, A2, b2 = draw(fields(d_max=d, p_max=3).filter(lambda f: f[0] == d))
        Ws.append(W2)
        As.append(A2)
        bs.append(b2)
    taus = [draw(durations_st) for _ in range(pieces)]
    x = [draw(coord) for _ in range(d)]
    X = [x]
    mode = draw(st.sampled_from(["free", "on", "near"]))
    i = draw(st.integers(0, p - 1))
    if mode != "free" and any(A[i]):
        # put x exactly on hyperplane i of the first piece (b_i is adjusted: still dyadic)
        bs[0] = list(b)
        bs[0][i] = -sum(A[i][k] * x[k] for k in range(d))
        if mode == "near":
            k = next(k for k in range(d) if A[i][k])
            sign = draw(st.sampled_from([-1, 1]))
            y = list(x)
            y[k] += sign * F(1, 2**50)
            X.append(y)
    X.append([draw(coord) for _ in range(d)])
    return Ws, As, bs, taus, X


# --- closed forms ---------------------------------------------------------------------------


@given(
    w=st.lists(small, min_size=2, max_size=2),
    a=st.lists(small, min_size=2, max_size=2),
    b=small,
    x0=st.lists(coord, min_size=2, max_size=2),
    tau=durations_st,
)
@example(w=[F(1), F(0)], a=[F(1), F(0)], b=F(0), x0=[F(0), F(1)], tau=F(1, 2))  # z0 = 0
@example(w=[F(0), F(1)], a=[F(1), F(0)], b=F(1), x0=[F(1), F(0)], tau=F(1, 2))  # k = 0
@example(w=[F(-2), F(0)], a=[F(1), F(0)], b=F(1), x0=[F(1), F(0)], tau=F(1, 2))  # k < 0
def test_one_neuron_closed_form(w, a, b, x0, tau):
    r = relu_flow([[[w[0]], [w[1]]]], [[a]], [[b]], [tau], [x0])
    expected = ref.one_neuron(w, a, b, x0, tau)
    assert r.status is FlowStatus.SUCCESS, r.message
    assert contains(r, 0, expected)
    assert r.max_width() < 1e-13 * (1 + max(abs(float(v)) for v in expected))


def test_one_neuron_frozen_and_on_hyperplane_is_exact():
    # z0 <= 0 (also z0 = 0): the point does not move, the enclosure is the point itself
    W = [[1.5], [-0.5]]
    A = [[2.0, 1.0]]
    b = [-1.0]
    X = [[0.25, 0.5], [0.0, 0.0], [-3.0, 2.0]]  # z0 = 0, -1, -5
    r = relu_flow([W], [A], [b], ["3/4"], X)
    assert r.status is FlowStatus.SUCCESS
    assert np.array_equal(r.final.lo, np.array(X)) and np.array_equal(r.final.hi, np.array(X))
    assert r.hints["points"][0][0]["kind"] == "equilibrium"


# --- laminar pieces: exact ------------------------------------------------------------------


@st.composite
def laminar_pieces(draw):
    d = draw(st.integers(2, 3))
    a = [draw(small) for _ in range(d)]
    assume(any(a))
    k = next(i for i in range(d) if a[i])
    p = draw(st.integers(1, 4))
    W, A, b = [[F(0)] * p for _ in range(d)], [], []
    for i in range(p):
        # w_i orthogonal to a: free coordinates, the k-th solves a.w = 0
        w = [draw(small) for _ in range(d)]
        w[k] = -sum(a[j] * w[j] for j in range(d) if j != k) / a[k]
        for r in range(d):
            W[r][i] = w[r]
        lam = draw(st.sampled_from([F(1), F(-1), F(2), F(-1, 2), F(3, 4)]))
        A.append([lam * v for v in a])
        b.append(draw(small))
    return d, W, A, b


@given(lam=laminar_pieces(), data=st.data())
def test_laminar_flow_exact_is_exact(lam, data):
    d, W, A, b = lam
    tau = data.draw(durations_st)
    alpha = data.draw(st.sampled_from([F(0), F(1, 100), F(1, 2)]))
    X = [[data.draw(coord) for _ in range(d)] for _ in range(data.draw(st.integers(1, 5)))]
    # points on breakpoints are included: sigma(0) = 0 from both sides
    X.append([F(0)] * d)
    kw = {} if alpha == 0 else {"activation": "leaky_relu", "slope": alpha}
    out = laminar_flow_exact(W, A, b, tau, X, **kw)
    for n, x in enumerate(X):
        assert [frac(v) for v in out[n]] == exact_laminar(W, A, b, tau, x, alpha)


@given(lam=laminar_pieces(), data=st.data())
def test_laminar_runs_compose_exactly(lam, data):
    d, W, A, b = lam
    taus = [data.draw(durations_st) for _ in range(3)]
    b2 = [data.draw(small) for _ in b]
    X = [[data.draw(coord) for _ in range(d)] for _ in range(4)]
    r = relu_flow([W, W, W], [A, A, A], [b, b2, b], taus, X)
    assert r.status is FlowStatus.SUCCESS and r.exact is not None
    assert r.exact.shape == (1, len(X), d)
    for n, x in enumerate(X):
        y = exact_laminar(W, A, b, taus[0], x)
        y = exact_laminar(W, A, b2, taus[1], y)
        y = exact_laminar(W, A, b, taus[2], y)
        assert [frac(v) for v in r.exact[0, n]] == y
        assert contains(r, n, y)


@given(lam=laminar_pieces(), data=st.data())
def test_the_one_laminar_map_serves_flow_interpolation_and_certificates(lam, data):
    # one implementation (flow.relu._laminar.laminar_map_exact) behind the three producer
    # entry points: each agrees with the Fraction formula
    from certified.certificates import laminar_flow_exact as certificate_images
    from certified.flow.relu._laminar import laminar_map_exact
    from certified.interpolation.verify import laminar_images
    from certified.models import Piece, Schedule

    d, W, A, b = lam
    tau = data.draw(durations_st)
    X = [[data.draw(coord) for _ in range(d)] for _ in range(data.draw(st.integers(1, 5)))]
    want = [exact_laminar(W, A, b, tau, x) for x in X]
    q = lambda M: np.array([[flint.fmpq(v.numerator, v.denominator) for v in r] for r in M])  # noqa: E731
    Xq, Wq, Aq, bq = q(X), q(W), q(A), q([b])[0]
    a = next((r for r in Aq if any(v != 0 for v in r)), None)
    assume(a is not None)
    mu = np.array([next(r[k] / a[k] for k in range(d) if a[k] != 0) for r in Aq])
    assume(all(m != 0 for m in mu))
    tq = flint.fmpq(tau.numerator, tau.denominator)
    out = laminar_map_exact(Xq, a, Wq.T * tq, mu, bq, flint.fmpq(0))
    assert [[frac(v) for v in row] for row in out] == want
    if all(m > 0 for m in mu):  # interpolation's schedules: positive scales
        sched = Schedule(d, "relu", (Piece(tq, Wq, Aq, bq),))
        assert [[frac(v) for v in row] for row in laminar_images(sched, Xq)] == want
    if all(m == 1 for m in mu):  # certificates: equal rows of A
        spec = {"dimension": d, "activation": "relu", "pieces": [
            {"duration": str(tau), "W": [[str(v) for v in r] for r in W],
             "A": [[str(v) for v in r] for r in A], "b": [str(v) for v in b]}]}  # fmt: skip
        assert [[frac(v) for v in row] for row in certificate_images(spec, X)] == want


def test_laminar_exact_rejects_general_piece():
    with pytest.raises(NotLaminarError):
        laminar_flow_exact([[1.0], [0.0]], [[1.0, 0.0]], [0.0], 1, [[0.5, 0.5]])
    # and a general piece gives no exact result
    r = relu_flow([[[1.0], [0.0]]], [[[1.0, 0.0]]], [[0.0]], [1], [[0.5, 0.5]])
    assert r.exact is None


def test_laminar_between_general_pieces_in_ball_arithmetic():
    a = [1.0, 1.0]
    Wl, Al, bl = [[1.0, -2.0], [-1.0, 2.0]], [a, [-2.0, -2.0]], [0.25, 0.5]
    Wg, Ag, bg = [[0.5, -1.0], [1.0, 0.25]], [[1.0, -1.0], [0.5, 1.0]], [0.1, -0.2]
    X = [[0.3, -0.2], [-0.5, 0.4], [1.0, 1.0]]
    check_against_reference([Wg, Wl, Wg], [Ag, Al, Ag], [bg, bl, bg], ["1/4", "1/2", "1/4"], X)


# --- general pieces -------------------------------------------------------------------------


def test_affine_piece_in_one_region_matches_expm():
    rng = np.random.default_rng(3)
    d, p = 3, 3
    W = rng.normal(size=(d, p)) / 2
    A = rng.normal(size=(p, d))
    b = np.abs(A).sum(axis=1) * 2 + 1  # every neuron active on [-1, 1]^3 for a short time
    X = rng.uniform(-1, 1, size=(5, d))
    r = relu_flow([W], [A], [b], ["1/16"], X)
    assert r.status is FlowStatus.SUCCESS
    with mpmath.workdps(50):
        Mt = mpmath.zeros(d + 1, d + 1)
        for i in range(d):
            for k in range(d):
                Mt[i, k] = sum(mpmath.mpf(W[i, j]) * mpmath.mpf(A[j, k]) for j in range(p))
            Mt[i, d] = sum(mpmath.mpf(W[i, j]) * mpmath.mpf(b[j]) for j in range(p))
        E = mpmath.expm(Mt / 16)
        for n in range(len(X)):
            y = E * mpmath.matrix([*map(mpmath.mpf, X[n]), 1])
            assert contains(r, n, [y[k] for k in range(d)])
            assert len(r.hints["points"][n][0]["crossings"]) == 0
    assert r.max_width() < 1e-14


def test_crossings_against_expm_reference_and_hints():
    rng = np.random.default_rng(13)
    d, p = 3, 4
    W = (rng.normal(size=(d, p)) * 4).round() / 4
    A = (rng.normal(size=(p, d)) * 4).round() / 4
    b = (rng.normal(size=p) * 4).round() / 4
    X = rng.uniform(-1, 1, size=(6, d))
    r = check_against_reference([W.tolist()], [A.tolist()], [b.tolist()], ["1/2"], X.tolist())
    assert r.status is FlowStatus.SUCCESS
    n_cross = sum(len(h[0]["crossings"]) for h in r.hints["points"])
    assert n_cross >= 3  # the example does cross hyperplanes
    json.dumps(r.hints)  # plain data
    for per_point in r.hints["points"]:
        h = per_point[0]
        assert h["kind"] == "regions"
        for seg in h["segments"]:
            assert len(seg["region"]) == p and set(seg["region"]) <= set("+-.")
            assert flint.fmpq(seg["start"]) <= flint.fmpq(seg["end"])
        for c in h["crossings"]:
            lo, hi = (flint.fmpq(v) for v in c["window"])
            assert 0 <= lo < hi <= flint.fmpq(1, 2)
    assert r.max_width() < 1e-13


def test_crossing_windows_contain_the_crossing_times():
    """The hints locate every hyperplane crossing of the 50-digit reference inside a window."""
    rng = np.random.default_rng(13)
    d, p = 3, 4
    W = ((rng.normal(size=(d, p)) * 4).round() / 4).tolist()
    A = ((rng.normal(size=(p, d)) * 4).round() / 4).tolist()
    b = ((rng.normal(size=p) * 4).round() / 4).tolist()
    X = rng.uniform(-1, 1, size=(6, d)).tolist()
    r = relu_flow([W, W], [A, A], [b, b], ["1/4", "1/4"], X)
    assert r.status is FlowStatus.SUCCESS
    total = 0
    for n, x in enumerate(X):
        events = []
        ref.piecewise_expm([W, W], [A, A], [b, b], ["1/4", "1/4"], x, events=events)
        for j, t, i in events:
            windows = [
                c["window"] for c in r.hints["points"][n][j]["crossings"] if i in c["neurons"]
            ]
            with mpmath.workdps(60):
                inside = any(_mp(lo) <= t <= _mp(hi) for lo, hi in windows)
            assert inside, (n, j, t, i, windows)
            total += 1
    assert total >= 3


def test_unresolvable_contact_is_rejected_honestly():
    """A trajectory moving inside a (non-invariant) hyperplane, with inexact (non-dyadic)
    data: the side cannot be certified, so the point is rejected with a message; the other
    point of the same call is still certified."""
    W = [[F(0), F(1)], [F(1), F(1, 3)]]  # neuron 0 pushes off the plane, neuron 1 is a drift
    A = [[F(-1, 3), F(1)], [F(0), F(0)]]  # plane x2 = x1 / 3; the drift (1, 1/3) lies in it
    b = [F(0), F(1)]
    X = [[F(0), F(0)], [F(1, 2), F(-1, 4)]]
    r = relu_flow([W], [A], [b], ["1/2"], X)
    assert r.status is FlowStatus.STEP_REJECTED
    assert list(r.hints["rejected"]) == ["0"]
    assert "neurons [0]" in r.message and "point 0" in r.message
    assert np.all(r.final.lo[0] < -1e300) and np.all(r.final.hi[0] > 1e300)
    assert contains(r, 1, ref.piecewise_expm([W], [A], [b], ["1/2"], X[1]))


def test_reference_agrees_with_odefun():
    """The piecewise expm reference is checked against mpmath.odefun (Taylor) on a case with
    crossings: the two independent references agree to far below float resolution."""
    W = [[F(1, 2), F(-1)], [F(1), F(1, 4)]]
    A = [[F(1), F(-1)], [F(1, 2), F(1)]]
    b = [F(1, 10), F(-1, 5)]
    x0 = [F(3, 10), F(-1, 5)]
    e = ref.piecewise_expm([W], [A], [b], [F(1, 4)], x0)
    o = ref.odefun([W], [A], [b], [F(1, 4)], x0, dps=30)
    assert max(abs(e[k] - o[k]) for k in range(2)) < mpmath.mpf(10) ** -20
    r = relu_flow([W], [A], [b], [F(1, 4)], [x0])
    assert contains(r, 0, e)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios())
def test_property_reference_inside_enclosure(scenario):
    """Random small fields, points on / within 1e-15 of hyperplanes: zero misses; a rejection
    must come with a message."""
    Ws, As, bs, taus, X = scenario
    check_against_reference(Ws, As, bs, taus, X)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=25)
@given(
    f=fields(d_max=2, p_max=3),
    x=st.lists(coord, min_size=2, max_size=2),
    alpha=st.sampled_from([F(1, 100), F(1, 4), F(1)]),
)
def test_property_leaky_relu(f, x, alpha):
    d, _p, W, A, b = f
    x = x[:d]
    check_against_reference(
        [W], [A], [b], [F(1, 2)], [x], alpha=alpha, activation="leaky_relu", slope=alpha
    )


def test_points_on_two_hyperplanes_and_back_and_forth():
    # x0 = 0 lies on both hyperplanes; the field leaves through one of the quadrants
    W = [[F(1), F(-1, 2)], [F(1, 2), F(1)]]
    A = [[F(1), F(0)], [F(0), F(1)]]
    b = [F(0), F(0)]
    const = ([[F(1, 4)], [F(-1, 8)]], [[F(0), F(0)]], [F(1)])  # constant drift neuron
    Wc = [W[0] + const[0][0], W[1] + const[0][1]]
    Ac = A + const[1]
    bc = b + const[2]
    # a rotation-like field that crosses the axes several times
    Wr = [[F(0), F(-2)], [F(2), F(0)]]
    X = [[F(0), F(0)], [F(1, 2), F(0)], [F(0), F(-1, 2)], [F(1, 3), F(-1, 7)]]
    r = check_against_reference([Wc, Wr], [Ac, A], [bc, b], [F(1, 2), F(3, 2)], X)
    assert sum(len(h[1].get("crossings", [])) for h in r.hints["points"]) >= 2


def test_simultaneous_and_nearly_simultaneous_switching():
    """A drift through the corner of two hyperplanes: exactly simultaneous crossings share one
    window; crossings 2^-52 apart are resolved one after the other."""
    W = [[F(1, 2), F(0), F(1)], [F(0), F(-1, 4), F(1)]]
    A = [[F(1), F(0)], [F(0), F(1)], [F(0), F(0)]]
    b = [F(0), F(0), F(1)]
    X = [[F(-1, 2), F(-1, 2)], [F(-1, 2), F(-1, 2) + F(1, 2**52)], [F(-1, 2), F(-1, 2)]]
    r = check_against_reference([W], [A], [b], ["1"], X)
    assert r.status is FlowStatus.SUCCESS
    crossings = [h[0]["crossings"] for h in r.hints["points"]]
    assert [c["neurons"] for c in crossings[0]] == [[0, 1]]
    assert [c["neurons"] for c in crossings[1]] == [[1], [0]]
    assert r.max_width() < 1e-15


def test_generic_data_is_never_rejected():
    rng = np.random.default_rng(5)
    d, p = 4, 5
    Ws = [rng.normal(size=(d, p)) / 2 for _ in range(3)]
    As = [rng.normal(size=(p, d)) for _ in range(3)]
    bs = [rng.normal(size=p) for _ in range(3)]
    X = rng.uniform(-1, 1, size=(8, d))
    r = relu_flow(Ws, As, bs, ["1/4"] * 3, X)
    assert r.status is FlowStatus.SUCCESS
    xf = relu_flow_float64(Ws, As, bs, [0.25] * 3, X)
    # the float64 version of the same algorithm agrees to float accuracy (not a guarantee)
    assert np.max(np.abs(xf - r.final.mid())) < 1e-10
    assert r.max_width() < 1e-13


def test_long_schedule_stays_tight():
    """24 pieces (T = 6, |x| grows to ~300): centre + Euclidean radius propagation keeps the
    enclosure at the float64 output resolution (naive ball propagation would wrap)."""
    rng = np.random.default_rng(4)
    d, p, L = 3, 4, 24
    W = [((rng.normal(size=(d, p)) * 4).round() / 4).tolist() for _ in range(L)]
    A = [((rng.normal(size=(p, d)) * 4).round() / 4).tolist() for _ in range(L)]
    b = [((rng.normal(size=p) * 4).round() / 4).tolist() for _ in range(L)]
    X = rng.uniform(-1, 1, size=(1, d)).tolist()
    r = check_against_reference(W, A, b, ["1/4"] * L, X)
    assert r.status is FlowStatus.SUCCESS
    assert np.max(np.abs(r.final.mid())) > 100
    assert r.max_width() < 1e-12


def test_precision_argument():
    W, A, b = [[1.0, -1.0], [0.5, 1.0]], [[1.0, 0.5], [-1.0, 1.0]], [0.2, -0.1]
    X = [[0.4, -0.3], [0.1, 0.1]]
    for prec in (53, 64, 200):
        r = check_against_reference([W], [A], [b], ["1/2"], X, prec=prec)
        assert r.hints["prec"] == prec
    wide = relu_flow([W], [A], [b], ["1/2"], X, prec=24)
    fine = relu_flow([W], [A], [b], ["1/2"], X, prec=128)
    assert np.all(wide.final.encloses(fine.final) | (wide.status is not FlowStatus.SUCCESS))


# --- a deliberately broken engine is caught -------------------------------------------------


def test_broken_validation_is_detected(monkeypatch):
    """If region validation always succeeded and exits were never predicted, crossings would be
    ignored: the containment check must then fail."""
    W = [[1.0, -1.0], [0.5, 1.0]]
    A = [[1.0, 0.5], [-1.0, 1.0]]
    b = [0.2, -0.1]
    X = [[0.625, 0.8125]]
    good = relu_flow([W], [A], [b], ["1"], X)
    assert good.status is FlowStatus.SUCCESS
    assert len(good.hints["points"][0][0]["crossings"]) >= 1
    expected = ref.piecewise_expm([W], [A], [b], ["1"], X[0])
    assert contains(good, 0, expected)

    def always_valid(ap, reg, ex, b_, m, R=None):
        return None, [], [b_ * flint.fmpq(i, m) for i in range(m + 1)]

    monkeypatch.setattr(_points, "validate_points", always_valid)
    monkeypatch.setattr(_points, "_first_exit", lambda *args: None)
    bad = relu_flow([W], [A], [b], ["1"], X)
    assert not contains(bad, 0, expected)


def test_wrong_region_is_caught_not_trusted(monkeypatch):
    """If the region after a crossing (or at the start) were chosen wrongly, validation must
    catch it: the result is rejected or still correct, never a wrong enclosure."""
    W = [[1.0, -1.0], [0.5, 1.0]]
    A = [[1.0, 0.5], [-1.0, 1.0]]
    b = [0.2, -0.1]
    X = [[0.625, 0.8125], [0.2, -0.3]]
    expected = [ref.piecewise_expm([W], [A], [b], ["1"], x) for x in X]
    original_window = _region.window

    def flipped_window(ap, reg, ex, lo, hi, end, rho=None):
        res = original_window(ap, reg, ex, lo, hi, end, rho)
        if res.signs is not None:
            res.signs = tuple(-s for s in res.signs)
        return res

    def flipped_start(ap, y, x_exact=None, rho=None):
        signs, pending = original_start(ap, y, x_exact, rho)
        return [-s for s in signs], pending

    original_start = _points.initial_signs
    for name, mutant in (("window", flipped_window), ("initial_signs", flipped_start)):
        with monkeypatch.context() as m:
            m.setattr(_points, name, mutant)
            r = relu_flow([W], [A], [b], ["1"], X)
        for n in range(len(X)):
            if str(n) not in r.hints["rejected"]:
                assert contains(r, n, expected[n])
        assert r.status is FlowStatus.STEP_REJECTED or name == "window"


# --- boxes and Lipschitz constants ----------------------------------------------------------


def test_box_in_one_region_contains_images():
    W = [[1.0, -1.0], [0.5, 1.0]]
    A = [[1.0, 0.5], [-1.0, 1.0]]
    b = [0.2, -0.1]
    lo, hi = np.array([[0.6, -0.2]]), np.array([[0.62, -0.18]])
    r = relu_flow([W, W], [A, A], [b, b], ["1/8", "1/16"], Interval(lo, hi))
    assert r.status is FlowStatus.SUCCESS, r.message
    rng = np.random.default_rng(0)
    corners = [[x, y] for x in (lo[0, 0], hi[0, 0]) for y in (lo[0, 1], hi[0, 1])]
    samples = corners + rng.uniform(lo[0], hi[0], size=(4, 2)).tolist()
    for x in samples:
        e = ref.piecewise_expm([W, W], [A, A], [b, b], ["1/8", "1/16"], x)
        assert contains(r, 0, e)
    assert r.hints["boxes"][0][0]["kind"] == "region"
    # no wrapping: the enclosure is about as wide as the image (linear map of a small box)
    assert r.max_width() < 0.05


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=20)
@given(
    f=fields(d_max=2, p_max=3),
    c=st.lists(coord, min_size=2, max_size=2),
    r=st.sampled_from([2.0**-10, 2.0**-6]),
    tau=durations_st,
)
def test_property_boxes(f, c, r, tau):
    d, _p, W, A, b = f
    c = [float(v) for v in c[:d]]
    lo, hi = np.array([c]) - r, np.array([c]) + r
    res = relu_flow([W], [A], [b], [tau], Interval(lo, hi))
    if res.status is not FlowStatus.SUCCESS:
        assert "split the box" in res.message
        return
    corners = np.array(np.meshgrid(*[[lo[0, k], hi[0, k]] for k in range(d)])).reshape(d, -1).T
    for x in [*corners.tolist(), c]:
        assert contains(res, 0, ref.piecewise_expm([W], [A], [b], [tau], x))


def test_box_crossing_a_hyperplane_is_rejected():
    W = [[1.0, -1.0], [0.5, 1.0]]
    A = [[1.0, 0.5], [-1.0, 1.0]]
    b = [0.2, -0.1]
    box = Interval(np.array([[-0.5, -0.5]]), np.array([[0.5, 0.5]]))
    r = relu_flow([W], [A], [b], ["1/2"], box)
    assert r.status is FlowStatus.STEP_REJECTED
    assert "split the box" in r.message
    assert r.hints["rejected"]


def test_box_through_laminar_piece():
    a = [1.0, 1.0]
    Wl, Al, bl = [[1.0, -2.0], [-1.0, 2.0]], [a, [-2.0, -2.0]], [0.0, 0.5]
    lo, hi = np.array([[-0.1, -0.1]]), np.array([[0.1, 0.1]])  # straddles a breakpoint
    r = relu_flow([Wl], [Al], [bl], ["1/2"], Interval(lo, hi))
    assert r.status is FlowStatus.SUCCESS
    for x in ([-0.1, -0.1], [0.1, 0.1], [-0.1, 0.1], [0.05, -0.02], [0.0, 0.0]):
        y = exact_laminar(
            [[F(v) for v in row] for row in Wl],
            [[F(v) for v in row] for row in Al],
            [F(v) for v in bl],
            F(1, 2),
            [F(v) for v in x],
        )
        assert contains(r, 0, y)


def test_gronwall_bound():
    W1, A1 = [[1.0, 0.0], [0.0, -2.0]], [[3.0, 4.0], [0.0, 0.5]]
    W2, A2 = [[0.5], [0.5]], [[1.0, -1.0]]
    g = gronwall_lipschitz([W1, W2], [A1, A2], ["1/2", "1/4"])
    with mpmath.workdps(50):
        # |w| |a| per neuron: 1*5 + 2*0.5 = 6 ; sqrt(0.5)*sqrt(2) = 1
        exact = mpmath.exp(mpmath.mpf(6) / 2 + mpmath.mpf(1) / 4)
        assert exact <= _mp(frac(g.upper_exact)) <= exact * (1 + mpmath.mpf(10) ** -30)
        assert g.upper >= float(exact)
    assert g.method == "gronwall" and g.norm == "euclidean"
    zero = gronwall_lipschitz([[[0.0]]], [[[1.0]]], [1])
    assert zero.upper == 1.0 and zero.upper_exact == 1


def test_gronwall_dominates_observed_ratio():
    rng = np.random.default_rng(2)
    d, p = 3, 4
    W, A, b = rng.normal(size=(d, p)), rng.normal(size=(p, d)), rng.normal(size=p)
    X = rng.uniform(-1, 1, size=(6, d))
    r = relu_flow([W], [A], [b], ["1/4"], X)
    g = gronwall_lipschitz([W], [A], ["1/4"])
    mid = r.final.mid()
    for i in range(len(X)):
        for j in range(i):
            ratio = np.linalg.norm(mid[i] - mid[j]) / np.linalg.norm(X[i] - X[j])
            assert ratio <= g.upper


def test_jacobian_on_a_box_in_one_region():
    W = [[1.0, -1.0], [0.5, 1.0]]
    A = [[1.0, 0.5], [-1.0, 1.0]]
    b = [0.2, -0.1]
    box = Interval(np.array([0.6, -0.2]), np.array([0.61, -0.19]))
    res = relu_flow_jacobian([W], [A], [b], ["1/8"], box)
    assert res.status is FlowStatus.SUCCESS and res.method == "c1-box"
    # neuron 0 active, neuron 1 inactive on the box: D Phi = expm(tau w_0 a_0^T)
    with mpmath.workdps(50):
        M = mpmath.matrix([[1.0 * 1.0, 1.0 * 0.5], [0.5 * 1.0, 0.5 * 0.5]])
        E = mpmath.expm(M / 8)
        for i in range(2):
            for k in range(2):
                assert res.jacobian.lo[i, k] <= E[i, k] <= res.jacobian.hi[i, k]
        spectral = mpmath.sqrt(max(mpmath.eigsy(E.T * E)[0]))
        assert spectral <= res.upper <= spectral * (1 + 1e-9)
    g = gronwall_lipschitz([W], [A], ["1/8"])
    assert res.upper <= g.upper
    crossing = relu_flow_jacobian(
        [W], [A], [b], ["1/2"], Interval(np.array([-0.5, -0.5]), np.array([0.5, 0.5]))
    )
    assert crossing.status is FlowStatus.STEP_REJECTED and crossing.upper == float("inf")


# --- bad input ------------------------------------------------------------------------------

W0, A0, b0 = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"W_list": [[[float("nan"), 0.0], [0.0, 1.0]]]}, NonFiniteError, "W_list[0][0][0]"),
        ({"b_list": [[0.0, float("inf")]]}, NonFiniteError, "b_list[0][1]"),
        ({"X0": [[0.0, float("nan")]]}, NonFiniteError, "X0[0][1]"),
        ({"durations": [-1]}, InputError, "durations[0]"),
        ({"durations": [0]}, InputError, "positive"),
        ({"durations": ["1/0"]}, InputError, "denominator"),
        ({"A_list": [[[1.0, 0.0]]]}, ShapeError, "A_list[0]"),
        ({"b_list": [[0.0]]}, ShapeError, "b_list[0]"),
        ({"X0": [[0.0, 0.0, 0.0]]}, ShapeError, "dimension"),
        ({"X0": [0.0, 0.0]}, ShapeError, "X0"),
        ({"X0": np.zeros((0, 2))}, ShapeError, "X0"),
        ({"W_list": [], "A_list": [], "b_list": [], "durations": []}, InputError, "empty"),
        ({"durations": [1, 1]}, ShapeError, "lengths"),
        ({"activation": "tanh"}, InputError, "activation"),
        ({"slope": "1/2"}, InputError, "slope"),
        ({"activation": "leaky_relu", "slope": 2}, InputError, "slope"),
        ({"prec": 4}, PrecisionError, "prec"),
        ({"prec": 64.0}, PrecisionError, "prec"),
    ],
)
def test_bad_input(kwargs, error, words):
    args = {"W_list": [W0], "A_list": [A0], "b_list": [b0], "durations": [1], "X0": [[0.1, 0.2]]}
    args.update(kwargs)
    pos = [args.pop(k) for k in ("W_list", "A_list", "b_list", "durations", "X0")]
    with pytest.raises(error) as info:
        relu_flow(*pos, **args)
    assert words in str(info.value)
    assert isinstance(info.value, CertifiedError)


def test_bad_input_dimension_between_pieces():
    with pytest.raises(ShapeError, match="same dimension"):
        relu_flow([W0, [[1.0]]], [A0, [[1.0]]], [b0, [0.0]], [1, 1], [[0.1, 0.2]])


def test_bad_input_other_functions():
    Wl, Al, bl = [[0.0], [1.0]], [[1.0, 0.0]], [0.0]  # laminar
    with pytest.raises(ShapeError):
        laminar_flow_exact(Wl, Al, bl, 1, [[0.0, 0.0, 0.0]])
    with pytest.raises(InputError, match="positive"):
        laminar_flow_exact(Wl, Al, bl, 0, [[0.0, 0.0]])
    with pytest.raises(InputError):
        gronwall_lipschitz([], [], [])
    with pytest.raises(ShapeError):
        gronwall_lipschitz([W0], [A0], [1, 2])
    with pytest.raises(NonFiniteError):
        gronwall_lipschitz([[[float("nan")]]], [[[1.0]]], [1])
    with pytest.raises(InputError):
        relu_flow_jacobian([W0], [A0], [b0], [1], [[0.0, 1.0]])
    with pytest.raises(ShapeError):
        relu_flow([W0], [A0], [b0], [1], Interval(np.zeros((1, 3)), np.ones((1, 3))))
