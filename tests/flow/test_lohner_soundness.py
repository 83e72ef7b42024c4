"""Soundness of the validated Taylor method with QR-Lohner sets (enclose_flow on smooth fields).

Every enclosure is checked against a reference independent of the code under test:
``field_reference.taylor_flow``, a high-order Taylor integrator in mpmath at 50 digits (its own
series recurrences; cross-checked against ``mpmath.odefun`` below), the closed form of the sphere
field ``x' = k P_x^perp z``, and time reversal. Boxes and balls are checked at sampled inner
points (corners, centre and uniform samples), decided at 30 digits wherever the longdouble screen
is not far from a face.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import field_reference as fref
import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from certified.arith import Interval
from certified.fields import (
    cos,
    exp,
    field,
    log,
    logsumexp,
    lorenz,
    neural_field,
    rossler,
    sigmoid,
    sin,
    softmax,
    sphere_neural_field,
    sqrt,
    tanh,
    total,
    vanderpol,
)
from certified.flow import Balls, SaveAt, enclose_flow
from certified.flow.result import FlowStatus
from certified.models import Schedule

_DEFAULT = settings.default.max_examples  # dev 60, ci 100, thorough 2000


def _n(ci: int, divisor: int) -> int:
    """Examples: ``ci`` in the ci and dev profiles, more in the thorough one."""
    return max(ci, _DEFAULT // divisor)


# --- helpers ---------------------------------------------------------------------------------


def _times(res) -> list[Fraction]:
    return [Fraction(t) for t in res.times]


def _assert_contains_points(problem, X0, res, dps=fref.DPS):
    """Every saved enclosure of every initial point contains the reference (float64 endpoints
    and, when present, the exact ``bounds``)."""
    assert res.status is FlowStatus.SUCCESS, res.message
    graph, times = problem.field.to_json(), _times(res)
    for i, x0 in enumerate(X0):
        refs = fref.taylor_flow(graph, problem, list(x0), times, dps=dps)
        for k, ref in enumerate(refs):
            bad = fref.outside(res.enclosures.lo[k, i], res.enclosures.hi[k, i], ref)
            assert not bad, (
                f"point {i} = {list(x0)}, t = {times[k]}, coordinates {bad}: reference "
                f"{[mpmath.nstr(ref[j], 25) for j in bad]} outside "
                f"{[(res.enclosures.lo[k, i, j], res.enclosures.hi[k, i, j]) for j in bad]}"
            )
            if res.bounds is not None:
                lo, hi = res.bounds[k, i, :, 0], res.bounds[k, i, :, 1]
                assert not fref.outside(lo, hi, ref), (i, k, "exact bounds")
    return res


def _corners_and_samples(lo, hi, n, rng):
    """All corners, the centre, then uniform samples of the box [lo, hi] (n rows in all, at
    least the corners and the centre)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    d = lo.size
    corners = [np.where(np.array(c), hi, lo) for c in itertools.product([0, 1], repeat=d)]
    pts = [*corners, 0.5 * (lo + hi)]
    m = max(0, n - len(pts))
    pts.extend(lo + (hi - lo) * rng.uniform(0, 1, (m, d)))
    return np.clip(np.array(pts), lo, hi)


def _assert_box_contains_images(problem, box_lo, box_hi, res, n, seed=0, i=0):
    """The enclosures of initial box i contain the images of n sampled points of it."""
    assert res.status is FlowStatus.SUCCESS, res.message
    samples = _corners_and_samples(box_lo, box_hi, n, np.random.default_rng(seed))
    times = _times(res)
    misses, decided = fref.box_misses(
        problem.field.to_json(),
        problem,
        samples,
        times,
        res.enclosures.lo[:, i],
        res.enclosures.hi[:, i],
    )
    assert misses == [], [(times[k], list(samples[s])) for k, s in misses[:5]]
    return decided


def _grid_points(rng, n, lo, hi):
    return rng.uniform(lo, hi, (n, len(lo)))


# --- the reference itself ----------------------------------------------------------------------


def test_reference_matches_odefun():
    """The Taylor reference agrees with mpmath.odefun (30 digits) on Lorenz and on a field
    using every operation of the graph language."""
    P = lorenz().for_time("1/4")
    g = P.field.to_json()
    a = fref.taylor_flow(g, P, [15, 15, 36], [Fraction(1, 4)])[0]
    b = fref.odefun_flow(g, P, [15, 15, 36], "1/4", dps=30)
    assert max(abs(u - v) for u, v in zip(a, b, strict=True)) < 1e-25
    P = _every_op_field().on(("1/6", [Fraction(1, 2)]), ("1/8", [Fraction(-3, 4)]))
    g = P.field.to_json()
    x0 = [0.25, -0.5]
    a = fref.taylor_flow(g, P, x0, [Fraction(7, 24)])[0]
    b = fref.odefun_flow(g, P, x0, "7/24", dps=20)
    assert max(abs(u - v) for u, v in zip(a, b, strict=True)) < 1e-16


def test_reference_is_consistent_across_orders():
    P = vanderpol().for_time(7)
    g = P.field.to_json()
    a = fref.taylor_flow(g, P, [1.4, 2.4], [3, 7])
    b = fref.taylor_flow(g, P, [1.4, 2.4], [3, 7], order=90)
    for u, v in zip(a, b, strict=True):
        assert max(abs(p - q) for p, q in zip(u, v, strict=True)) < 1e-48


def _every_op_field():
    return field(
        2,
        lambda x, p: [
            p.a * tanh(x[1]) + sigmoid(x[0] * x[1]) / 4 - sqrt(1 + x[0] ** 2) / 8,
            logsumexp([x[0], x[1] / 2, p.a]) / 4
            - sin(x[0]) * cos(x[1]) / 3
            + log(2 + exp(-x[0])) / 5
            - x[1] / (1 + x[0] ** 2)
            + total([x[0], x[1], 1]) / 7
            + softmax([x[0], x[1]])[0] / 3,
        ],
        parameters=["a"],
    )


def _mp_every_op(x, a):
    """The same field written out in mpmath (textbook formulas)."""
    x0, x1 = x
    sg = 1 / (1 + mpmath.exp(-(x0 * x1)))
    lse = mpmath.log(mpmath.exp(x0) + mpmath.exp(x1 / 2) + mpmath.exp(a))
    sm = mpmath.exp(x0) / (mpmath.exp(x0) + mpmath.exp(x1))
    return [
        a * mpmath.tanh(x1) + sg / 4 - mpmath.sqrt(1 + x0**2) / 8,
        lse / 4
        - mpmath.sin(x0) * mpmath.cos(x1) / 3
        + mpmath.log(2 + mpmath.exp(-x0)) / 5
        - x1 / (1 + x0**2)
        + (x0 + x1 + 1) / 7
        + sm / 3,
    ]


def test_graphs_are_the_textbook_fields():
    """The graphs the references integrate are the fields they claim to be (so the references
    are references for Lorenz, Van der Pol, Rössler, neural and sphere fields)."""
    rng = np.random.default_rng(1)
    with mpmath.workdps(50):
        for _ in range(5):
            x = [mpmath.mpf(float(v)) for v in rng.uniform(-3, 3, 3)]
            L = lorenz().for_time(1)
            f = fref.evaluate(L.field.to_json(), L.pieces[0].values, x)
            s, r, b = 10, 28, mpmath.mpf(8) / 3
            want = [s * (x[1] - x[0]), x[0] * (r - x[2]) - x[1], x[0] * x[1] - b * x[2]]
            assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45
            R = rossler().for_time(1)
            f = fref.evaluate(R.field.to_json(), R.pieces[0].values, x)
            a, c = mpmath.mpf(1) / 5, mpmath.mpf(57) / 10
            want = [-x[1] - x[2], x[0] + a * x[1], a + x[2] * (x[0] - c)]
            assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45
            V = vanderpol().for_time(1)
            f = fref.evaluate(V.field.to_json(), V.pieces[0].values, x[:2])
            want = [x[1], (1 - x[0] ** 2) * x[1] - x[0]]
            assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45
            f = fref.evaluate(_every_op_field().to_json(), ["-3/7"], x[:2])
            want = _mp_every_op(x[:2], mpmath.mpf(-3) / 7)
            assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45
            for act in ("tanh", "sigmoid"):
                spec, Ws, As, bs = _neural_spec(act, 3, 4, 2, seed=3)
                P = neural_field(Schedule.from_json(spec))
                f = fref.evaluate(P.field.to_json(), P.pieces[1].values, x)
                sig = mpmath.tanh if act == "tanh" else (lambda u: 1 / (1 + mpmath.exp(-u)))
                W, A, bb = Ws[1], As[1], bs[1]
                y = [sig(sum(A[i][j] * x[j] for j in range(3)) + bb[i]) for i in range(len(bb))]
                want = [sum(W[r][i] * y[i] for i in range(len(bb))) for r in range(3)]
                assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45
            P, (W, U, bb) = _sphere(act, seed=4)
            f = fref.evaluate(P.field.to_json(), P.pieces[0].values, x)
            y = [sig(sum(U[i][j] * x[j] for j in range(3)) + bb[i]) for i in range(3)]
            v = [sum(W[r][i] * y[i] for i in range(3)) for r in range(3)]
            xv = sum(x[i] * v[i] for i in range(3))
            want = [v[i] - x[i] * xv for i in range(3)]
            assert max(abs(u - v) for u, v in zip(f, want, strict=True)) < 1e-45


# --- shipped examples ------------------------------------------------------------------------


def test_lorenz_classic_point():
    """Lorenz (10, 28, 8/3) from (15, 15, 36) to T = 1, as a VectorField with SaveAt(t1)."""
    X0 = np.array([[15.0, 15.0, 36.0]])
    res = enclose_flow(lorenz(), X0, save_at=SaveAt(1))
    _assert_contains_points(lorenz().for_time(1), X0, res)
    assert res.max_width() < 1e-10


def test_lorenz_random_points_with_saved_times():
    rng = np.random.default_rng(11)
    X0 = _grid_points(rng, 3, [-15, -20, 5], [15, 20, 40])
    P = lorenz().for_time(1)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=["1/8", "1/3", "0.5", "0.9"]))
    assert res.times == ("1/8", "1/3", "1/2", "9/10", "1")
    _assert_contains_points(P, X0, res)


def test_vanderpol_to_seven():
    X0 = np.array([[1.4, 2.4], [-2.0, 0.5]])
    P = vanderpol().for_time(7)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=[1, 2, 3, 4, 5, 6]))
    _assert_contains_points(P, X0, res)
    assert res.max_width() < 1e-11


def test_vanderpol_from_exact_rationals():
    """Initial points that are not doubles (1/3, -2/7): the flow of the exact rational."""
    X0 = [["1/3", "-2/7"], ["0.1", "1/10"]]
    P = vanderpol("1/3").for_time(2)
    res = enclose_flow(P, X0)
    _assert_contains_points(P, X0, res)


def test_rossler():
    X0 = np.array([[0.0, -6.78, 0.02], [1.0, 1.0, 1.0]])
    P = rossler().for_time(10)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=[2, 5]))
    _assert_contains_points(P, X0, res)


# --- neural fields ---------------------------------------------------------------------------


def _neural_spec(act, d, p, n, seed, durations=("1/4", "1/3", "1/2")):
    rng = np.random.default_rng(seed)
    Ws = [rng.standard_normal((d, p)) / np.sqrt(p) for _ in range(n)]
    As = [rng.standard_normal((p, d)) for _ in range(n)]
    bs = [rng.standard_normal(p) for _ in range(n)]
    spec = {
        "dimension": d,
        "activation": act,
        "pieces": [
            {"duration": durations[j % len(durations)], "W": W.tolist(), "A": A.tolist(), "b": b}
            for j, (W, A, b) in enumerate(zip(Ws, As, [b.tolist() for b in bs], strict=True))
        ],
    }
    return spec, Ws, As, bs


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_neural_schedules(act):
    """x' = W s(A x + b), Gaussian weights (d = 3, p = 6), three pieces, three points; the
    Schedule itself and its neural_field give the same certified enclosures."""
    spec, *_ = _neural_spec(act, 3, 6, 3, seed=21)
    schedule = Schedule.from_json(spec)
    P = neural_field(schedule)
    X0 = _grid_points(np.random.default_rng(5), 2, [-1] * 3, [1] * 3)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=["1/4", "7/12"]))
    _assert_contains_points(P, X0, res)
    direct = enclose_flow(schedule, X0, save_at=SaveAt(ts=["1/4", "7/12"]))
    _assert_contains_points(P, X0, direct)


def test_neural_pieces_of_different_widths():
    spec, *_ = _neural_spec("tanh", 2, 3, 2, seed=8)
    spec["pieces"][1]["W"] = [row[:1] for row in spec["pieces"][1]["W"]]
    spec["pieces"][1]["A"] = spec["pieces"][1]["A"][:1]
    spec["pieces"][1]["b"] = spec["pieces"][1]["b"][:1]
    P = neural_field(Schedule.from_json(spec))
    X0 = np.array([[0.5, -0.25], [-1.0, 2.0]])
    _assert_contains_points(P, X0, enclose_flow(P, X0))


def _sphere(act, seed, n=2, d=3):
    rng = np.random.default_rng(seed)
    pieces = [
        ("1/2", rng.standard_normal((d, d)), rng.standard_normal((d, d)), rng.standard_normal(d))
        for _ in range(n)
    ]
    P = sphere_neural_field(pieces, activation=act)
    _, W, U, b = pieces[0]
    return P, (W.tolist(), U.tolist(), b.tolist())


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_sphere_neural_ode(act):
    """x' = P_x^perp W s(U x + b) on S^2, two pieces, points normalised in float64 (on the
    sphere to 1e-15); the enclosure meets the sphere too (|x(t)| stays 1 to ~1e-15)."""
    P, _ = _sphere(act, seed=31)
    rng = np.random.default_rng(6)
    X0 = rng.standard_normal((3, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    assert np.all(np.abs(np.linalg.norm(X0, axis=1) - 1) < 1e-12)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=["1/3", "1/2"]))
    _assert_contains_points(P, X0, res)
    lo, hi = res.enclosures.lo, res.enclosures.hi
    near = np.sum(np.where(lo * hi <= 0, 0, np.minimum(lo * lo, hi * hi)), axis=-1)
    far = np.sum(np.maximum(lo * lo, hi * hi), axis=-1)
    assert np.all(near <= 1 + 1e-13) and np.all(far >= 1 - 1e-13)


# --- the sphere closed form: <x(t), z> = tanh(artanh <x0, z> + k t) --------------------------


def _sphere_point(a: Fraction, b: Fraction) -> list[Fraction]:
    """Inverse stereographic projection: an exact rational point of S^2."""
    n = 1 + a * a + b * b
    return [2 * a / n, 2 * b / n, (a * a + b * b - 1) / n]


def _toward(z, k):
    return field(
        3,
        lambda x, p: [
            p.k * (p.z0 - x[0] * total([x[0] * p.z0, x[1] * p.z1, x[2] * p.z2])),
            p.k * (p.z1 - x[1] * total([x[0] * p.z0, x[1] * p.z1, x[2] * p.z2])),
            p.k * (p.z2 - x[2] * total([x[0] * p.z0, x[1] * p.z1, x[2] * p.z2])),
        ],
        parameters=["k", "z0", "z1", "z2"],
        values=[k, *z],
        sphere=True,
    )


_RATS = st.fractions(min_value=-3, max_value=3, max_denominator=8)


@settings(max_examples=_n(5, 20), suppress_health_check=[HealthCheck.too_slow])
@given(
    _RATS,
    _RATS,
    _RATS,
    _RATS,
    st.sampled_from([Fraction(-3, 2), Fraction(-1, 2), Fraction(1), Fraction(2)]),
    st.sampled_from([Fraction(1, 2), Fraction(1)]),
)
@example(Fraction(1, 3), Fraction(0), Fraction(0), Fraction(1, 2), Fraction(2), Fraction(1))
def test_sphere_closed_form(a, b, c, e, k, T):
    x0, z = _sphere_point(a, b), _sphere_point(c, e)
    s0 = sum(u * v for u, v in zip(x0, z, strict=True))
    if abs(s0) == 1:
        return  # x0 = +-z: an equilibrium, artanh undefined
    f = _toward(z, k)
    ts = [T * j / 24 for j in range(1, 24)]
    res = enclose_flow(f, [[str(v) for v in x0]], save_at=SaveAt(T, ts))
    assert res.status is FlowStatus.SUCCESS, res.message
    with mpmath.workdps(50):
        base = mpmath.atanh(fref.mp(s0))
        for q, t in enumerate(_times(res)):
            want = mpmath.tanh(base + fref.mp(k) * fref.mp(t))
            lo, hi = res.enclosures.lo[q, 0], res.enclosures.hi[q, 0]
            dot_lo = sum(min(fref.mp(zi) * lo[i], fref.mp(zi) * hi[i]) for i, zi in enumerate(z))
            dot_hi = sum(max(fref.mp(zi) * lo[i], fref.mp(zi) * hi[i]) for i, zi in enumerate(z))
            tol = mpmath.mpf(10) ** -40
            assert dot_lo - tol <= want <= dot_hi + tol, (t, want, dot_lo, dot_hi)


# --- user fields from a strategy of expression graphs ----------------------------------------

_SMALL = st.integers(-8, 8).map(lambda k: Fraction(k, 8))
_UNARY = ("neg", "sqr", "exp", "tanh", "sigmoid", "sin", "cos", "sqrt1", "log1", "cube")
_BINARY = ("add", "sub", "mul", "div1", "div2", "divexp")
_NARY = ("lse", "total", "softmax")


def _recipes(d, n_params, depth):
    leaves = st.one_of(
        st.tuples(st.just("x"), st.integers(0, d - 1)),
        st.tuples(st.just("c"), _SMALL),
        *([st.tuples(st.just("p"), st.integers(0, n_params - 1))] if n_params else []),
    )

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(_UNARY), children),
            st.tuples(st.sampled_from(_BINARY), children, children),
            st.tuples(st.sampled_from(_NARY), st.lists(children, min_size=1, max_size=3)),
        )

    return st.recursive(leaves, extend, max_leaves=depth)


def _build(r, x, p, fn):
    """The recipe r as an expression of the builder (fn = certified.fields functions) or in
    mpmath (fn = _MP): the same formula written twice."""
    op = r[0]
    if op == "x":
        return x[r[1]]
    if op == "c":
        return r[1] if fn is _FIELD else fref.mp(r[1])
    if op == "p":
        return p[r[1]]
    if op in _NARY:
        items = [_build(c, x, p, fn) for c in r[1]]
        if op == "total":
            return (
                fn["total"](items) if any(_is_expr(v) for v in items) or fn is _MP else sum(items)
            )
        if not any(_is_expr(v) for v in items) and fn is _FIELD:
            items = [x[0] * 0 + v for v in items]  # the builder needs one expression
        return fn["logsumexp"](items) if op == "lse" else fn["softmax"](items)[0]
    a = _build(r[1], x, p, fn)
    if fn is _FIELD and not _is_expr(a):
        a = x[0] * 0 + a
    if op == "neg":
        return -a
    if op == "sqr":
        return a**2
    if op == "cube":
        return a**3
    if op in ("exp", "tanh", "sigmoid", "sin", "cos"):
        return fn[op](a)
    if op == "sqrt1":
        return fn["sqrt"](1 + a**2)
    if op == "log1":
        return fn["log"](1 + a**2)
    b = _build(r[2], x, p, fn)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if fn is _FIELD and not _is_expr(b):
        b = x[0] * 0 + b
    if op == "div1":
        return a / (1 + b**2)
    if op == "div2":
        return a / (2 + fn["cos"](b))
    return a / fn["exp"](b)  # divexp


def _is_expr(v):
    from certified.fields import Expr

    return isinstance(v, Expr)


_FIELD = {
    "exp": exp,
    "tanh": tanh,
    "sigmoid": sigmoid,
    "sin": sin,
    "cos": cos,
    "sqrt": sqrt,
    "log": log,
    "logsumexp": logsumexp,
    "softmax": softmax,
    "total": total,
}
_MP = {
    "exp": mpmath.exp,
    "tanh": mpmath.tanh,
    "sigmoid": lambda u: 1 / (1 + mpmath.exp(-u)),
    "sin": mpmath.sin,
    "cos": mpmath.cos,
    "sqrt": mpmath.sqrt,
    "log": mpmath.log,
    "logsumexp": lambda v: mpmath.log(sum(mpmath.exp(u) for u in v)),
    "softmax": lambda v: [mpmath.exp(u) / sum(mpmath.exp(w) for w in v) for u in v],
    "total": lambda v: sum(v),
}


@st.composite
def user_fields(draw, max_dim=3, depth=6):
    """A random smooth field: d in 1..3, 0..2 parameters over 1..2 pieces, outputs
    ``scale_i * recipe_i`` with scales 1/8..1/2, total time <= 1, initial points in [-1, 1]."""
    d = draw(st.integers(1, max_dim))
    n_params = draw(st.integers(0, 2))
    recipes = [draw(_recipes(d, n_params, depth)) for _ in range(d)]
    scales = [
        draw(st.sampled_from([Fraction(1, 8), Fraction(1, 4), Fraction(1, 2)])) for _ in range(d)
    ]
    n_pieces = draw(st.integers(1, 2))
    durations = [
        draw(st.sampled_from([Fraction(1, 4), Fraction(1, 3), Fraction(1, 2)]))
        for _ in range(n_pieces)
    ]
    values = [[draw(_SMALL) for _ in range(n_params)] for _ in range(n_pieces)]
    points = draw(
        st.lists(
            st.lists(st.integers(-16, 16).map(lambda k: k / 16), min_size=d, max_size=d),
            min_size=1,
            max_size=2,
        )
    )
    return {
        "d": d,
        "recipes": recipes,
        "scales": scales,
        "pieces": list(zip(durations, values, strict=True)),
        "points": np.array(points, dtype=float),
        "names": [f"q{j}" for j in range(n_params)],
    }


def _make_field(spec, sign=1, reverse=False):
    d, names = spec["d"], spec["names"]

    def f(x, p):
        ps = [getattr(p, n) for n in names]
        out = []
        for r, s in zip(spec["recipes"], spec["scales"], strict=True):
            v = _build(r, x, ps, _FIELD)
            out.append(sign * s * v if _is_expr(v) else x[0] * 0 + sign * s * v)
        return out

    vf = field(d, f, parameters=names)
    pieces = spec["pieces"][::-1] if reverse else spec["pieces"]
    return vf.on(*[(t, [str(v) for v in vals]) for t, vals in pieces])


_PINNED_FIELD = {
    "d": 2,
    "recipes": [
        ("lse", [("x", 1), ("sqr", ("x", 0)), ("p", 0)]),
        ("div2", ("tanh", ("mul", ("x", 0), ("x", 1))), ("sigmoid", ("x", 1))),
    ],
    "scales": [Fraction(1, 2), Fraction(1, 2)],
    "pieces": [(Fraction(1, 2), [Fraction(1, 4)]), (Fraction(1, 2), [Fraction(-1)])],
    "points": np.array([[0.5, -0.75], [-1.0, 1.0]]),
    "names": ["q0"],
}


@settings(max_examples=_n(4, 10), suppress_health_check=[HealthCheck.too_slow])
@given(user_fields())
@example(_PINNED_FIELD)
def test_user_fields_contain_the_reference(spec):
    """Generated fields: a SUCCESS encloses the 50-digit reference at the saved times and over
    the tube (step ends and midpoints); anything else carries a message. CI draws 4 fields
    (and the pinned one), the thorough profile 200."""
    P = _make_field(spec)
    T = P.total_time
    res = enclose_flow(P, spec["points"], save_at=SaveAt(ts=[T / 3], steps=True))
    if res.status is not FlowStatus.SUCCESS:
        assert res.message and "time" in res.message
        return
    _assert_contains_points(P, spec["points"], res)
    _assert_tube_contains(P, spec["points"], res, per_step=1)


@settings(max_examples=_n(6, 20), suppress_health_check=[HealthCheck.too_slow])
@given(user_fields(max_dim=2, depth=4))
def test_builder_records_the_formula(spec):
    """The graph of a generated field evaluates to the recipe written in mpmath."""
    P = _make_field(spec)
    g = P.field.to_json()
    with mpmath.workdps(50):
        for vals in [v for _, v in spec["pieces"]]:
            for x in spec["points"]:
                got = fref.evaluate(g, vals, list(x))
                xs = [mpmath.mpf(float(v)) for v in x]
                ps = [fref.mp(v) for v in vals]
                want = [
                    fref.mp(s) * _build(r, xs, ps, _MP)
                    for r, s in zip(spec["recipes"], spec["scales"], strict=True)
                ]
                for u, v in zip(got, want, strict=True):
                    assert abs(u - v) <= mpmath.mpf(10) ** -40 * max(1, abs(v))


@pytest.mark.slow
@settings(max_examples=_n(1, 4), suppress_health_check=list(HealthCheck))
@given(user_fields())
def test_user_fields_long_search(spec):
    test_user_fields_contain_the_reference.hypothesis.inner_test(spec)


# --- save_at and the tube --------------------------------------------------------------------


def _assert_tube_contains(problem, X0, res, per_step=4):
    """hints["tube"][s, i] contains the reference trajectory at per_step + 1 times of step s."""
    tube, spans = res.hints["tube"], res.hints["tube_times"]
    assert tube.shape[0] == len(spans) and tube.shape[1:] == (len(X0), problem.dimension)
    assert Fraction(spans[0][0]) == 0 and Fraction(spans[-1][1]) == Fraction(
        str(problem.total_time)
    )
    for (_, b), (c, _) in itertools.pairwise(spans):
        assert b == c
    samples = []
    for s, (a, b) in enumerate(spans):
        a, b = Fraction(a), Fraction(b)
        samples += [(a + (b - a) * Fraction(j, per_step), s) for j in range(per_step + 1)]
    times = sorted({t for t, _ in samples if t > 0})
    g = problem.field.to_json()
    for i, x0 in enumerate(X0):
        refs = dict(zip(times, fref.taylor_flow(g, problem, list(x0), times), strict=True))
        refs[Fraction(0)] = [fref.mp(v) for v in x0]
        for t, s in samples:
            bad = fref.outside(tube.lo[s, i], tube.hi[s, i], refs[t])
            assert not bad, f"point {i}, step {s} ({spans[s]}), t = {t}: coordinates {bad}"


def test_tube_contains_the_trajectory():
    X0 = np.array([[1.4, 2.4], [0.0, -1.0]])
    P = vanderpol().for_time(3)
    res = enclose_flow(P, X0, save_at=SaveAt(ts=["1/2", "3/2"], steps=True))
    _assert_contains_points(P, X0, res)
    _assert_tube_contains(P, X0, res)
    L = lorenz().for_time("1/2")
    X0 = np.array([[15.0, 15.0, 36.0]])
    res = enclose_flow(L, X0, save_at=SaveAt(steps=True))
    _assert_tube_contains(L, X0, res, per_step=2)


def test_tube_of_a_box():
    P = vanderpol().for_time(1)
    lo, hi = np.array([[1.3, 2.3]]), np.array([[1.4, 2.4]])
    res = enclose_flow(P, Interval(lo, hi), save_at=SaveAt(steps=True))
    assert res.status is FlowStatus.SUCCESS, res.message
    samples = _corners_and_samples(lo[0], hi[0], 12, np.random.default_rng(0))
    _assert_tube_contains(P, samples, _broadcast_tube(res, len(samples)), per_step=2)


class _Res:
    def __init__(self, hints):
        self.hints = hints


def _broadcast_tube(res, n):
    tube = res.hints["tube"]
    big = Interval(
        np.repeat(tube.lo, n, axis=1), np.repeat(tube.hi, n, axis=1)
    )  # one box, n samples
    return _Res({"tube": big, "tube_times": res.hints["tube_times"]})


# --- boxes and balls -------------------------------------------------------------------------

_CI_SAMPLES = 200


def _box_cases():
    spec, *_ = _neural_spec("tanh", 3, 8, 4, seed=7, durations=("1/4",))
    return {
        "lorenz-1e-4": (lorenz().for_time(1), [15, 15, 36], 1e-4),
        "vanderpol-1e-3": (vanderpol().for_time(2), [1.4, 2.4], 1e-3),
        "rossler-1e-2": (rossler().for_time(3), [0.0, -6.78, 0.02], 1e-2),
        "neural-tanh-1e-2": (neural_field(Schedule.from_json(spec)), [0.1, -0.2, 0.3], 1e-2),
    }


def _box_check(name, n):
    P, c, r = _box_cases()[name]
    c = np.asarray(c, float)
    lo, hi = c - r, c + r
    res = enclose_flow(P, Interval(lo[None], hi[None]), save_at=SaveAt(ts=[P.total_time / 2]))
    decided = _assert_box_contains_images(P, lo, hi, res, n)
    assert decided <= n  # how many the 30-digit reference decided (the rest: far inside)


@pytest.mark.parametrize("name", list(_box_cases()))
def test_box_contains_sampled_images(name):
    _box_check(name, _CI_SAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(_box_cases()))
def test_box_contains_a_thousand_sampled_images(name):
    """1,000 samples in the thorough profile (kept small in ci and dev)."""
    _box_check(name, 1000 if _DEFAULT >= 1000 else 30)


def test_several_boxes_at_once():
    """Boxes of different sizes in one call (shared steps): each its own images."""
    P = vanderpol().for_time("3/2")
    c = np.array([[1.4, 2.4], [-1.0, 0.5], [0.0, 0.0]])
    r = np.array([[1e-2], [1e-6], [0.1]])
    res = enclose_flow(P, Interval(c - r, c + r))
    for i in range(3):
        _assert_box_contains_images(P, c[i] - r[i], c[i] + r[i], res, 40, seed=i, i=i)


@pytest.mark.parametrize(("r", "T"), [(1e-3, 3), (0.1, 1), (0.25, "3/2")])
def test_box_centred_at_an_equilibrium(r, T):
    """Van der Pol, a box centred at the equilibrium (0, 0): the Taylor coefficients at the
    centre vanish, so the first step guess is the whole interval; the flow must still come back
    as SUCCESS or a status with a message (not an exception)."""
    P = vanderpol().for_time(T)
    res = enclose_flow(P, Interval(np.array([[-r, -r]]), np.array([[r, r]])))
    if res.status is FlowStatus.SUCCESS:
        _assert_box_contains_images(P, [-r, -r], [r, r], res, 40)
    else:
        assert res.message


@settings(max_examples=_n(4, 20), suppress_health_check=[HealthCheck.too_slow])
@given(user_fields(depth=5), st.sampled_from([1e-6, 1e-3, 1e-1]))
def test_user_field_boxes(spec, r):
    P = _make_field(spec)
    c = spec["points"][0]
    res = enclose_flow(P, Interval((c - r)[None], (c + r)[None]))
    if res.status is not FlowStatus.SUCCESS:
        assert res.message
        return
    _assert_box_contains_images(P, c - r, c + r, res, 24)


def _ball_samples(c, r, n, rng):
    d = c.size
    u = rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    scale = r * rng.uniform(0, 1, (n, 1)) ** (1 / d)
    scale[: n // 4] = r * (1 - 1e-12)  # a quarter on the boundary sphere
    return np.vstack([c[None], c + scale * u])


def test_balls():
    """Balls(centres, radii): the enclosures contain the images of points of the balls."""
    spec, *_ = _neural_spec("sigmoid", 2, 5, 2, seed=9)
    P = neural_field(Schedule.from_json(spec))
    centres = np.array([[0.3, -0.4], [1.0, 1.0]])
    radii = np.array([0.05, 0.0])
    res = enclose_flow(P, Balls(centres, radii))
    assert res.status is FlowStatus.SUCCESS, res.message
    rng = np.random.default_rng(2)
    for i in range(2):
        samples = _ball_samples(centres[i], radii[i], 60, rng)
        misses, _ = fref.box_misses(
            P.field.to_json(),
            P,
            samples,
            _times(res),
            res.enclosures.lo[:, i],
            res.enclosures.hi[:, i],
        )
        assert misses == []
    V = vanderpol().for_time(1)
    res = enclose_flow(V, Balls([["1/3", "2"]], ["1/100"]))
    samples = _ball_samples(np.array([1 / 3, 2.0]), 0.01 * (1 - 1e-9), 60, rng)
    misses, _ = fref.box_misses(
        V.field.to_json(), V, samples, _times(res), res.enclosures.lo[:, 0], res.enclosures.hi[:, 0]
    )
    assert misses == []


# --- time reversal -----------------------------------------------------------------------------


def _lorenz_builder(sign):
    return field(
        3,
        lambda x, p: [
            sign * 10 * (x[1] - x[0]),
            sign * (x[0] * (28 - x[2]) - x[1]),
            sign * (x[0] * x[1] - Fraction(8, 3) * x[2]),
        ],
    )


def _vanderpol_builder(sign):
    return field(2, lambda x, p: [sign * x[1], sign * ((1 - x[0] ** 2) * x[1] - x[0])])


def _neural_builder(sign, seed=12, d=3, p=5):
    rng = np.random.default_rng(seed)
    W, A, b = rng.standard_normal((d, p)) / 2, rng.standard_normal((p, d)), rng.standard_normal(p)
    return field(
        d,
        lambda x, q: [
            sign
            * total(
                [W[i, j] * tanh(total([A[j, k] * x[k] for k in range(d)]) + b[j]) for j in range(p)]
            )
            for i in range(d)
        ],
    )


def _reversal(make, x0, T):
    fwd = make(1).for_time(T)
    X0 = np.array([x0], dtype=float)
    res = enclose_flow(fwd, X0)
    assert res.status is FlowStatus.SUCCESS, res.message
    back = enclose_flow(make(-1).for_time(T), res.final)
    assert back.status is FlowStatus.SUCCESS, back.message
    lo, hi = back.final.lo[0], back.final.hi[0]
    assert np.all((lo <= X0[0]) & (X0[0] <= hi)), (lo, X0[0], hi)
    return res, back


@pytest.mark.parametrize(
    ("make", "x0", "T"),
    [
        (_lorenz_builder, [15.0, 15.0, 36.0], "1/2"),
        (_vanderpol_builder, [1.4, 2.4], 3),
        (_neural_builder, [0.3, -0.1, 0.7], 1),
    ],
    ids=["lorenz", "vanderpol", "neural"],
)
def test_time_reversal(make, x0, T):
    """Forward to T, then backward (the negated field, built with the builder) from the
    forward enclosure as a box: the result contains the start."""
    _reversal(make, x0, T)


@settings(max_examples=_n(6, 10), suppress_health_check=[HealthCheck.too_slow])
@given(user_fields())
@example(_PINNED_FIELD)
def test_time_reversal_of_user_fields(spec):
    fwd = _make_field(spec)
    X0 = spec["points"]
    res = enclose_flow(fwd, X0)
    if res.status is not FlowStatus.SUCCESS:
        assert res.message
        return
    back = enclose_flow(_make_field(spec, sign=-1, reverse=True), res.final)
    if back.status is not FlowStatus.SUCCESS:
        assert back.message
        return
    lo, hi = back.final.lo, back.final.hi
    assert np.all((lo <= X0) & (X0 <= hi)), (lo, X0, hi)


# --- arb at 128 bits ---------------------------------------------------------------------------


def test_lorenz_at_128_bits():
    """prec=128: Lorenz T = 1/2 width <= 1e-20, enclosing a 60-digit reference (exact bounds
    and the float64 enclosures both). (T = 1: the same steps twice as many, twice the time.)"""
    X0 = np.array([[15.0, 15.0, 36.0]])
    P = lorenz().for_time("1/2")
    res = enclose_flow(P, X0, prec=128)
    assert res.status is FlowStatus.SUCCESS, res.message
    assert res.bounds is not None and res.max_width() <= 1e-20
    _assert_contains_points(P, X0, res, dps=60)
    ref = fref.taylor_flow(P.field.to_json(), P, [15, 15, 36], [Fraction(1, 2)], dps=60)[0]
    with mpmath.workdps(60):
        for j in range(3):
            lo, hi = fref.mp(res.bounds[-1, 0, j, 0]), fref.mp(res.bounds[-1, 0, j, 1])
            assert lo <= ref[j] <= hi and hi - lo <= 1e-20


def test_every_operation_in_arb():
    """The arb path (checker's reference step) on a field using every operation, two pieces."""
    P = _every_op_field().on(("1/4", ["1/2"]), ("1/8", ["-3/4"]))
    X0 = np.array([[0.25, -0.5]])
    res = enclose_flow(P, X0, prec=80, save_at=SaveAt(ts=["1/6"]))
    _assert_contains_points(P, X0, res)
    assert res.max_width() < 1e-19
    res = enclose_flow(P, Interval(X0 - 1e-3, X0 + 1e-3), prec=80)
    _assert_box_contains_images(P, X0[0] - 1e-3, X0[0] + 1e-3, res, 30)
