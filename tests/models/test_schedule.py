"""Tests of certified.models.schedule: exact reading, round trips, validation, merging, laminar
detection. Expected values are computed independently with ``fractions.Fraction``."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import re
from fractions import Fraction
from typing import Any

import flint
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.errors import InputError, NonFiniteError, NumberFormatError, ShapeError
from certified.io import InputFileError, SchemaError, parse_json
from certified.models import DEFAULT_LEAKY_SLOPE, Activation, Piece, Schedule


def frac(q: Any) -> Fraction:
    assert isinstance(q, flint.fmpq)
    return Fraction(int(q.p), int(q.q))


def fracs(a: np.ndarray) -> list:
    return np.vectorize(frac, otypes=[object])(a).tolist()


# --- strategies: JSON numbers of every accepted form, with their exact values --------------------

finite_floats = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)


@st.composite
def json_numbers(draw: st.DrawFn, positive: bool = False) -> tuple[Any, Fraction]:
    """A JSON value (int, float or exact string) and the rational it denotes."""
    kind = draw(st.sampled_from(["int", "float", "ratio", "decimal", "dyadic"]))
    if kind == "int":
        v = draw(st.integers(1 if positive else -(2**70), 2**70))
        return v, Fraction(v)
    if kind == "float":
        x = draw(st.floats(min_value=5e-324) if positive else finite_floats)
        x = x if math.isfinite(x) else 1.0
        return x, Fraction(x)
    if kind == "ratio":
        p = draw(st.integers(1 if positive else -(10**30), 10**30))
        q = draw(st.integers(1, 10**30))
        return f"{p}/{q}", Fraction(p, q)
    if kind == "decimal":
        m = draw(st.integers(1 if positive else -(10**25), 10**25))
        e = draw(st.integers(-40, 40))
        return f"{m}e{e}", Fraction(m) * Fraction(10) ** e
    m = draw(st.integers(1 if positive else -(2**60), 2**60))
    e = draw(st.integers(-1100, 1100))
    return f"{m}*2^{e}", Fraction(m) * Fraction(2) ** e


@st.composite
def schedule_objects(draw: st.DrawFn, doubles_only: bool = False) -> tuple[dict, dict]:
    """A schedule JSON object and the same data with every number as a Fraction."""
    number = finite_floats.map(lambda x: (x, Fraction(x))) if doubles_only else json_numbers()
    positive = (
        st.floats(min_value=5e-324, allow_infinity=False).map(lambda x: (x, Fraction(x)))
        if doubles_only
        else json_numbers(positive=True)
    )
    d = draw(st.integers(1, 3))
    activation = draw(st.sampled_from([a.value for a in Activation]))
    obj: dict[str, Any] = {"dimension": d, "activation": activation, "pieces": []}
    exact: dict[str, Any] = {"dimension": d, "activation": activation, "pieces": []}
    if activation == "leaky_relu" and draw(st.booleans()):
        q = Fraction(draw(st.integers(1, 999)), 1000 if not doubles_only else 1024)
        obj["slope"] = f"{q.numerator}/{q.denominator}"
        exact["slope"] = q
    for _ in range(draw(st.integers(1, 4))):
        p = draw(st.integers(1, 3))
        t, t_exact = draw(positive)

        def matrix(rows: int, cols: int) -> tuple[list, list]:
            cells = [[draw(number) for _ in range(cols)] for _ in range(rows)]
            return [[c[0] for c in r] for r in cells], [[c[1] for c in r] for r in cells]

        W, W_exact = matrix(d, p)
        A, A_exact = matrix(p, d)
        b, b_exact = matrix(1, p)
        obj["pieces"].append({"duration": t, "W": W, "A": A, "b": b[0]})
        exact["pieces"].append({"duration": t_exact, "W": W_exact, "A": A_exact, "b": b_exact[0]})
    return obj, exact


def assert_matches(s: Schedule, exact: dict) -> None:
    assert s.dimension == exact["dimension"]
    assert s.activation is Activation(exact["activation"])
    if exact["activation"] == "leaky_relu":
        assert frac(s.slope) == exact.get("slope", Fraction(1, 100))
    else:
        assert s.slope is None
    assert len(s.pieces) == len(exact["pieces"])
    for piece, e in zip(s.pieces, exact["pieces"], strict=True):
        assert frac(piece.duration) == e["duration"]
        assert fracs(piece.W) == e["W"]
        assert fracs(piece.A) == e["A"]
        assert fracs(piece.b) == e["b"]
    assert frac(s.total_time) == sum(e["duration"] for e in exact["pieces"])


# --- exact reading and round trips ---------------------------------------------------------------


@given(schedule_objects())
def test_from_json_reads_every_number_exactly(data: tuple[dict, dict]) -> None:
    obj, exact = data
    assert_matches(Schedule.from_json(obj), exact)


@given(schedule_objects())
def test_to_json_round_trips_exactly_and_is_canonical(data: tuple[dict, dict]) -> None:
    s = Schedule.from_json(data[0])
    out = s.to_json()
    again = Schedule.from_json(out)
    assert again == s and hash(again) == hash(s)
    assert again.to_json() == out
    # through JSON text too, and every number written is an exact string
    text = json.dumps(out)
    assert Schedule.from_json(parse_json(text)) == s
    for piece in out["pieces"]:
        assert all(isinstance(v, str) for v in [piece["duration"], *piece["b"]])
        assert all(isinstance(v, str) for row in piece["W"] + piece["A"] for v in row)
    assert isinstance(out["dimension"], int)


@given(schedule_objects(doubles_only=True))
def test_json_floats_round_trip_as_their_doubles(data: tuple[dict, dict]) -> None:
    obj, exact = data
    s = Schedule.from_json(parse_json(json.dumps(obj)))
    assert_matches(s, exact)
    assert all(p.is_float_exact for p in s.pieces)
    # the slopes drawn here are k/1024 (doubles); the default 1/100 is not a double
    assert s.is_float_exact == (s.activation is not Activation.LEAKY_RELU or "slope" in obj)
    for piece, e in zip(s.pieces, obj["pieces"], strict=True):
        assert piece.W_float.tolist() == [[float(x) for x in row] for row in e["W"]]
        assert piece.A_float.tolist() == [[float(x) for x in row] for row in e["A"]]
        assert piece.b_float.tolist() == [float(x) for x in e["b"]]
        assert piece.duration_float == e["duration"]


def one_piece(**overrides: Any) -> dict:
    obj = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [{"duration": 1, "W": [[0, 0], [0, 1]], "A": [[1, 0], [1, 0]], "b": [0, 1]}],
    }
    obj["pieces"][0].update(overrides)
    return obj


def test_json_float_is_the_double_and_string_is_the_decimal() -> None:
    by_float = Schedule.from_json(parse_json(json.dumps(one_piece(duration=0.1))))
    by_string = Schedule.from_json(one_piece(duration="0.1"))
    assert frac(by_float.pieces[0].duration) == Fraction(0.1) != Fraction(1, 10)
    assert frac(by_string.pieces[0].duration) == Fraction(1, 10)
    assert by_float.pieces[0].is_float_exact
    assert not by_string.pieces[0].is_float_exact
    assert by_string.pieces[0].duration_float == 0.1  # nearest double


def test_json_integer_is_the_integer_not_a_double() -> None:
    big = 2**60 + 1  # not a double
    s = Schedule.from_json(parse_json(json.dumps(one_piece(b=[big, 0]))))
    assert frac(s.pieces[0].b[0]) == big
    assert not s.pieces[0].is_float_exact
    assert s.pieces[0].b_float[0] == float(big)


def test_constructor_accepts_numpy_arrays_and_equals_the_json_form() -> None:
    W = np.array([[0.0, 0.0], [0.0, 1.0]])
    A = np.array([[1, 0], [1, 0]])
    piece = Piece(1, W, A, np.array([0.0, 1.0]))
    assert Schedule(2, "relu", [piece]) == Schedule.from_json(one_piece())
    assert Schedule(2, Activation.RELU, (piece,)) == Schedule(np.int64(2), "relu", [piece])


def test_arrays_are_read_only_and_pieces_frozen() -> None:
    piece = Schedule.from_json(one_piece()).pieces[0]
    for a in (piece.W, piece.A, piece.b, piece.W_float, piece.A_float, piece.b_float):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = a[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        piece.duration = flint.fmpq(2)  # type: ignore[misc]
    assert piece.laminar_normal() is not None
    with pytest.raises(ValueError, match="read-only"):
        piece.laminar_normal()[0] = 5


def test_equality_and_hash_are_exact() -> None:
    s = Schedule.from_json(one_piece())
    assert s == Schedule.from_json(one_piece(duration="1/1"))
    assert s != Schedule.from_json(one_piece(duration="1.0000000000000000000001"))
    assert s != Schedule.from_json({**one_piece(), "activation": "tanh"})
    assert len({s, Schedule.from_json(one_piece(W=[["0", "0/7"], [0, "1.0"]]))}) == 1
    assert s.pieces[0] != "not a piece"
    assert repr(s.pieces[0]) == "Piece(duration=1, W=<2×2>, A=<2×2>, b=<2>)"


def test_widths_may_differ_between_pieces() -> None:
    obj = one_piece()
    obj["pieces"].append({"duration": "1/2", "W": [[1], [0]], "A": [[0, 1]], "b": [0]})
    s = Schedule.from_json(obj)
    assert s.widths == (2, 1) and s.width == 2
    assert frac(s.total_time) == Fraction(3, 2)


# --- activations and the leaky slope -------------------------------------------------------------


def test_leaky_slope_default_explicit_and_written() -> None:
    s = Schedule.from_json({**one_piece(), "activation": "leaky_relu"})
    assert s.slope == DEFAULT_LEAKY_SLOPE == flint.fmpq(1, 100)
    assert s.to_json()["slope"] == "1/100"
    t = Schedule.from_json({**one_piece(), "activation": "leaky_relu", "slope": "0.125"})
    assert t.slope == flint.fmpq(1, 8) and t != s
    assert Schedule.from_json(t.to_json()) == t
    assert Schedule(2, "leaky_relu", s.pieces) == Schedule(2, "leaky_relu", s.pieces, "1/100")
    assert "slope" not in Schedule.from_json(one_piece()).to_json()


def test_activation_properties() -> None:
    assert [a.value for a in Activation] == ["relu", "leaky_relu", "tanh", "sigmoid"]
    assert Activation.RELU.is_piecewise_linear and Activation.LEAKY_RELU.is_piecewise_linear
    assert not Activation.TANH.is_piecewise_linear and not Activation.SIGMOID.is_piecewise_linear
    assert Activation.parse("tanh") is Activation.TANH is Activation.parse(Activation.TANH)


# --- bad input: specific class, message naming the field -----------------------------------------


def mutate(path: list, value: Any, delete: bool = False) -> dict:
    obj = copy.deepcopy(one_piece())
    node = obj
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


BAD = [
    (
        mutate(["pieces", 0, "W", 0, 1], float("nan")),
        NonFiniteError,
        "pieces[0].W[0][1]: nan is not finite",
    ),
    (
        mutate(["pieces", 0, "A", 1, 0], float("-inf")),
        NonFiniteError,
        "pieces[0].A[1][0]: -inf is not finite",
    ),
    (
        mutate(["pieces", 0, "b", 1], "Infinity"),
        NonFiniteError,
        "pieces[0].b[1]: 'Infinity' is not finite",
    ),
    (mutate(["pieces", 0, "duration"], 0), InputError, "pieces[0].duration: 0 is not positive"),
    (
        mutate(["pieces", 0, "duration"], "-1/2"),
        InputError,
        "pieces[0].duration: -1/2 is not positive",
    ),
    (
        mutate(["pieces", 0, "duration"], "abc"),
        NumberFormatError,
        "pieces[0].duration: 'abc' is not a number",
    ),
    (
        mutate(["pieces", 0, "W", 1, 0], "1,5"),
        NumberFormatError,
        "pieces[0].W[1][0]: '1,5' is not a number",
    ),
    (
        mutate(["pieces", 0, "W", 1, 0], None),
        NumberFormatError,
        "pieces[0].W[1][0]: None of type NoneType",
    ),
    (mutate(["pieces", 0, "W", 1, 0], True), InputError, "pieces[0].W[1][0]: True is a boolean"),
    (
        mutate(["pieces", 0, "W", 1, 0], [1]),
        NumberFormatError,
        "pieces[0].W[1][0]: [1] of type list",
    ),
    (
        mutate(["pieces", 0, "W", 1], [0, 1, 2]),
        ShapeError,
        "pieces[0].W[1]: expected 2 entries (one per neuron), got 3",
    ),
    (
        mutate(["pieces", 0, "W"], [[0, 1]]),
        ShapeError,
        "pieces[0].W: expected 2 rows (one per coordinate, dimension 2), got 1",
    ),
    (mutate(["pieces", 0, "W"], [[], []]), ShapeError, "pieces[0].W[0]: empty"),
    (
        mutate(["pieces", 0, "W"], 3),
        ShapeError,
        "pieces[0].W: expected a list of rows ... got a number",
    ),
    (
        mutate(["pieces", 0, "W"], [1, 2]),
        ShapeError,
        "pieces[0].W[0]: expected a list of entries ... got a number",
    ),
    (
        mutate(["pieces", 0, "A"], [[1, 0]]),
        ShapeError,
        "pieces[0].A: expected 2 rows (one per neuron; W has 2 columns), got 1",
    ),
    (
        mutate(["pieces", 0, "A", 0], [1, 0, 0]),
        ShapeError,
        "pieces[0].A[0]: expected 2 entries (one per coordinate; W has 2 rows), got 3",
    ),
    (
        mutate(["pieces", 0, "b"], [0]),
        ShapeError,
        "pieces[0].b: expected 2 entries (one per neuron; W has 2 columns), got 1",
    ),
    (
        mutate(["pieces", 0, "b"], {"0": 1}),
        ShapeError,
        "pieces[0].b: expected a list of entries ... got an object",
    ),
    (mutate(["dimension"], 3), ShapeError, "pieces[0].W: expected 3 rows"),
    (mutate(["dimension"], 0), ShapeError, "dimension: 0 is less than 1"),
    (mutate(["dimension"], -2), ShapeError, "dimension: -2 is less than 1"),
    (mutate(["dimension"], 2.0), SchemaError, "dimension: expected an integer, got 2.0"),
    (mutate(["dimension"], "2"), SchemaError, "dimension: expected an integer, got '2'"),
    (mutate(["dimension"], True), SchemaError, "dimension: expected an integer, got True"),
    (
        mutate(["activation"], "gelu"),
        SchemaError,
        "activation: unknown activation 'gelu'; use one of relu, leaky_relu, tanh, sigmoid",
    ),
    (mutate(["activation"], "ReLU"), SchemaError, "activation: unknown activation 'ReLU'"),
    (mutate(["activation"], 1), SchemaError, "activation: expected one of the names"),
    (mutate(["pieces"], []), ShapeError, "pieces: empty; a schedule needs at least one piece"),
    (
        mutate(["pieces"], {"duration": 1}),
        SchemaError,
        "pieces: expected a list of pieces, got dict",
    ),
    (
        mutate(["pieces", 0], [1, 2]),
        SchemaError,
        "pieces[0]: expected a JSON object with keys duration, W, A, b, got an array",
    ),
    (
        mutate(["pieces", 0, "c"], 1),
        SchemaError,
        "pieces[0]: unknown key 'c'; allowed keys: duration, W, A, b",
    ),
    (mutate(["pieces", 0, "b"], None, delete=True), SchemaError, "pieces[0]: missing key 'b'"),
    (
        mutate(["extra"], 1),
        SchemaError,
        "unknown key 'extra'; allowed keys: dimension, activation, pieces, slope",
    ),
    (mutate(["activation"], None, delete=True), SchemaError, "missing key 'activation'"),
    (
        mutate(["slope"], "1/2"),
        SchemaError,
        "slope: only allowed with activation leaky_relu, not relu",
    ),
    (
        {**one_piece(), "activation": "leaky_relu", "slope": 0},
        InputError,
        "slope: 0 is not in the open interval (0, 1)",
    ),
    (
        {**one_piece(), "activation": "leaky_relu", "slope": "1"},
        InputError,
        "slope: 1 is not in the open interval",
    ),
    (
        {**one_piece(), "activation": "leaky_relu", "slope": "nan"},
        NonFiniteError,
        "slope: 'nan' is not finite",
    ),
    (
        [one_piece()],
        SchemaError,
        "expected a JSON object with keys dimension, activation, pieces, slope, got an array",
    ),
]


@pytest.mark.parametrize(("obj", "cls", "prefix"), BAD)
def test_bad_input_is_rejected_with_a_specific_error_naming_the_field(
    obj: Any, cls: type, prefix: str
) -> None:
    with pytest.raises(cls) as info:
        Schedule.from_json(obj)
    assert type(info.value) is cls
    for part in prefix.split(" ... "):
        assert part in str(info.value)
    assert str(info.value).startswith(prefix.split(" ... ")[0])
    assert "\n" not in str(info.value)


def test_constructor_validation() -> None:
    piece = Schedule.from_json(one_piece()).pieces[0]
    with pytest.raises(ShapeError, match=r"^pieces\[0\]\.W: has 2 rows but the dimension is 3"):
        Schedule(3, "relu", [piece])
    with pytest.raises(SchemaError, match=r"^pieces\[1\]: expected a Piece, got dict"):
        Schedule(2, "relu", [piece, {"duration": 1}])
    with pytest.raises(SchemaError, match=r"^pieces: expected a sequence of Piece"):
        Schedule(2, "relu", piece)
    with pytest.raises(ShapeError, match=r"^pieces: empty"):
        Schedule(2, "relu", ())
    with pytest.raises(SchemaError, match=r"^slope: only allowed with activation leaky_relu"):
        Schedule(2, "tanh", [piece], slope=flint.fmpq(1, 2))
    with pytest.raises(InputError, match=r"^piece\.duration: -1 is not positive"):
        Piece(-1, [[1]], [[1]], [0])
    with pytest.raises(InputError, match=r"^pieces\[4\]\.duration: 0 is not positive"):
        Piece(0, [[1]], [[1]], [0], "pieces[4]")
    with pytest.raises(ShapeError, match=r"^piece\.W: expected a 2-dimensional array"):
        Piece(1, np.zeros(3), [[1]], [0])
    with pytest.raises(NonFiniteError, match=r"^piece\.b\[0\]: nan is not finite"):
        Piece(1, [[1]], [[1]], np.array([np.nan]))


def test_float_views_reject_values_beyond_the_double_range() -> None:
    piece = Piece(1, [["1e400"]], [[1]], [0])
    assert not piece.is_float_exact
    with pytest.raises(Exception, match=r"float64 range|exceeds"):
        _ = piece.W_float


# --- merging and switches ------------------------------------------------------------------------


def piece_dict(duration: Any, k: int) -> dict:
    return {"duration": duration, "W": [[0, 0], [0, k]], "A": [[1, 0], [1, 0]], "b": [0, k]}


def schedule_of(*pieces: dict) -> Schedule:
    return Schedule.from_json({"dimension": 2, "activation": "relu", "pieces": list(pieces)})


def test_merging_consecutive_identical_pieces() -> None:
    s = schedule_of(
        piece_dict(1, 1), piece_dict("1/2", 1), piece_dict(2, 2), piece_dict(1, 1), piece_dict(1, 1)
    )
    m = s.merged()
    assert [frac(p.duration) for p in m.pieces] == [Fraction(3, 2), 2, 2]
    for merged_piece, original in zip(
        m.pieces, (s.pieces[0], s.pieces[2], s.pieces[3]), strict=True
    ):
        assert merged_piece.has_same_parameters(original)
    assert not m.pieces[0].has_same_parameters(m.pieces[1])
    assert s.switches == m.switches == 2
    assert m.total_time == s.total_time
    assert m != s and m.merged() is m
    assert schedule_of(piece_dict(1, 1)).switches == 0
    assert schedule_of(piece_dict(1, 1), piece_dict(3, 1), piece_dict(5, 1)).switches == 0


def test_pieces_differing_in_one_entry_do_not_merge() -> None:
    other = piece_dict(1, 1)
    other["b"] = [0, "1.0000000000000000000000001"]
    s = schedule_of(piece_dict(1, 1), other)
    assert s.switches == 1 and s.merged() is s
    # different widths never merge
    narrow = {"duration": 1, "W": [[0], [1]], "A": [[1, 0]], "b": [0]}
    assert schedule_of(piece_dict(1, 1), narrow).switches == 1


@given(st.lists(st.integers(0, 2), min_size=1, max_size=12))
def test_switch_count_is_number_of_runs_minus_one(labels: list[int]) -> None:
    s = schedule_of(*[piece_dict(1, k) for k in labels])
    runs = 1 + sum(a != b for a, b in itertools.pairwise(labels))
    assert s.switches == runs - 1
    assert frac(s.merged().total_time) == len(labels)


# --- laminar detection ---------------------------------------------------------------------------


def laminar_piece(W: Any, A: Any, b: Any | None = None) -> Piece:
    p = len(A)
    return Piece(1, W, A, [0] * p if b is None else b)


def test_laminar_with_equal_normals() -> None:
    a = ["1/2", "-3"]
    # w_i ⊥ a: multiples of (6, 1)
    piece = laminar_piece([[6, "-12/5"], [1, "-2/5"]], [a, a], [1, -7])
    normal = piece.laminar_normal()
    assert normal is not None and fracs(normal) == [Fraction(1, 2), -3]
    assert piece.laminar_scales() == (1, 1)
    assert piece.is_laminar() and piece.has_invariant_normals()


def test_laminar_with_positive_multiples_of_the_normal() -> None:
    piece = laminar_piece([[0, 0, 0], [1, 2, 5]], [[2, 0], ["1/3", 0], [7, 0]])
    assert fracs(piece.laminar_normal()) == [2, 0]
    assert [frac(c) for c in piece.laminar_scales()] == [1, Fraction(1, 6), Fraction(7, 2)]


@pytest.mark.parametrize(
    ("W", "A", "why"),
    [
        ([[0, 0], [1, 1]], [[1, 0], [-1, 0]], "negative multiple"),
        ([[0, 0], [1, 1]], [[1, 0], [0, 0]], "zero row after a nonzero one"),
        ([[0, 0], [1, 1]], [[0, 0], [1, 0]], "zero first row"),
        ([[0, 1], [1, 0]], [[1, 0], [1, 0]], "w_2 not orthogonal to a"),
        ([[0, 0], [1, 1]], [[1, 0], [1, "1e-30"]], "normals not parallel"),
        ([[0], ["1e-30"]], [[1, "1e-30"]], "w almost but not exactly orthogonal"),
    ],
)
def test_not_laminar(W: Any, A: Any, why: str) -> None:
    piece = laminar_piece(W, A)
    assert piece.laminar_normal() is None, why
    assert piece.laminar_scales() is None and not piece.is_laminar()


def test_invariant_normals_without_a_shared_normal() -> None:
    # a_1 = e1, a_2 = e2, every w along e3: each a_i·x is invariant but the normals differ
    piece = laminar_piece([[0, 0], [0, 0], [1, "2/3"]], [[1, 0, 0], [0, 1, 0]])
    assert piece.has_invariant_normals() and not piece.is_laminar()
    # w_i ⊥ a_i alone is not enough: a_1·w_2 ≠ 0
    piece = laminar_piece([[0, 1], [1, 0]], [[1, 0], [0, 1]])
    assert not piece.has_invariant_normals() and not piece.is_laminar()


def test_schedule_is_laminar_iff_every_piece_is() -> None:
    s = schedule_of(piece_dict(1, 1), piece_dict(1, 2))
    assert s.is_laminar()
    bad = {"duration": 1, "W": [[1], [0]], "A": [[1, 0]], "b": [0]}
    assert not schedule_of(piece_dict(1, 1), bad).is_laminar()


small_rationals = st.fractions(min_value=-50, max_value=50, max_denominator=50)


@given(
    normal=st.lists(small_rationals, min_size=2, max_size=3),
    scales=st.lists(st.fractions(min_value=Fraction(1, 50), max_value=50), min_size=1, max_size=3),
    seed=st.integers(0, 2**32 - 1),
    x=st.lists(small_rationals, min_size=3, max_size=3),
)
@example(normal=[Fraction(1), Fraction(0)], scales=[Fraction(1)], seed=0, x=[Fraction(0)] * 3)
@example(
    normal=[Fraction(0), Fraction(1), Fraction(0)],
    scales=[Fraction(1, 50)],
    seed=0,
    x=[Fraction(0)] * 3,
)
def test_laminar_pieces_leave_the_normal_component_invariant(
    normal: list[Fraction], scales: list[Fraction], seed: int, x: list[Fraction]
) -> None:
    """Property: a laminar piece's ReLU field is orthogonal to its normal at every point; and
    breaking orthogonality by one unit in one entry of W is detected (mutation)."""
    if not any(normal):
        normal = [Fraction(1), *normal[1:]]
    d, p = len(normal), len(scales)
    rng = np.random.default_rng(seed)
    # w_j = projection of a random integer vector onto normal^⊥ (exact)
    nn = sum(c * c for c in normal)
    W_cols = []
    for _ in range(p):
        v = [Fraction(int(k)) for k in rng.integers(-5, 6, size=d)]
        t = sum(vi * ai for vi, ai in zip(v, normal, strict=True)) / nn
        W_cols.append([vi - t * ai for vi, ai in zip(v, normal, strict=True)])
    W = [[str(W_cols[j][i]) for j in range(p)] for i in range(d)]
    A = [[str(c * ai) for ai in normal] for c in scales]
    b = [str(Fraction(int(k), 3)) for k in rng.integers(-9, 10, size=p)]
    piece = laminar_piece(W, A, b)
    a = piece.laminar_normal()
    assert a is not None and fracs(a) == [scales[0] * ai for ai in normal]
    pre = [sum(Fraction(A[j][k]) * x[k] for k in range(d)) + Fraction(b[j]) for j in range(p)]
    field = [sum(W_cols[j][i] * max(pre[j], 0) for j in range(p)) for i in range(d)]
    assert sum(frac(a[i]) * field[i] for i in range(d)) == 0
    # mutation: tilting w_1 towards the normal must be detected
    broken = [[str(Fraction(row[0]) + normal[i]), *row[1:]] for i, row in enumerate(W)]
    assert laminar_piece(broken, A, b).laminar_normal() is None


# --- files ---------------------------------------------------------------------------------------


def test_from_json_reads_files_and_names_them_in_errors(tmp_path: Any) -> None:
    s = Schedule.from_json(one_piece(duration="1/3"))
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(s.to_json()))
    assert Schedule.from_json(path) == s == Schedule.from_json(str(path))
    path.write_text(json.dumps(one_piece(duration=-1)))
    with pytest.raises(InputError, match=re.escape(f"{path}: pieces[0].duration: -1 is not")):
        Schedule.from_json(path)
    path.write_text(json.dumps(one_piece()).replace("[0, 1]]", "[0, NaN]]", 1))
    with pytest.raises(NonFiniteError, match=re.escape(f"{path}: NaN is not allowed")):
        Schedule.from_json(path)
    path.write_text('{"dimension": 2, "dimension": 2}')
    with pytest.raises(InputFileError, match=re.escape(f"{path}: duplicate key 'dimension'")):
        Schedule.from_json(path)
    with pytest.raises(InputFileError, match="no such file"):
        Schedule.from_json(tmp_path / "missing.json")
