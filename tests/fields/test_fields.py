"""Expression-graph vector fields: the builder, VectorField / PiecewiseField, read_field, float
evaluation, and bad input (each with its exception class and a message naming the field)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from certified.checker.taylor import Rejected, field_jets, parse_field
from certified.errors import (
    CertifiedError,
    InputError,
    NonFiniteError,
    NumberFormatError,
    ShapeError,
)
from certified.fields import (
    EXAMPLES,
    Expr,
    FieldError,
    PiecewiseField,
    VectorField,
    cos,
    exp,
    field,
    log,
    logsumexp,
    lorenz,
    read_field,
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
from certified.fields.expr import GraphBuilder
from certified.io import InputFileError

RNG = np.random.default_rng(20240611)


def graph(nodes, outputs=(0, 1), parameters=(), dimension=2):
    return {
        "dimension": dimension,
        "parameters": list(parameters),
        "nodes": [list(n) for n in nodes],
        "outputs": list(outputs),
    }


def ops(f: VectorField) -> list[str]:
    return [n[0] for n in f.graph["nodes"]]


# --- the builder ------------------------------------------------------------------------------


def test_operators_build_the_expected_nodes_and_evaluate_like_numpy():
    f = field(
        2,
        lambda x, p: [
            (x[0] + 1) * (2 - x[1]) / (3 + x[0] * x[0]) - x[1] / 4,
            -x[0] + (+x[1]) - 1.5 * x[0] + x[1] * 2 + np.float64(0.25) * x[1] + 1 / (2 + x[1]),
        ],
    )
    assert set(ops(f)) >= {"x", "c", "add", "sub", "mul", "div", "neg"}
    X = RNG.uniform(-1, 1, size=(50, 2))
    x, y = X[:, 0], X[:, 1]
    want = np.stack(
        [
            (x + 1) * (2 - y) / (3 + x * x) - y / 4,
            -x + y - 1.5 * x + y * 2 + 0.25 * y + 1 / (2 + y),
        ],
        axis=1,
    )
    np.testing.assert_allclose(f.evaluate(X), want, rtol=1e-14, atol=1e-15)


def test_reflected_operators_keep_the_order_of_operands():
    b = GraphBuilder(1)
    x = b.x[0]
    assert b.nodes[(2 - x).index] == ["sub", b.const(2).index, x.index]
    assert b.nodes[(x - 2).index] == ["sub", x.index, b.const(2).index]
    assert b.nodes[(2 / x).index] == ["div", b.const(2).index, x.index]
    assert b.nodes[(3 * x).index][0] == "mul"


def test_power_by_squaring():
    b = GraphBuilder(1)
    x = b.x[0]
    assert (x**1) is x
    assert b.nodes[(x**0).index] == ["c", 1]
    assert b.nodes[(x**2).index] == ["sqr", x.index]
    cube = x**3
    assert b.nodes[cube.index] == ["mul", (x**2).index, x.index]
    f = field(1, lambda x, p: [x[0] ** 7 - 2 * x[0] ** 4 + x[0] ** 0])
    assert ops(f).count("sqr") >= 2 and "pow" not in ops(f)
    X = RNG.uniform(-1.5, 1.5, size=(30, 1))
    np.testing.assert_allclose(f.evaluate(X)[:, 0], X[:, 0] ** 7 - 2 * X[:, 0] ** 4 + 1, rtol=1e-13)


@pytest.mark.parametrize("k", [-1, 0.5, 2.0, True, "2", Fraction(1, 2)])
def test_power_refuses_exponents_that_are_not_integers_ge_0(k):
    b = GraphBuilder(1)
    with pytest.raises(InputError, match="power"):
        b.x[0] ** k


def test_functions_build_their_nodes_and_evaluate_like_numpy():
    f = field(
        3,
        lambda x, p: [
            sin(x[0]) * cos(x[1]) + exp(x[2]) - log(2 + x[0]) + sqrt(3 + x[1]),
            tanh(x[0] - x[2]) + sigmoid(2 * x[1]) + total([x[0], x[1], x[2], 1]),
            logsumexp([x[0], 2 * x[1], x[2] - 1]) + total(softmax([x[0], x[1], x[2]])) * x[0],
        ],
    )
    for op in ("sin", "cos", "exp", "log", "sqrt", "tanh", "sigmoid", "sum", "logsumexp"):
        assert op in ops(f), op
    X = RNG.uniform(-1, 1, size=(40, 3))
    a, b, c = X.T
    lse = np.log(np.exp(a) + np.exp(2 * b) + np.exp(c - 1))
    want = np.stack(
        [
            np.sin(a) * np.cos(b) + np.exp(c) - np.log(2 + a) + np.sqrt(3 + b),
            np.tanh(a - c) + 1 / (1 + np.exp(-2 * b)) + (a + b + c + 1),
            lse + a,  # the softmax weights sum to 1
        ],
        axis=1,
    )
    np.testing.assert_allclose(f.evaluate(X), want, rtol=1e-13, atol=1e-14)


def test_softmax_weights_are_exp_of_the_shift_by_logsumexp():
    b = GraphBuilder(2)
    w = softmax([b.x[0], b.x[1], 0])
    assert len(w) == 3 and all(isinstance(e, Expr) for e in w)
    lse = logsumexp([b.x[0], b.x[1], 0])
    for e, item in zip(w, [b.x[0], b.x[1], b.const(0)], strict=True):
        assert b.nodes[e.index][0] == "exp"
        assert b.nodes[b.nodes[e.index][1]] == ["sub", item.index, lse.index]


def test_logsumexp_does_not_overflow_in_float_evaluation():
    f = field(1, lambda x, p: [logsumexp([x[0], x[0] + 1, 2 * x[0]])])
    X = np.array([[800.0], [-800.0], [0.0]])
    got = f.evaluate(X)[:, 0]
    assert np.all(np.isfinite(got))
    with mpmath.workdps(30):
        for xv, g in zip(X[:, 0], got, strict=True):
            xm = mpmath.mpf(xv)
            ref = mpmath.log(mpmath.exp(xm) + mpmath.exp(xm + 1) + mpmath.exp(2 * xm))
            assert abs(g - float(ref)) <= 1e-12 * max(1, abs(float(ref)))


def test_total_of_one_item_is_the_item_and_of_several_one_node():
    b = GraphBuilder(3)
    assert total([b.x[1]]) is b.x[1]
    s = total(list(b.x))
    assert b.nodes[s.index] == ["sum", 0, 1, 2]


def test_equal_subexpressions_are_stored_once():
    b = GraphBuilder(2, ["a"])
    x, a = b.x, b.param("a")
    e1 = sin(x[0] * x[1]) + a
    n = len(b.nodes)
    e2 = sin(x[0] * x[1]) + a
    assert e1.index == e2.index and len(b.nodes) == n  # nothing new was recorded
    assert b.param("a").index == a.index
    assert len({b.const(v).index for v in (1, 1.0, "1", "2/2", Fraction(1), np.float64(1))}) == 1
    assert b.const("1/10").index != b.const(0.1).index  # 1/10 is not the double 0.1
    f = field(2, lambda x, p: [sin(x[0]) * sin(x[0]), sin(x[0]) + x[1] * x[1] + x[1] * x[1]])
    nodes = [tuple(n) for n in f.graph["nodes"]]
    assert len(nodes) == len(set(nodes))  # every node distinct
    assert ops(f).count("sin") == 1


def test_an_expression_has_no_truth_value():
    b = GraphBuilder(1)
    x = b.x[0]
    with pytest.raises(TypeError, match="no truth value"):
        bool(x)
    with pytest.raises(TypeError, match="no truth value"):
        if x:  # pragma: no cover - the test is that this line raises
            pass
    with pytest.raises(TypeError, match="no truth value"):
        field(1, lambda x, p: [x[0] if x[0] else -x[0]])
    with pytest.raises(TypeError):
        x < 1  # noqa: B015 - no ordering either


def test_the_builder_refuses_what_is_not_a_field_expression():
    b, other = GraphBuilder(1), GraphBuilder(1)
    with pytest.raises(InputError, match="another field"):
        b.x[0] + other.x[0]
    with pytest.raises(InputError, match="sin"):
        sin(1.0)
    with pytest.raises(InputError, match="logsumexp"):
        logsumexp([1, 2])
    with pytest.raises(InputError, match="sum"):
        total([])
    with pytest.raises(InputError, match="dimension"):
        GraphBuilder(0)
    with pytest.raises(InputError, match="not declared"):
        b.param("gamma")


def test_an_undeclared_parameter_name_is_an_input_error_naming_it():
    # `p.b` where only "a" is declared: a CertifiedError (InputError) naming 'b', not a bare
    # AttributeError from the parameter namespace
    with pytest.raises(InputError, match="'b'"):
        field(2, lambda x, p: [p.b * x[0], x[1]], parameters=["a"])


def test_builder_constants_must_be_finite_numbers():
    with pytest.raises(NonFiniteError, match="constant"):
        field(1, lambda x, p: [x[0] + float("nan")])
    with pytest.raises(NonFiniteError, match="constant"):
        field(1, lambda x, p: [x[0] * 1e400])  # 1e400 is inf as a float
    with pytest.raises(NonFiniteError, match="constant"):
        field(1, lambda x, p: [x[0] + "nan"])
    with pytest.raises(NumberFormatError, match="constant"):
        field(1, lambda x, p: [x[0] + "one"])
    with pytest.raises(InputError, match="constant"):
        field(1, lambda x, p: [x[0] + True])


def test_outputs_of_the_wrong_length():
    with pytest.raises(InputError, match=r"outputs.*1 components for dimension 2"):
        field(2, lambda x, p: [x[0]])
    with pytest.raises(InputError, match=r"outputs.*3 components"):
        field(2, lambda x, p: [x[0], x[1], x[0]])
    with pytest.raises(FieldError, match=r"field\.outputs: expected 2 elements, got 1"):
        VectorField(graph([["x", 0], ["x", 1]], outputs=[0]))


def test_duplicate_parameter_names():
    with pytest.raises(InputError, match="parameters"):
        field(1, lambda x, p: [p.a * x[0]], parameters=["a", "a"])
    with pytest.raises(InputError, match="parameters"):
        field(1, lambda x, p: [x[0]], parameters=["a", ""])
    with pytest.raises(FieldError, match=r"field\.parameters\[1\]"):
        VectorField(graph([["x", 0], ["x", 1]], parameters=["a", "a"]))


def test_parameter_value_counts_must_match():
    with pytest.raises(ShapeError, match=r"values.*expected 1 values"):
        field(1, lambda x, p: [p.a * x[0]], parameters=["a"], values=[1, 2])
    with pytest.raises(ShapeError, match=r"values.*expected 0 values"):
        field(1, lambda x, p: [x[0]], values=[1])
    f = vanderpol()
    with pytest.raises(ShapeError, match=r"pieces\[0\]\.parameters.*expected 1"):
        f.on((1, [1, 2]))
    with pytest.raises(ShapeError, match=r"pieces\[1\]\.parameters"):
        f.on((1, [1]), (1, []))
    with pytest.raises(FieldError, match=r"pieces\[0\]\.parameters.*unknown \['nu'\]"):
        f.on((1, {"mu": 1, "nu": 2}))
    with pytest.raises(FieldError, match=r"missing \['mu'\]"):
        f.on((1, {}))
    with pytest.raises(ShapeError, match="expected 1 values"):
        f.evaluate(np.zeros((1, 2)), values=[1, 2])


@pytest.mark.parametrize("duration", [0, -1, "-1/2", "0/3"])
def test_durations_must_be_positive(duration):
    with pytest.raises(InputError, match="duration"):
        vanderpol().on((duration, [1]))
    with pytest.raises(InputError, match="duration"):
        vanderpol().on((1, [1]), (duration, [1]))


def test_a_piecewise_field_needs_pieces_and_values():
    with pytest.raises(ShapeError, match="pieces"):
        PiecewiseField(vanderpol(), ())
    bare = field(1, lambda x, p: [p.k * x[0]], parameters=["k"])
    with pytest.raises(FieldError, match="no default values"):
        bare.for_time(1)
    with pytest.raises(NonFiniteError, match=r"pieces\[0\]\.duration"):
        vanderpol().on((float("inf"), [1]))


# --- bad graphs: VectorField (FieldError, NonFiniteError, ...) and the checker's parse_field ----

BAD_GRAPHS = {
    "unknown operator": (
        graph([["x", 0], ["x", 1], ["cube", 0]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: unknown operation 'cube'",
    ),
    "unknown operator (not a string)": (
        graph([["x", 0], ["x", 1], [7, 0]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: unknown operation",
    ),
    "empty node": (graph([["x", 0], ["x", 1], []], [1, 0]), FieldError, r"field\.nodes\[2\]"),
    "binary with one argument": (
        graph([["x", 0], ["x", 1], ["add", 0]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: add takes 2 arguments, got 1",
    ),
    "binary with three arguments": (
        graph([["x", 0], ["x", 1], ["mul", 0, 1, 1]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: mul takes 2 arguments, got 3",
    ),
    "unary with two arguments": (
        graph([["x", 0], ["x", 1], ["sin", 0, 1]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: sin takes 1 argument, got 2",
    ),
    "sum without arguments": (
        graph([["x", 0], ["x", 1], ["sum"]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: sum takes at least 1 argument, got 0",
    ),
    "x with two arguments": (
        graph([["x", 0, 1], ["x", 1]]),
        FieldError,
        r"field\.nodes\[0\]: x takes 1 argument",
    ),
    "forward reference": (
        graph([["x", 0], ["add", 0, 2], ["x", 1]], [1, 2]),
        FieldError,
        r"field\.nodes\[1\]: argument 2 is not a node index below 1",
    ),
    "self reference": (
        graph([["x", 0], ["neg", 1]], [0, 1]),
        FieldError,
        r"field\.nodes\[1\]: argument 1 is not a node index below 1",
    ),
    "argument index out of range": (
        graph([["x", 0], ["x", 1], ["add", 0, 99]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: argument 99 is not a node index",
    ),
    "negative argument": (
        graph([["x", 0], ["neg", -1]], [0, 1]),
        FieldError,
        r"field\.nodes\[1\]: argument -1",
    ),
    "boolean argument": (
        graph([["x", 0], ["x", 1], ["neg", True]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: argument True",
    ),
    "float argument": (
        graph([["x", 0], ["x", 1], ["neg", 1.0]], [1, 2]),
        FieldError,
        r"field\.nodes\[2\]: argument 1\.0",
    ),
    "x index >= dimension": (
        graph([["x", 0], ["x", 2]]),
        FieldError,
        r"field\.nodes\[1\]: argument 2 is not a coordinate index below 2",
    ),
    "p index >= number of parameters": (
        graph([["x", 0], ["p", 1]], parameters=["a"]),
        FieldError,
        r"field\.nodes\[1\]: argument 1 is not a parameter index below 1",
    ),
    "p without parameters": (
        graph([["x", 0], ["p", 0]]),
        FieldError,
        r"field\.nodes\[1\]: argument 0 is not a parameter index below 0",
    ),
    "NaN constant (string)": (
        graph([["x", 0], ["c", "nan"]]),
        NonFiniteError,
        r"field\.nodes\[1\]\[1\]",
    ),
    "NaN constant (float)": (
        graph([["x", 0], ["c", float("nan")]]),
        NonFiniteError,
        r"field\.nodes\[1\]\[1\]",
    ),
    "infinite constant (string)": (
        graph([["x", 0], ["c", "-inf"]]),
        NonFiniteError,
        r"field\.nodes\[1\]\[1\]",
    ),
    "infinite constant (float)": (
        graph([["x", 0], ["c", float("inf")]]),
        NonFiniteError,
        r"field\.nodes\[1\]\[1\]",
    ),
    "non-numeric constant": (
        graph([["x", 0], ["c", "abc"]]),
        NumberFormatError,
        r"field\.nodes\[1\]\[1\]",
    ),
    "list constant": (graph([["x", 0], ["c", [1]]]), NumberFormatError, r"field\.nodes\[1\]\[1\]"),
    "null constant": (graph([["x", 0], ["c", None]]), NumberFormatError, r"field\.nodes\[1\]\[1\]"),
    "boolean constant": (graph([["x", 0], ["c", True]]), InputError, r"field\.nodes\[1\]\[1\]"),
    "constant without value": (
        graph([["x", 0], ["c"]]),
        FieldError,
        r"field\.nodes\[1\]: c takes 1 argument",
    ),
    "too few outputs": (
        graph([["x", 0], ["x", 1]], [0]),
        FieldError,
        r"field\.outputs: expected 2 elements",
    ),
    "too many outputs": (
        graph([["x", 0], ["x", 1]], [0, 1, 1]),
        FieldError,
        r"field\.outputs: expected 2 elements",
    ),
    "output not a node": (
        graph([["x", 0], ["x", 1]], [0, 2]),
        FieldError,
        r"field\.outputs\[1\]: 2 is not a node index",
    ),
    "duplicate parameter names": (
        graph([["x", 0], ["x", 1]], parameters=["a", "a"]),
        FieldError,
        r"field\.parameters\[1\]",
    ),
    "unknown key": ({**graph([["x", 0], ["x", 1]]), "comment": 1}, FieldError, r"field:"),
    "missing key": (
        {k: v for k, v in graph([["x", 0], ["x", 1]]).items() if k != "outputs"},
        FieldError,
        r"field:",
    ),
    "dimension 0": (graph([], [], dimension=0), FieldError, r"field\.dimension"),
    "dimension not an integer": (
        graph([["x", 0], ["x", 1]], dimension="2"),
        FieldError,
        r"field\.dimension",
    ),
    "no nodes": (graph([], [0, 1]), FieldError, r"field\.nodes"),
    "not an object": ([["x", 0]], FieldError, r"field"),
}


@pytest.mark.parametrize("name", list(BAD_GRAPHS))
def test_bad_graphs_raise_a_specific_error_naming_the_field(name):
    g, cls, message = BAD_GRAPHS[name]
    with pytest.raises(cls, match=message) as info:
        VectorField(g)
    assert isinstance(info.value, CertifiedError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", list(BAD_GRAPHS))
def test_the_checker_rejects_the_same_graphs(name):
    g, _, message = BAD_GRAPHS[name]
    with pytest.raises(Rejected, match=r"field") as info:
        parse_field(g)
    assert "\n" not in str(info.value)
    if "constant" not in name:  # the producer and checker word number errors differently
        assert info.match(message)


def test_the_checker_parser_accepts_only_exact_strings_and_integers_as_constants():
    # the producer reads decimals and doubles exactly and writes them canonically; the checker
    # format has integers, "p/q" and "m*2^e" only
    with pytest.raises(Rejected, match=r"nodes\[1\]\[1\]"):
        parse_field(graph([["x", 0], ["c", "0.5"]]))
    with pytest.raises(Rejected, match=r"nodes\[1\]\[1\]"):
        parse_field(graph([["x", 0], ["c", 0.5]]))
    f = VectorField(graph([["x", 0], ["c", "0.5"], ["c", 0.1]], [1, 2]))
    assert f.graph["nodes"][1:] == [["c", "1/2"], ["c", "3602879701896397/36028797018963968"]]
    assert parse_field(f.to_json()).nodes[1] == ("c", flint.fmpq(1, 2))


def test_the_checker_parser_limits_the_number_of_nodes():
    from certified.checker.taylor import MAX_NODES

    nodes = [["x", 0]] + [["neg", i] for i in range(MAX_NODES)]
    with pytest.raises(Rejected, match="resource limit"):
        parse_field(graph(nodes, [0], dimension=1))


# --- JSON round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lorenz, vanderpol, rossler])
def test_vector_field_json_round_trip(make):
    f = make()
    text = json.dumps(f.to_json())
    g = VectorField(json.loads(text), values=f.values)
    assert g.to_json() == f.to_json()
    assert g.parameters == f.parameters and g.dimension == f.dimension
    assert g.values == f.values
    X = RNG.uniform(-2, 2, size=(10, f.dimension))
    np.testing.assert_array_equal(g.evaluate(X), f.evaluate(X))


def test_piecewise_field_json_round_trip():
    pend = field(
        2,
        lambda x, p: [x[1], -sin(x[0]) - p.gamma * x[1] + p.torque],
        parameters=["gamma", "torque"],
    )
    pf = pend.on(("1/2", {"gamma": "0.1", "torque": 0.5}), (0.25, {"gamma": 0, "torque": "-1/3"}))
    obj = json.loads(json.dumps(pf.to_json()))
    assert obj["pieces"] == [
        {"duration": "1/2", "parameters": ["1/10", "1/2"]},
        {"duration": "1/4", "parameters": ["0", "-1/3"]},
    ]
    back = PiecewiseField.from_json(obj)
    assert back.to_json() == pf.to_json()
    assert back.total_time == flint.fmpq(3, 4)
    assert back.pieces == pf.pieces
    assert PiecewiseField.from_json(obj, time="3/4").pieces == pf.pieces


def test_a_sphere_field_keeps_its_sphere_flag_through_json():
    W = [[0, 1], [-1, 0]]
    pf = sphere_neural_field([("1/2", W, W, [0, 0])])
    assert pf.field.sphere
    back = PiecewiseField.from_json(json.loads(json.dumps(pf.to_json())))
    assert back.to_json()["field"] == pf.to_json()["field"]
    assert back.field.sphere, "to_json drops 'sphere': the round trip forgets the constraint"


def test_from_json_forms():
    g = field(1, lambda x, p: [p.k * x[0]], parameters=["k"]).to_json()
    pf = PiecewiseField.from_json({"field": g, "values": ["-1/2"]}, time=2)
    assert pf.total_time == 2 and pf.pieces[0].values == (flint.fmpq(-1, 2),)
    bare = VectorField(graph([["x", 0], ["neg", 0]], [1], dimension=1)).to_json()
    assert PiecewiseField.from_json(bare, time="1/3").total_time == flint.fmpq(1, 3)
    sph = PiecewiseField.from_json({"field": bare, "values": [], "sphere": True}, time=1)
    assert sph.field.sphere


@pytest.mark.parametrize(
    "obj, cls, message",
    [
        ({"field": "G", "foo": 1}, FieldError, r"keys \['field', 'foo'\]"),
        ({"field": "G", "pieces": "P", "values": [1]}, FieldError, "either 'pieces' or 'values'"),
        ({"pieces": "P"}, FieldError, "expected 'field'"),
        ({"field": "G", "pieces": []}, FieldError, "pieces"),
        ({"field": "G", "pieces": [{"duration": 1}]}, FieldError, r"pieces\[0\]"),
        (
            {"field": "G", "pieces": [{"duration": 1, "parameters": [1], "x": 0}]},
            FieldError,
            r"pieces\[0\]",
        ),
        ({"field": "G", "pieces": [{"duration": 0, "parameters": [1]}]}, InputError, "duration"),
        (
            {"field": "G", "pieces": [{"duration": "nan", "parameters": [1]}]},
            NonFiniteError,
            r"pieces\[0\]\.duration",
        ),
        (
            {"field": "G", "pieces": [{"duration": 1, "parameters": [1, 2]}]},
            ShapeError,
            r"pieces\[0\]\.parameters",
        ),
        ([1, 2], FieldError, "field file"),
    ],
)
def test_from_json_bad_input(obj, cls, message):
    g = field(1, lambda x, p: [p.k * x[0]], parameters=["k"]).to_json()
    if isinstance(obj, dict):
        obj = {k: (g if v == "G" else v) for k, v in obj.items()}
    with pytest.raises(cls, match=message):
        PiecewiseField.from_json(obj)


def test_time_must_agree_with_the_pieces():
    g = vanderpol().to_json()
    obj = {"field": g, "pieces": [{"duration": "1/2", "parameters": [1]}]}
    assert PiecewiseField.from_json(obj, time="1/2").total_time == flint.fmpq(1, 2)
    with pytest.raises(InputError, match="--time: 1 differs from the total duration 1/2"):
        PiecewiseField.from_json(obj, time=1)
    with pytest.raises(InputError, match="--time"):
        PiecewiseField.from_json({"field": g, "values": [1]})  # autonomous: time needed


# --- read_field -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, values",
    [
        ("lorenz", [10, 28, flint.fmpq(8, 3)]),
        ("vanderpol", [1]),
        ("rossler", [flint.fmpq(1, 5), flint.fmpq(1, 5), flint.fmpq(57, 10)]),
    ],
)
def test_read_field_by_name(name, values):
    pf = read_field(name, time="5/2")
    assert pf.total_time == flint.fmpq(5, 2) and len(pf.pieces) == 1
    assert list(pf.pieces[0].values) == [flint.fmpq(v) for v in values]
    assert pf.field.name == name and name in EXAMPLES


def test_read_field_from_files(tmp_path):
    pend = field(2, lambda x, p: [x[1], -sin(x[0]) + p.t], parameters=["t"])
    pieces = tmp_path / "pieces.json"
    pieces.write_text(
        json.dumps(
            {
                "field": pend.to_json(),
                "pieces": [
                    {"duration": "0.5", "parameters": [1]},
                    {"duration": 0.25, "parameters": ["-1/2"]},
                ],
            }
        )
    )
    pf = read_field(str(pieces))
    assert pf.total_time == flint.fmpq(3, 4)
    assert [p.values for p in pf.pieces] == [(flint.fmpq(1),), (flint.fmpq(-1, 2),)]
    assert read_field(pieces, time="3/4").pieces == pf.pieces  # a PathLike works too
    auto = tmp_path / "auto.json"
    auto.write_text(json.dumps({"field": pend.to_json(), "values": [0]}))
    assert read_field(str(auto), time=2).total_time == 2
    bare = tmp_path / "bare.json"
    bare.write_text(
        json.dumps(
            {"dimension": 2, "parameters": [], "nodes": [["x", 0], ["x", 1]], "outputs": [1, 0]}
        )
    )
    assert read_field(str(bare), time=1).dimension == 2


def test_read_field_bad_input(tmp_path):
    with pytest.raises(InputError, match=r"--field: 'lorenzz' is neither a file nor"):
        read_field("lorenzz", time=1)
    with pytest.raises(InputFileError, match=r"nosuch\.json"):
        read_field(str(tmp_path / "nosuch.json"), time=1)
    with pytest.raises(InputError, match="--time"):
        read_field("lorenz")
    with pytest.raises(InputError):
        read_field(3, time=1)
    for bad_time in (0, "-1", "-1/2"):
        with pytest.raises(InputError):
            read_field("vanderpol", time=bad_time)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"field": vanderpol().to_json(), "values": [1], "mu": 2}))
    with pytest.raises(
        FieldError, match=r"unknown\.json: unknown key 'mu'; allowed keys: field, sphere"
    ):
        read_field(str(unknown), time=1)
    pieces = tmp_path / "pieces.json"
    pieces.write_text(
        json.dumps({"field": vanderpol().to_json(), "pieces": [{"duration": 1, "parameters": [1]}]})
    )
    with pytest.raises(InputError, match=r"pieces\.json.*--time: 2 differs"):
        read_field(str(pieces), time=2)
    bad_op = tmp_path / "bad_op.json"
    g = vanderpol().to_json()
    g["nodes"][3] = ["cube", 0]
    bad_op.write_text(json.dumps({"field": g, "values": [1]}))
    with pytest.raises(FieldError, match=r"bad_op\.json.*field\.nodes\[3\]: unknown operation"):
        read_field(str(bad_op), time=1)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", '"nan"', '"-inf"'])
def test_read_field_non_finite_constants_in_files(tmp_path, token):
    path = tmp_path / "f.json"
    text = '{"dimension": 1, "parameters": [], "nodes": [["x", 0], ["c", %s], ["mul", 0, 1]], '
    path.write_text(text % token + '"outputs": [2]}')
    with pytest.raises(NonFiniteError, match=r"f\.json"):
        read_field(str(path), time=1)


# --- float evaluation -------------------------------------------------------------------------


def test_lorenz_evaluate_matches_numpy():
    f = lorenz()
    X = RNG.uniform(-30, 30, size=(200, 3))
    x, y, z = X.T
    want = np.stack([10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z], axis=1)
    np.testing.assert_allclose(f.evaluate(X), want, rtol=1e-13, atol=1e-12)
    # other parameter values, by name or in order
    got = f.evaluate(X, values={"sigma": 1, "rho": 2, "beta": "1/2"})
    want = np.stack([y - x, x * (2 - z) - y, x * y - z / 2], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
    np.testing.assert_array_equal(f.evaluate(X, values=[1, 2, "1/2"]), got)
    with pytest.raises(ShapeError, match=r"x: expected shape \(N, 3\)"):
        f.evaluate(np.zeros((4, 2)))


def test_vanderpol_and_rossler_evaluate_match_numpy():
    X = RNG.uniform(-3, 3, size=(100, 2))
    x, y = X.T
    np.testing.assert_allclose(
        vanderpol().evaluate(X), np.stack([y, (1 - x * x) * y - x], axis=1), rtol=1e-13
    )
    X = RNG.uniform(-3, 3, size=(100, 3))
    x, y, z = X.T
    want = np.stack([-y - z, x + 0.2 * y, 0.2 + z * (x - 5.7)], axis=1)
    np.testing.assert_allclose(rossler().evaluate(X), want, rtol=1e-12, atol=1e-13)


# --- the graph's arb coefficients against mpmath (a property over random graphs) --------------

_UNARY = {
    "neg": (lambda e: -e, lambda v: -v),
    "sqr": (lambda e: e**2, lambda v: v * v),
    "sin": (sin, mpmath.sin),
    "cos": (cos, mpmath.cos),
    "tanh": (tanh, mpmath.tanh),
    "sigmoid": (sigmoid, lambda v: 1 / (1 + mpmath.exp(-v))),
    "exp_tanh": (lambda e: exp(tanh(e)), lambda v: mpmath.exp(mpmath.tanh(v))),
    "log1p_sqr": (lambda e: log(1 + e**2), lambda v: mpmath.log(1 + v * v)),
    "sqrt1p_sqr": (lambda e: sqrt(1 + e**2), lambda v: mpmath.sqrt(1 + v * v)),
    "inv2pcos": (lambda e: 1 / (2 + cos(e)), lambda v: 1 / (2 + mpmath.cos(v))),
}
_BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "lse": (
        lambda a, b: logsumexp([a, b, 0]),
        lambda a, b: mpmath.log(mpmath.exp(a) + mpmath.exp(b) + 1),
    ),
    "sum3": (lambda a, b: total([a, b, a]), lambda a, b: a + b + a),
}

_program = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(sorted(_UNARY)), st.integers(0, 50)),
        st.tuples(st.sampled_from(sorted(_BINARY)), st.integers(0, 50), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=8,
)


def _exact(v: mpmath.mpf) -> flint.fmpq:
    v = v if isinstance(v, mpmath.mpf) else mpmath.mpf(v)  # an mpf is not re-rounded
    m, e = v.man_exp  # of |v|: mpmath keeps the sign apart
    m, e = (-int(m) if v < 0 else int(m)), int(e)
    return flint.fmpq(m * 2 ** max(e, 0), 2 ** max(-e, 0))


def _arb_end(a: flint.arb) -> flint.fmpq:
    """An exact arb (an end of a ball) as a rational."""
    m, e = a.mid().man_exp()
    m, e = int(m), int(e)
    return flint.fmpq(m * 2 ** max(e, 0), 2 ** max(-e, 0))


def _run(program, start):
    """Apply the program to a list of starting values (Exprs or mpf); the last two values
    are the field's components."""
    vals = list(start)
    for ins in program:
        if len(ins) == 2:
            vals.append(
                (_UNARY[ins[0]][0 if isinstance(vals[0], Expr) else 1])(vals[ins[1] % len(vals)])
            )
        else:
            f = _BINARY[ins[0]][0 if isinstance(vals[0], Expr) else 1]
            vals.append(f(vals[ins[1] % len(vals)], vals[ins[2] % len(vals)]))
    return vals


@given(
    program=_program,
    point=st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    a=st.fractions(-2, 2, max_denominator=7),
)
def test_random_graphs_arb_encloses_mpmath_and_float_agrees(program, point, a):
    f = field(2, lambda x, p: _run(program, [x[0], x[1], p.a])[-2:], parameters=["a"])
    ex = parse_field(f.to_json())
    with mpmath.workdps(50):
        start = [
            mpmath.mpf(point[0]),
            mpmath.mpf(point[1]),
            mpmath.mpf(a.numerator) / a.denominator,
        ]
        vals = _run(program, start)
        ref, scale = vals[-2:], max(1, *(abs(v) for v in vals))
    old = flint.ctx.prec
    flint.ctx.prec = 128
    try:
        params = [flint.arb(flint.fmpq(a.numerator, a.denominator))]
        x0 = [flint.arb(point[0]), flint.arb(point[1])]
        f_x0 = field_jets(ex, params, x0, None, 1)[1]  # x_1 = f(x0)
        slack = flint.fmpq(1, 10**35) * _exact(scale)
        for ball, r in zip(f_x0, ref, strict=True):
            q = _exact(r)  # the 50-digit reference, exactly
            lo, hi = _arb_end(ball[0].lower()), _arb_end(ball[0].upper())
            assert lo - slack <= q <= hi + slack, (ball[0], r)
            assert ball[0].rad() < 1e-25 * float(scale)
    finally:
        flint.ctx.prec = old
    got = f.evaluate(np.array([point]), values=[a])[0]
    for g, r in zip(got, ref, strict=True):
        assert math.isclose(g, float(r), rel_tol=1e-9, abs_tol=1e-9 * float(scale))
