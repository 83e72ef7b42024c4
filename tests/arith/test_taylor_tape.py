"""Soundness of the compiled float64 Taylor jets (:mod:`certified.arith.taylor`).

Reference: :func:`certified.checker.taylor.field_jets` in arb at 200 bits on exact points.
Every float64 enclosure must contain the reference midpoints of every point of its box (zero
misses), overlap arb's enclosure of the whole box, stay within a small factor of arb's 53-bit
widths on points, and match closed forms. A deliberately broken kernel (the mul convolution
dropping its j = 0 term) must be caught by the same checks.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
from fractions import Fraction

import flint
import numpy as np
import pytest
from flint import arb, fmpq
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from certified.arith import taylor
from certified.arith.taylor import _kernels as tk
from certified.arith.taylor import compile_tape, jets_float64, parameter_intervals
from certified.arith.taylor.tape import OPCODES
from certified.checker.taylor import OPERATIONS, ReplayError, field_jets, parse_field
from certified.errors import EmptyIntervalError, NonFiniteError, ShapeError

LORENZ = {
    "dimension": 3,
    "parameters": ["sigma", "rho", "beta"],
    "nodes": [
        ["x", 0], ["x", 1], ["x", 2], ["p", 0], ["p", 1], ["p", 2],
        ["sub", 1, 0], ["mul", 3, 6], ["sub", 4, 2], ["mul", 0, 8], ["sub", 9, 1],
        ["mul", 0, 1], ["mul", 5, 2], ["sub", 11, 12],
    ],
    "outputs": [7, 10, 13],
}  # fmt: skip
LORENZ_PARAMS = [10, 28, "8/3"]

CONSTS = ["1/3", "-2", "5/2", "3", "-1/7", "1*2^-3"]
POSITIVE_CONSTS = ["1/2", "1", "3/2"]
PARAMS = ["1/3", "2", "-7/10", "1/10"]


# --- the reference ---------------------------------------------------------------------------


def reference(field, params, point, seeds, order, prec=200):
    """field_jets at ``prec`` bits on an exact point (doubles read exactly); None when the
    reference itself leaves a domain."""
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        ps = [arb(fmpq(*Fraction(v).as_integer_ratio())) for v in params]
        x0 = [arb(float(v)) for v in point]
        S = None if seeds is None else [[arb(float(v)) for v in row] for row in seeds]
        try:
            return field_jets(field, ps, x0, S, order)
        except ReplayError:
            return None
    finally:
        flint.ctx.prec = old


def _exact(x) -> Fraction:
    """The exact value of an arb with radius 0 (a midpoint or a radius)."""
    man, exp = x.man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def misses(field, params, lo, hi, x_points, seeds, order, status):
    """(point, k, coordinate, component) where a reference ball (200 bits) at an exact point
    of the box lies outside the float64 enclosure of that box (by more than its radius)."""
    out = []
    for p, pts in enumerate(x_points):
        if status[p] != 0:
            continue
        for y in pts:
            ref = reference(field, params, y, None if seeds is None else seeds[p], order)
            if ref is None:
                continue
            for k in range(order + 1):
                for c in range(field.dimension):
                    for q, v in enumerate(ref[k][c]):
                        assert v.is_finite()
                        # exact results are points (radius 0): allow the reference's own
                        # radius (~2^-190), i.e. require the two enclosures to overlap
                        m, rad = _exact(v.mid()), _exact(v.rad())
                        if not (
                            Fraction(lo[k, p, c, q]) - rad <= m <= Fraction(hi[k, p, c, q]) + rad
                        ):
                            out.append((p, k, c, q, float(m), lo[k, p, c, q], hi[k, p, c, q]))
    return out


# --- random expression graphs ----------------------------------------------------------------


@st.composite
def graphs(draw, favour: tuple[str, ...] = ()):
    """Valid fields over every operation, domains kept safe: log, sqrt and divisors take
    exp(tanh(.)) or c + sqr(.) with c > 0; exp takes tanh(.) or a coordinate."""
    d = draw(st.integers(1, 3))
    n_par = draw(st.integers(0, 2))
    nodes = [["x", i] for i in range(d)] + [["p", j] for j in range(n_par)]
    pool = list(range(len(nodes)))

    def add(node):
        nodes.append(node)
        return len(nodes) - 1

    def positive(a):
        if draw(st.booleans()):
            return add(["exp", add(["tanh", a])])
        return add(["add", add(["c", draw(st.sampled_from(POSITIVE_CONSTS))]), add(["sqr", a])])

    ops = ["neg", "sqr", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos", "add", "sub",
           "mul", "div", "sum", "logsumexp", "c", *favour * 4]  # fmt: skip
    for _ in range(draw(st.integers(1, 7))):
        op = draw(st.sampled_from(ops))
        a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
        if op in ("neg", "sqr", "tanh", "sigmoid", "sin", "cos"):
            new = add([op, a])
        elif op == "exp":
            new = add(["exp", a if a < d else add(["tanh", a])])
        elif op in ("sqrt", "log"):
            new = add([op, positive(a)])
        elif op in ("add", "sub", "mul"):
            new = add([op, a, b])
        elif op == "div":
            new = add(["div", a, positive(b)])
        elif op in ("sum", "logsumexp"):
            new = add([op, *draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))])
        else:
            c = add(["c", draw(st.sampled_from(CONSTS))])
            new = add(["mul", c, a] if draw(st.booleans()) else ["div", a, positive(c)])
        pool.append(new)
    # the last node is an output, so that most of the graph is reached
    outputs = [pool[-1]] + [draw(st.sampled_from(pool[d:] or pool)) for _ in range(d - 1)]
    params = [draw(st.sampled_from(PARAMS)) for _ in range(n_par)]
    return {"dimension": d, "parameters": [f"p{j}" for j in range(n_par)], "nodes": nodes,
            "outputs": outputs}, params  # fmt: skip


def _inside(rng, lo, hi, n):
    """Both corners and n - 2 random points of the box (exact doubles)."""
    pts = [lo.copy(), hi.copy()]
    for _ in range(n - 2):
        pts.append(lo + (hi - lo) * rng.random(lo.shape))
    return [np.clip(p, lo, hi) for p in pts]


def check_graph(spec, params, seed, order, width, g, n_points=2, samples=3):
    field = parse_field(spec)
    tape = compile_tape(field)
    pl, ph = parameter_intervals(params)
    rng = np.random.default_rng(seed)
    d = field.dimension
    x_lo = rng.uniform(-1.5, 1.5, (n_points, d))
    x_hi = x_lo + width * rng.random((n_points, d))
    seeds = rng.uniform(-1, 1, (n_points, d, g)) if g else None
    lo, hi, status = jets_float64(tape, pl, ph, x_lo, x_hi, seeds, seeds, order=order)
    assert lo.shape == hi.shape == (order + 1, n_points, d, 1 + g)
    assert np.all(status == 0), status
    assert np.all(lo <= hi)
    pts = [_inside(rng, x_lo[p], x_hi[p], samples if width else 1) for p in range(n_points)]
    return field, lo, hi, misses(field, params, lo, hi, pts, seeds, order, status)


# --- (a) containment ---------------------------------------------------------------------------


@given(graph=graphs(), seed=st.integers(0, 2**32 - 1), order=st.integers(0, 6),
       g=st.integers(0, 2))  # fmt: skip
@example(graph=(LORENZ, LORENZ_PARAMS), seed=0, order=6, g=2)
def test_points_contain_reference(graph, seed, order, g):
    _, _, _, bad = check_graph(*graph, seed, order, 0.0, g)
    assert not bad, bad[:5]


@given(graph=graphs(), seed=st.integers(0, 2**32 - 1), order=st.integers(0, 5),
       g=st.integers(0, 2), width=st.sampled_from([1e-12, 1e-6, 1e-3, 0.1]))  # fmt: skip
def test_boxes_contain_every_point_and_overlap_arb(graph, seed, order, g, width):
    spec, params = graph
    field, lo, hi, bad = check_graph(spec, params, seed, order, width, 0)
    assert not bad, bad[:5]
    # the arb enclosure of the whole box (53 bits) overlaps the float64 one
    rng = np.random.default_rng(seed)
    d = field.dimension
    x_lo = rng.uniform(-1.5, 1.5, (2, d))
    x_hi = x_lo + width * rng.random((2, d))
    ps = [arb(fmpq(*Fraction(v).as_integer_ratio())) for v in params]
    for p in range(2):
        box = [arb(float(a)).union(arb(float(b))) for a, b in zip(x_lo[p], x_hi[p], strict=True)]
        try:
            ref = field_jets(field, ps, box, None, order)
        except ReplayError:
            continue
        for k in range(order + 1):
            for c in range(d):
                v = ref[k][c][0]
                if v.is_finite():
                    assert not (v < arb(lo[k, p, c, 0]) or v > arb(hi[k, p, c, 0]))


# --- (b) agreement with arb's 53-bit widths ----------------------------------------------------


@given(graph=graphs(), seed=st.integers(0, 2**32 - 1), order=st.integers(1, 6))
@example(graph=(LORENZ, LORENZ_PARAMS), seed=1, order=6)
@example(
    graph=(
        {"dimension": 1, "parameters": ["p0"], "outputs": [4],
         "nodes": [["x", 0], ["p", 0], ["sub", 0, 0], ["tanh", 2], ["exp", 3]]},
        ["1/3"],
    ),
    seed=0,
    order=2,
)  # fmt: skip
def test_point_widths_are_close_to_arb(graph, seed, order):
    spec, params = graph
    field = parse_field(spec)
    pl, ph = parameter_intervals(params)
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, (1, field.dimension))
    lo, hi, status = jets_float64(compile_tape(field), pl, ph, x, x, order=order)
    assert status[0] == 0
    ref = reference(field, params, x[0], None, order, prec=53)
    if ref is None:
        return
    # the rounding errors scale with the terms of the sums, not with their result (an exactly
    # cancelling sum is exact in arb): the largest coefficient is the scale
    scale = 1.0 + max(abs(float(v[0].mid())) for row in ref for v in row)
    for k in range(order + 1):
        for c in range(field.dimension):
            w = hi[k, 0, c, 0] - lo[k, 0, c, 0]
            arb_w = 2 * float(ref[k][c][0].rad())
            # loose: 64 x arb's width, or 2^-40 of the scale (arb is often exact where we round)
            assert w <= 64 * arb_w + 2.0**-40 * scale, (k, c, w, arb_w)


# --- (c) closed forms ----------------------------------------------------------------------


def _one(spec, params, x, order, **kw):
    field = parse_field(spec)
    pl, ph = parameter_intervals(params)
    x = np.array([[x]]) if np.ndim(x) == 0 else np.array([x], dtype=float)
    lo, hi, status = jets_float64(compile_tape(field), pl, ph, x, x, order=order, **kw)
    assert status[0] == 0
    return lo[:, 0, :, 0], hi[:, 0, :, 0]


def _contains(lo, hi, q: Fraction) -> bool:
    return Fraction(lo) <= q <= Fraction(hi)


def test_exponential_growth_is_x0_over_factorial():
    spec = {"dimension": 1, "parameters": [], "nodes": [["x", 0]], "outputs": [0]}
    lo, hi = _one(spec, [], 0.1, 25)
    for k in range(26):
        q = Fraction(0.1) / math.factorial(k)
        assert _contains(lo[k, 0], hi[k, 0], q)
        assert hi[k, 0] - lo[k, 0] <= 1e-14 * float(q)


def test_one_plus_x_squared_gives_the_tangent_series():
    spec = {"dimension": 1, "parameters": [],
            "nodes": [["x", 0], ["c", 1], ["sqr", 0], ["add", 1, 2]], "outputs": [3]}  # fmt: skip
    order = 21
    lo, hi = _one(spec, [], 0.0, order)
    # tan: t_{k+1} = (delta_k0 + sum_j t_j t_{k-j}) / (k + 1), exactly
    t = [Fraction(0)]
    for k in range(order):
        t.append((int(k == 0) + sum(t[j] * t[k - j] for j in range(k + 1))) / (k + 1))
    assert t[3] == Fraction(1, 3) and t[5] == Fraction(2, 15)
    for k in range(order + 1):
        assert _contains(lo[k, 0], hi[k, 0], t[k])
        assert hi[k, 0] - lo[k, 0] <= 1e-13 * float(t[k]) + 1e-300


def test_lorenz_matches_arb_at_200_bits():
    field = parse_field(LORENZ)
    pl, ph = parameter_intervals(LORENZ_PARAMS)
    x = np.array([[1.0, 2.0, 20.0], [-5.3, 7.1, 30.2]])
    order = 20
    seeds = np.broadcast_to(np.eye(3), (2, 3, 3)).copy()
    for s in (None, seeds):
        lo, hi, status = jets_float64(compile_tape(field), pl, ph, x, x, s, s, order=order)
        assert np.all(status == 0)
        bad = misses(field, LORENZ_PARAMS, lo, hi, [[x[0]], [x[1]]], s, order, status)
        assert not bad, bad[:5]
        rel = (hi - lo) / (np.abs(hi) + np.abs(lo) + 1e-300)
        assert rel[:, :, :, 0].max() < 1e-11


# --- (d) a broken kernel is caught ---------------------------------------------------------------


def _mutated_tape_jets(tmp_path_factory, name, good, bad):
    """tape_jets compiled from the kernel source with the one line ``good`` replaced."""
    src = inspect.getsource(tk)
    assert src.count(good) == 1
    path = tmp_path_factory.mktemp(name) / f"{name}_taylor_kernels.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location(f"{name}_taylor_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tape_jets


@pytest.fixture(scope="module")
def broken_tape_jets(tmp_path_factory):
    """tape_jets with the mul convolution dropping its j = 0 term."""
    good = "n = _dconv(ACC, M, R, a, b, k, q, 0, k, False, 1.0, p0, p1)"
    return _mutated_tape_jets(
        tmp_path_factory, "broken", good, good.replace("q, 0, k,", "q, 1, k,")
    )


@pytest.fixture(scope="module")
def no_rounding_tape_jets(tmp_path_factory):
    """tape_jets whose closed sums forget the rounding error of their midpoint (the radius is
    the propagated radii only)."""
    good = "r = ((abs(e) + t) + ACC[_P, p]) * F"
    return _mutated_tape_jets(tmp_path_factory, "norounding", good, "r = ACC[_P, p] * F")


def _caught(test, **strategies) -> bool:
    run = settings(database=None, phases=[Phase.generate], report_multiple_bugs=False,
                   max_examples=60)(given(**strategies)(test))  # fmt: skip
    try:
        run()
    except AssertionError:
        return True
    return False


def _caught_only_with(monkeypatch, jets) -> None:
    """Lorenz jets contain their references with the real kernel, and not with ``jets``."""

    def prop(seed):
        _, _, _, bad = check_graph(LORENZ, LORENZ_PARAMS, seed, 4, 0.0, 1)
        assert not bad

    assert not _caught(prop, seed=st.integers(0, 2**32 - 1))
    monkeypatch.setattr(tk, "tape_jets", jets)
    assert _caught(prop, seed=st.integers(0, 2**32 - 1))


def test_a_wrong_coefficient_is_caught(monkeypatch):
    """The default run's check that the containment property can fail (the kernel mutations,
    which recompile the numba module, are behind the ``recompile`` marker): every order-2
    coefficient moved by a relative 1e-9, outside the rounding error, is caught."""
    good = tk.tape_jets

    def shifted(*args):
        lo, hi, status = good(*args)
        if lo.shape[0] > 2:
            step = 1e-9 * np.maximum(np.abs(lo[2]), np.abs(hi[2])) + 1e-9
            lo[2] += step
            hi[2] += step
        return lo, hi, status

    _caught_only_with(monkeypatch, shifted)


@pytest.mark.recompile  # compiles a mutated kernel module (minutes): `pytest -m recompile`
def test_broken_mul_recurrence_is_caught(monkeypatch, broken_tape_jets):
    _caught_only_with(monkeypatch, broken_tape_jets)

    def prop_graphs(graph, seed):
        _, _, _, bad = check_graph(*graph, seed, 4, 0.0, 0)
        assert not bad

    assert _caught(prop_graphs, graph=graphs(favour=("mul",)), seed=st.integers(0, 2**32 - 1))


# --- (e) domain errors and bad input ------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "x", "code"),
    [
        ([["x", 0], ["log", 0]], [[-1.0, 1.0], [0.5, 2.0]], tk.DOMAIN),
        ([["x", 0], ["sqrt", 0]], [[0.0, 1.0], [0.5, 2.0]], tk.DOMAIN),
        ([["x", 0], ["c", 1], ["div", 1, 0]], [[-1.0, 1.0], [0.5, 2.0]], tk.DOMAIN),
        ([["x", 0], ["c", 1], ["sub", 0, 1], ["div", 0, 2]], [[0.5, 1.5], [2.0, 3.0]], tk.DOMAIN),
        ([["x", 0], ["exp", 0]], [[700.0, 710.0], [0.0, 1.0]], tk.OVERFLOW),
        ([["x", 0], ["sqr", 0], ["sqr", 1], ["sqr", 2]], [[1e80, 1e80], [1.0, 1.0]], tk.OVERFLOW),
    ],
)
def test_domain_errors_set_the_status_of_that_point_only(nodes, x, code):
    spec = {"dimension": 1, "parameters": [], "nodes": nodes, "outputs": [len(nodes) - 1]}
    tape = compile_tape(parse_field(spec))
    x = np.array(x)
    lo, hi, status = jets_float64(tape, [], [], x[:, :1], x[:, 1:], order=3)
    assert list(status) == [code, 0]
    assert taylor.STATUS[code] in ("domain", "overflow")
    assert np.all(lo[:, 0] == -np.inf) and np.all(hi[:, 0] == np.inf)
    assert np.all(np.isfinite(lo[:, 1])) and np.all(np.isfinite(hi[:, 1]))


def test_bad_inputs_are_rejected():
    tape = compile_tape(parse_field(LORENZ))
    pl, ph = parameter_intervals(LORENZ_PARAMS)
    x = np.zeros((2, 3))
    with pytest.raises(ShapeError):
        jets_float64(tape, pl, ph, np.zeros((2, 2)), np.zeros((2, 2)), order=2)
    with pytest.raises(NonFiniteError):
        jets_float64(tape, pl, ph, x, x + np.nan, order=2)
    with pytest.raises(EmptyIntervalError):
        jets_float64(tape, pl, ph, x + 1, x, order=2)
    with pytest.raises(ShapeError):
        jets_float64(tape, pl[:2], ph[:2], x, x, order=2)
    with pytest.raises(ValueError):
        jets_float64(tape, pl, ph, x, x, order=-1)


def test_opcodes_match_the_kernel():
    assert [OPCODES[op] for op in OPERATIONS] == list(range(len(OPERATIONS)))
    names = ["X_", "P_", "C_", "NEG", "SQR", "SQRT", "EXP", "LOG", "TANH", "SIGMOID", "SIN",
             "COS", "ADD", "SUB", "MUL", "DIV", "SUM", "LSE"]  # fmt: skip
    assert [getattr(tk, n) for n in names] == [OPCODES[op] for op in OPERATIONS]


def test_parameter_and_constant_intervals_are_outward():
    lo, hi = parameter_intervals(["1/3", 2, "0.1"])
    for a, b, q in zip(lo, hi, [Fraction(1, 3), Fraction(2), Fraction(1, 10)], strict=True):
        assert Fraction(a) <= q <= Fraction(b)
    assert lo[1] == hi[1] == 2.0
    spec = {"dimension": 1, "parameters": [], "nodes": [["x", 0], ["c", "1/3"]], "outputs": [1]}
    tape = compile_tape(parse_field(spec))
    assert Fraction(tape.const_lo[0]) < Fraction(1, 3) < Fraction(tape.const_hi[0])


@pytest.mark.recompile  # compiles a mutated kernel module (minutes): `pytest -m recompile`
def test_radius_without_the_rounding_term_is_caught(monkeypatch, no_rounding_tape_jets):
    def prop_graphs(graph, seed):
        _, _, _, bad = check_graph(*graph, seed, 4, 0.0, 1)
        assert not bad

    monkeypatch.setattr(tk, "tape_jets", no_rounding_tape_jets)
    assert _caught(prop_graphs, graph=graphs(favour=("mul",)), seed=st.integers(0, 2**32 - 1))


# --- (f) ball arithmetic: as tight as arb's 53-bit balls at points -----------------------------

VDP = {
    "dimension": 2,
    "parameters": ["mu"],
    "nodes": [
        ["x", 0], ["x", 1], ["p", 0], ["c", 1], ["sqr", 0], ["sub", 3, 4], ["mul", 2, 5],
        ["mul", 6, 1], ["sub", 7, 0],
    ],
    "outputs": [1, 8],
}  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "params", "x"),
    [
        (LORENZ, LORENZ_PARAMS, [15.0, 15.0, 36.0]),
        (LORENZ, LORENZ_PARAMS, [1.0, 2.0, 20.0]),
        (LORENZ, LORENZ_PARAMS, [-5.3, 7.1, 30.2]),
        (VDP, ["1"], [2.0, 0.0]),
        (VDP, ["1"], [0.3, -1.7]),
        (VDP, ["1/3"], [2.0, 0.5]),
    ],
)
@pytest.mark.parametrize("with_seeds", [False, True])
def test_point_widths_within_twice_arb_53_bits(spec, params, x, with_seeds):
    """At points, every coefficient (and dual part) is at most twice as wide as arb's 53-bit
    ball from the same recurrences, and exact (radius 0) wherever arb's is."""
    field = parse_field(spec)
    pl, ph = parameter_intervals(params)
    x = np.array([x])
    d = field.dimension
    seeds = np.eye(d)[None] if with_seeds else None
    order = 20
    lo, hi, status = jets_float64(compile_tape(field), pl, ph, x, x, seeds, seeds, order=order)
    assert status[0] == 0
    ref = reference(field, params, x[0], None if seeds is None else seeds[0], order, prec=53)
    for k in range(order + 1):
        for c in range(d):
            for q in range(lo.shape[3]):
                w = Fraction(hi[k, 0, c, q]) - Fraction(lo[k, 0, c, q])
                arb_w = 2 * _exact(ref[k][c][q].rad())
                assert w <= 2 * arb_w, (k, c, q, float(w), float(arb_w))


def test_exact_operations_add_no_radius():
    """Lorenz at (15, 15, 36): x_1 = (0, -135, 225 - 96) (the last through 8/3, inexact), and
    sigma (y - x) stays exactly 0 at every order; as in arb."""
    lo, hi = _one(LORENZ, LORENZ_PARAMS, [15.0, 15.0, 36.0], 6)
    assert lo[1, 0] == hi[1, 0] == 0.0
    assert lo[1, 1] == hi[1, 1] == -135.0
    assert lo[1, 2] < 129.0 < hi[1, 2]
    # exact products, sums and halvings: x' = x^2 from 1/2 has coefficients 2^-(k+1)
    spec = {"dimension": 1, "parameters": [], "nodes": [["x", 0], ["sqr", 0]], "outputs": [1]}
    lo, hi = _one(spec, [], 0.5, 12)
    for k in range(13):
        assert lo[k, 0] == hi[k, 0] == 2.0 ** -(k + 1)


def test_closed_sum_radius_is_an_upper_bound_at_random_balls():
    """The ball of a sum of products from random balls contains the exact sum for every
    choice of corners (the lemma of #taylor-ball, checked in exact rationals)."""
    rng = np.random.default_rng(7)
    n_terms, N = 5, 8
    M = np.zeros((2 * n_terms + 2, 1, 1, N))
    R = np.zeros_like(M)
    for t in range(2 * n_terms):
        M[t, 0, 0] = rng.uniform(-3, 3, N) * 2.0 ** rng.integers(-20, 20, N)
        R[t, 0, 0] = np.where(rng.random(N) < 0.5, 0.0, np.abs(M[t, 0, 0]) * 1e-9)
    ACC = np.zeros((4, N))
    st = np.zeros(N, np.int64)
    for t in range(n_terms):
        tk._acc(ACC, M, R, t, 0, 0, n_terms + t, 0, 0, float(t - 2 or 3), 0, N)
    tk._close(ACC, n_terms, M, R, st, 2 * n_terms, 0, 0, 0, N)
    for p in range(N):
        m, r = Fraction(M[2 * n_terms, 0, 0, p]), Fraction(R[2 * n_terms, 0, 0, p])
        for corner in range(8):
            total = Fraction(0)
            for t in range(n_terms):
                sa = 1 if (corner >> (t % 3)) & 1 else -1
                a = Fraction(M[t, 0, 0, p]) + sa * Fraction(R[t, 0, 0, p])
                b = Fraction(M[n_terms + t, 0, 0, p]) - sa * Fraction(R[n_terms + t, 0, 0, p])
                total += (t - 2 or 3) * a * b
            assert abs(total - m) <= r


# --- (g) the error-free transformations and the branch-free helpers -----------------------------


@given(
    a=st.floats(-1e150, 1e150, allow_subnormal=False),
    b=st.floats(-1e150, 1e150, allow_subnormal=False),
)
@example(a=1.0 + 2.0**-52, b=1.0 - 2.0**-52)
@example(a=2.0**-480 * 3.0, b=-(2.0**-480) * 5.0)
def test_two_product_by_fma_is_exact(a, b):
    """x + f == a b exactly whenever |a b| >= 2^-968 (the kernel's floor) or a factor is 0."""
    if a != 0.0 and b != 0.0 and abs(Fraction(a) * Fraction(b)) < Fraction(2) ** -968:
        return
    x = a * b
    assert Fraction(x) + Fraction(tk._prod_err(a, b, x)) == Fraction(a) * Fraction(b)


def test_fma_rounds_once():
    e = 2.0**-52
    assert tk.fma(1.0 + e, 1.0 - e, -1.0) == -(2.0**-104)
    assert tk.fma(3.0, 1.0 / 3.0, -1.0) == Fraction(3) * Fraction(1.0 / 3.0) - 1


@pytest.mark.parametrize(
    ("s", "m", "r", "out"),
    [
        (tk.OK, 1.0, 0.0, tk.OK),
        (tk.OK, math.inf, 0.0, tk.OVERFLOW),
        (tk.OK, 1.0, math.nan, tk.OVERFLOW),
        (tk.OK, -math.inf, 1.0, tk.OVERFLOW),
        (tk.DOMAIN, math.nan, 0.0, tk.DOMAIN),
        (tk.BROKEN, 1.0, 1.0, tk.BROKEN),
    ],
)
def test_status_keeps_the_first_failure(s, m, r, out):
    assert tk._stat(s, m, r) == out


@pytest.mark.parametrize("m", [0.0, 2.0**-500, -(2.0**-481), 2.0**-480, 1.0, -3.0])
@pytest.mark.parametrize("r", [0.0, 2.0**-600, 2.0**-480, 1e-3])
def test_floor_encloses_and_floors(m, r):
    m2, r2 = tk._floor(m, r)
    assert m2 == 0.0 or abs(m2) >= 2.0**-480
    assert r2 == 0.0 or r2 >= 2.0**-480
    assert abs(Fraction(m2) - Fraction(m)) + Fraction(r) <= Fraction(r2)
    if abs(m) >= 2.0**-480 and (r == 0.0 or r >= 2.0**-480):
        assert (m2, r2) == (m, r)


# --- (h) two products per pass over the accumulators ---------------------------------------------


@pytest.mark.parametrize(("w", "v"), [(1.0, 1.0), (-2.0, 1.0), (2.0, 7.0), (-5.0, 6.0)])
def test_paired_products_equal_two_single_ones(w, v):
    """_acc2 is two _acc calls fused into one pass: the same accumulators, bit for bit."""
    rng = np.random.default_rng(int(abs(w * 10 + v)))
    N = 37
    M = rng.uniform(-3, 3, (4, 2, 2, N)) * 2.0 ** rng.integers(-30, 30, (4, 2, 2, N))
    R = np.where(rng.random(M.shape) < 0.3, 0.0, np.abs(M) * 1e-10)
    one = np.zeros((4, N))
    two = np.zeros((4, N))
    one[:] = two[:] = rng.uniform(-1, 1, (4, N))
    one[2:] = two[2:] = np.abs(one[2:])
    tk._acc(one, M, R, 0, 0, 1, 1, 1, 0, w, 0, N)
    tk._acc(one, M, R, 2, 1, 0, 3, 0, 1, v, 0, N)
    tk._acc2(two, M, R, 0, 0, 1, 1, 1, 0, w, 2, 1, 0, 3, 0, 1, v, 0, N)
    assert np.array_equal(one, two)


@pytest.fixture(scope="module")
def mispaired_tape_jets(tmp_path_factory):
    """tape_jets whose paired convolution takes b_{k-j} for both products of a pair."""
    good = "_acc2(ACC, M, R, j, a, 0, k - j, b, 0, w, j + 1, a, 0, k - j - 1, b, 0, v, p0, p1)"
    return _mutated_tape_jets(
        tmp_path_factory, "mispaired", good, good.replace("k - j - 1, b", "k - j, b")
    )


@pytest.fixture(scope="module")
def unpaired_tail_tape_jets(tmp_path_factory):
    """tape_jets whose paired convolution forgets the last term of an odd count."""
    good = "_acc(ACC, M, R, j, a, 0, k - j, b, 0, sign * (float(j) if weighted else 1.0), p0, p1)"
    return _mutated_tape_jets(tmp_path_factory, "unpaired", good, "pass")


@pytest.mark.recompile  # compiles a mutated kernel module (minutes): `pytest -m recompile`
@pytest.mark.parametrize("name", ["mispaired_tape_jets", "unpaired_tail_tape_jets"])
def test_broken_pairing_is_caught(monkeypatch, request, name):
    def prop(seed):
        _, _, _, bad = check_graph(LORENZ, LORENZ_PARAMS, seed, 4, 0.0, 0)
        assert not bad

    monkeypatch.setattr(tk, "tape_jets", request.getfixturevalue(name))
    assert _caught(prop, seed=st.integers(0, 2**32 - 1))
