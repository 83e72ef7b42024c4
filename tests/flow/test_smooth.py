"""Soundness of the validated Taylor method for tanh / sigmoid fields."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certified.arith import Interval
from certified.errors import InputError, NonFiniteError, ShapeError
from certified.flow.result import FlowStatus
from certified.flow.smooth import smooth_flow


def _inside(lo: float, hi: float, value: mpmath.mpf) -> bool:
    v = Fraction(mpmath.nstr(value, 45, min_fixed=-1000, max_fixed=1000).replace(" ", ""))
    return Fraction(lo) <= v <= Fraction(hi)


def one_neuron_tanh(x0, w, a, b, t):
    """x' = w tanh(a x + b): z = a x + b has sinh z(t) = sinh z0 e^{a w t} (closed form)."""
    with mpmath.workdps(60):
        x0, w, a, b, t = (mpmath.mpf(v) for v in (x0, w, a, b, t))
        z0 = a * x0 + b
        z = mpmath.asinh(mpmath.sinh(z0) * mpmath.exp(a * w * t))
        return (z - b) / a


def one_neuron_sigmoid(x0, w, a, b, t):
    """x' = w sigma(a x + b): z = a x + b has z - e^{-z} = z0 - e^{-z0} + a w t."""
    with mpmath.workdps(60):
        x0, w, a, b, t = (mpmath.mpf(v) for v in (x0, w, a, b, t))
        z0 = a * x0 + b
        c = z0 - mpmath.exp(-z0) + a * w * t
        z = mpmath.findroot(lambda z: z - mpmath.exp(-z) - c, z0 + a * w * t / 2)
        return (z - b) / a


@given(
    x0=st.floats(-2, 2),
    w=st.floats(-2, 2).filter(lambda v: abs(v) > 1e-3),
    a=st.floats(-2, 2).filter(lambda v: abs(v) > 1e-3),
    b=st.floats(-1, 1),
    act=st.sampled_from(["tanh", "sigmoid"]),
)
@example(x0=0.0, w=1.0, a=1.0, b=0.0, act="tanh")  # the trajectory sits on the zero of tanh
@example(x0=1e-15, w=-1.5, a=2.0, b=0.0, act="tanh")
@settings(deadline=None)
def test_one_neuron_closed_form_is_enclosed(x0, w, a, b, act):
    res = smooth_flow(
        [np.array([[w]])],
        [np.array([[a]])],
        [np.array([b])],
        ["1/2"],
        np.array([[x0]]),
        activation=act,
        order=14,
        max_step="1/8",
    )
    assert res.status is FlowStatus.SUCCESS
    ref = (one_neuron_tanh if act == "tanh" else one_neuron_sigmoid)(x0, w, a, b, "0.5")
    assert _inside(res.final.lo[0, 0], res.final.hi[0, 0], ref)


def _mp_flow(Ws, As, bs, taus, x0, act="tanh"):
    s = mpmath.tanh if act == "tanh" else (lambda v: 1 / (1 + mpmath.exp(-v)))
    with mpmath.workdps(40):
        x = [mpmath.mpf(float(v)) for v in x0]
        for W, A, b, tau in zip(Ws, As, bs, taus, strict=True):
            Wm, Am, bm = (mpmath.matrix(np.atleast_2d(m).tolist()) for m in (W, A, b))
            bm = mpmath.matrix(list(np.asarray(b, dtype=float)))

            def field(t, y, Wm=Wm, Am=Am, bm=bm):
                u = Am * mpmath.matrix(y) + bm
                return list(Wm * mpmath.matrix([s(v) for v in u]))

            x = mpmath.odefun(field, 0, x, tol=mpmath.mpf(10) ** -32, degree=24)(mpmath.mpf(tau))
        return x


def test_random_tanh_network_against_odefun():
    """The benchmark family (d = 3, p = 8, four pieces of 1/4), a few points, 40 digits."""
    rng = np.random.default_rng(7)
    Ws = [rng.standard_normal((3, 8)) / np.sqrt(8) for _ in range(2)]
    As = [rng.standard_normal((8, 3)) for _ in range(2)]
    bs = [rng.standard_normal(8) for _ in range(2)]
    X0 = rng.uniform(-1, 1, (3, 3))
    res = smooth_flow(Ws, As, bs, ["1/4", "1/4"], X0)
    assert res.status is FlowStatus.SUCCESS
    assert res.max_width() < 1e-13
    for i in range(3):
        ref = _mp_flow(Ws, As, bs, [0.25, 0.25], X0[i])
        for j in range(3):
            assert _inside(res.final.lo[i, j], res.final.hi[i, j], ref[j])


def test_boxes_contain_the_flow_of_sampled_points():
    rng = np.random.default_rng(3)
    W, A, b = rng.standard_normal((2, 4)) / 2, rng.standard_normal((4, 2)), rng.standard_normal(4)
    centre = np.array([[0.3, -0.2]])
    box = Interval(centre - 1e-3, centre + 1e-3)
    res = smooth_flow([W], [A], [b], ["3/10"], box, activation="sigmoid", order=16)
    assert res.status is FlowStatus.SUCCESS
    for corner in [(-1, -1), (1, 1), (-1, 1), (0.3, -0.7)]:
        x0 = centre[0] + 1e-3 * np.array(corner)
        ref = _mp_flow([W], [A], [b], ["0.3"], x0, act="sigmoid")
        for j in range(2):
            assert _inside(res.final.lo[0, j], res.final.hi[0, j], ref[j])


def test_lipschitz_hint_bounds_the_flow_map():
    """|Phi(x) - Phi(y)| <= L |x - y| for points of the initial box (checked at 40 digits)."""
    rng = np.random.default_rng(11)
    W, A, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2)), rng.standard_normal(3)
    box = Interval(np.array([[0.0, 0.0]]), np.array([[0.01, 0.01]]))
    res = smooth_flow([W], [A], [b], ["1/2"], box, order=16)
    L = res.hints["lipschitz"][0]
    x, y = np.array([0.0, 0.0]), np.array([0.01, 0.01])
    px, py = _mp_flow([W], [A], [b], ["0.5"], x), _mp_flow([W], [A], [b], ["0.5"], y)
    dist = mpmath.sqrt(sum((px[j] - py[j]) ** 2 for j in range(2)))
    assert dist <= L * mpmath.sqrt(2) * mpmath.mpf("0.01")


def test_exact_rational_parameters_and_non_dyadic_durations():
    """Durations like 1/3 are not doubles: steps use an interval step length."""
    W = np.array([["1/3", "-2/7"]], dtype=object)
    A = np.array([["1/2"], ["-1"]], dtype=object)
    b = np.array(["1/10", "0"], dtype=object)
    res = smooth_flow([W], [A], [b], ["1/3"], np.array([["1/5"]], dtype=object), order=12)
    assert res.status is FlowStatus.SUCCESS
    with mpmath.workdps(40):

        def field(t, y):
            u1 = mpmath.mpf(1) / 2 * y[0] + mpmath.mpf(1) / 10
            u2 = -y[0]
            return [mpmath.mpf(1) / 3 * mpmath.tanh(u1) - mpmath.mpf(2) / 7 * mpmath.tanh(u2)]

        sol = mpmath.odefun(field, 0, [mpmath.mpf(1) / 5], tol=mpmath.mpf(10) ** -32)
        ref = sol(mpmath.mpf(1) / 3)
    assert _inside(res.final.lo[0, 0], res.final.hi[0, 0], ref[0])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"durations": ["-1/4"]}, InputError),
        ({"durations": ["0"]}, InputError),
        ({"durations": []}, ShapeError),
        ({"X0": np.zeros((2, 3))}, ShapeError),
        ({"X0": np.array([[np.nan, 0.0]])}, NonFiniteError),
        ({"W": np.array([[np.inf, 0.0]])}, NonFiniteError),
        ({"A": np.zeros((3, 2))}, ShapeError),
        ({"activation": "relu"}, InputError),
        ({"order": 1}, InputError),
    ],
)
def test_bad_input(kwargs, error):
    args = {
        "W": np.array([[1.0, 0.5]]),
        "A": np.array([[1.0], [0.5]]),
        "b": np.array([0.0, 1.0]),
        "durations": ["1/4"],
        "X0": np.zeros((2, 1)),
        "activation": "tanh",
        "order": 10,
    }
    args.update(kwargs)
    durations = args.pop("durations")
    n = max(len(durations), 1)
    with pytest.raises(error):
        smooth_flow(
            [args.pop("W")] * n,
            [args.pop("A")] * n,
            [args.pop("b")] * n,
            durations,
            args.pop("X0"),
            **args,
        )


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_arbitrary_precision_path_encloses_the_closed_form_tightly(act):
    """prec != 53 runs the same method in arb: the radius is far below the float64 output
    ulp, so the float64 enclosure is within an ulp or two of the true value."""
    x0, w, a, b = "0.3", "-1.25", "0.75", "0.1"
    res = smooth_flow(
        [np.array([[w]], dtype=object)],
        [np.array([[a]], dtype=object)],
        [np.array([b], dtype=object)],
        ["1/2"],
        np.array([[x0]], dtype=object),
        activation=act,
        order=20,
        prec=160,
    )
    assert res.status is FlowStatus.SUCCESS
    ref = (one_neuron_tanh if act == "tanh" else one_neuron_sigmoid)(x0, w, a, b, "0.5")
    assert _inside(res.final.lo[0, 0], res.final.hi[0, 0], ref)
    assert res.max_width() <= 4 * np.spacing(abs(float(ref)))
    radius = res.hints["chains"][-1][1][-1, 0]  # exact final radius
    assert 0 < Fraction(int(radius.p), int(radius.q)) < Fraction(1, 10**30)


def test_precision_out_of_range_is_rejected():
    from certified.errors import PrecisionError

    with pytest.raises(PrecisionError):
        smooth_flow([np.eye(1)], [np.eye(1)], [np.zeros(1)], ["1"], np.zeros((1, 1)), prec=2)
