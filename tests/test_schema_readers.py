"""The readers check structure against the shipped JSON Schemas first (``certified.io.
validate_json``, issue 19): a structurally broken file gives the reader's own one-line error
naming the file and the JSON path of the offending element; every valid file, in particular
every format page's example with its numbers written in any accepted form, still passes."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certified import io
from certified.attention.instance import read_attention_instance
from certified.attention.tokens_command import _read as read_tokens_instance
from certified.cli import main
from certified.errors import CertifiedError, InputError, NumberFormatError, ShapeError
from certified.fields import read_field
from certified.fields.field import FieldError
from certified.io import SchemaError, validate_json
from certified.models import Schedule
from certified.schemas import schema

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "formats" / "examples"

READERS = {
    "schedule": Schedule.from_json,
    "points": io.read_points,
    "dataset": io.read_dataset,
    "boxes": io.read_boxes,
    "measure": io.read_measure,
    "attention-instance": read_attention_instance,
    "field": lambda p: read_field(str(p), time=1),
    "tokens-instance": read_tokens_instance,
}
DELETE = object()


def example(kind: str) -> Any:
    return json.loads((EXAMPLES / f"{kind}.json").read_text())


def mutate(obj: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


# (kind, where in the example, new value, exception class, message after "<file>: ")
BROKEN = [
    # schedule
    ("schedule", ("pieces",), {"duration": 1}, ShapeError,
     "pieces: expected a list of objects, got an object"),
    ("schedule", ("pieces", 1, "W"), "1,0", ShapeError,
     "pieces[1].W: expected a list of rows, each a list of numbers, got a string"),
    ("schedule", ("pieces", 0, "b"), DELETE, SchemaError,
     "pieces[0]: missing key 'b'; required keys: duration, W, A, b"),
    ("schedule", ("pieces", 0, "bias"), [0], SchemaError,
     "pieces[0]: unknown key 'bias'; allowed keys: duration, W, A, b"),
    ("schedule", ("pieces", 0, "b", 1), [0], NumberFormatError, "pieces[0].b[1]: [0] of type"),
    ("schedule", ("pieces", 1, "A", 2), 1, ShapeError,
     "pieces[1].A[2]: expected a list of numbers, got a number"),
    ("schedule", ("activation",), "relu6", SchemaError,
     "activation: unknown value 'relu6'; use one of relu, leaky_relu, tanh, sigmoid"),
    ("schedule", ("dimension",), "2", SchemaError, "dimension: expected an integer, got a string"),
    ("schedule", ("dimension",), 0, ShapeError, "dimension: 0 is out of range; it must be >= 1"),
    ("schedule", ("epochs",), 3, SchemaError,
     "unknown key 'epochs'; allowed keys: dimension, activation, slope, pieces"),
    # points
    ("points", ("X",), {"0": [1, 2]}, ShapeError,
     "X: expected a list of rows, each a list of numbers, got an object"),
    ("points", ("X", 1), "0.5, 0.25", ShapeError, "X[1]: expected a list of numbers, got a string"),
    ("points", ("X", 2, 0), None, NumberFormatError, "X[2][0]: None of type NoneType"),
    ("points", ("X", 2, 0), True, InputError, "X[2][0]: True is a boolean"),
    ("points", ("X", 0, 1), "", NumberFormatError, "X[0][1]: '' is not a number"),
    ("points", ("X",), DELETE, SchemaError, "missing key 'X'; required keys: X"),
    ("points", ("labels",), [1], SchemaError, "unknown key 'labels'; allowed keys: X, Y"),
    ("points", ("Y",), [[1, 2], "x"], ShapeError, "Y[1]: expected a list of numbers, got a string"),
    # dataset
    ("dataset", ("Y",), DELETE, SchemaError, "missing key 'Y'; required keys: X, Y"),
    ("dataset", ("Y",), [], ShapeError, "Y: empty; give at least one row"),
    ("dataset", ("Y", 1, 1), [1], NumberFormatError, "Y[1][1]: [1] of type"),
    ("dataset", ("Y",), "[[1, 2]]", ShapeError,
     "Y: expected a list of rows, each a list of numbers, got a string"),
    ("dataset", ("Z",), 0, SchemaError, "unknown key 'Z'; allowed keys: X, Y"),
    # boxes
    ("boxes", ("hi",), DELETE, SchemaError, "missing key 'hi'; required keys: lo, hi"),
    ("boxes", ("lo", 0), "0.09", ShapeError, "lo[0]: expected a list of numbers, got a string"),
    ("boxes", ("hi", 1), [], ShapeError, "hi[1]: empty; give at least one number"),
    ("boxes", ("mid",), [[0, 0]], SchemaError, "unknown key 'mid'; allowed keys: lo, hi"),
    # measure
    ("measure", ("weights",), [["1/4"], ["1/4"], ["1/4"], ["1/4"]], NumberFormatError,
     "weights[0]: ['1/4'] of type list"),
    ("measure", ("weights",), "1/4", ShapeError,
     "weights: expected a list of numbers, got a string"),
    ("measure", ("points",), DELETE, SchemaError, "missing key 'points'; required keys: points"),
    ("measure", ("mass",), [1], SchemaError,
     "unknown key 'mass'; allowed keys: points, weights"),
    ("measure", ("points", 3), {"x": 1}, ShapeError,
     "points[3]: expected a list of numbers, got an object"),
    # attention instance
    ("attention-instance", ("mu",), {"weights": [1]}, SchemaError,
     "mu: missing key 'points'; required keys: points"),
    ("attention-instance", ("mu",), {"points": [[0, 0]], "mass": [1]}, SchemaError,
     "mu: unknown key 'mass'; allowed keys: points, weights"),
    ("attention-instance", ("Q", 0), "1, 0", ShapeError,
     "Q[0]: expected a list of numbers, got a string"),
    ("attention-instance", ("R",), [1], NumberFormatError, "R: [1] of type list"),
    ("attention-instance", ("V",), DELETE, SchemaError,
     "missing key 'V'; required keys: Q, K, V, R"),
    ("attention-instance", ("W",), [[1]], SchemaError,
     "unknown key 'W'; allowed keys: Q, K, V, R, X, mu, nu"),
    # field
    ("field", ("pieces", 0, "parameters"), DELETE, FieldError,
     "pieces[0]: missing key 'parameters'; required keys: duration, parameters"),
    ("field", ("field", "nodes"), "x0 x1", FieldError,
     "field.nodes: expected a list of lists, got a string"),
    ("field", ("field", "nodes", 2), ["sin"], FieldError,
     "field.nodes[2]: expected at least 2 elements, got 1"),
    ("field", ("field", "outputs", 0), -1, FieldError,
     "field.outputs[0]: -1 is out of range; it must be >= 0"),
    ("field", ("values",), [1, 2], FieldError, "give only one of the keys pieces, values"),
    ("field", ("torque",), 1, FieldError,
     "unknown key 'torque'; allowed keys: field, sphere, pieces, values"),
    ("field", ("sphere",), "yes", FieldError, "sphere: expected true or false, got a string"),
    # tokens instance
    ("tokens-instance", ("population", "gaussian", "cov"), "identity", ShapeError,
     "population.gaussian.cov: expected a list of rows, each a list of numbers, got a string"),
    ("tokens-instance", ("population",), {"cauchy": {"scale": 1}}, SchemaError,
     "population: unknown key 'cauchy'; give exactly one of 'gaussian' or 'uniform'"),
    ("tokens-instance", ("samples",), DELETE, SchemaError,
     "missing key 'samples'; required keys: Q, K, V, R, samples, population"),
    ("tokens-instance", ("n",), 8, SchemaError,
     "unknown key 'n'; allowed keys: Q, K, V, R, samples, population"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "where", "value", "cls", "message"),
    BROKEN,
    ids=[f"{c[0]}-{'.'.join(map(str, c[1]))}-{i}" for i, c in enumerate(BROKEN)],
)
def test_a_broken_file_names_the_file_and_the_json_path(
    tmp_path: Path, kind: str, where: tuple, value: Any, cls: type, message: str
) -> None:
    bad = mutate(example(kind), where, value)
    with pytest.raises(jsonschema.ValidationError):  # the shipped schema refuses it too
        jsonschema.validate(bad, schema(kind))
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(cls, match="^" + re.escape(f"{path}: {message}")) as info:
        READERS[kind](path)
    assert type(info.value) is cls and "\n" not in str(info.value)
    assert info.value.source == str(path)
    # the same message from validate_json alone (the path is the one of the JSON document)
    with pytest.raises(cls, match="^" + re.escape(f"{path}: {message}")):
        validate_json(bad, kind, path, error=FieldError if kind == "field" else None,
                      shape_error=FieldError if kind == "field" else ShapeError,
                      bound_error=ShapeError if kind == "schedule" else None)  # fmt: skip


def test_a_bare_graph_field_file_is_valid_and_paths_are_its_own(tmp_path: Path) -> None:
    graph = example("field")["field"]
    graph = {
        **graph,
        "parameters": [],
        "nodes": [["x", 0], ["x", 1], ["neg", 0]],
        "outputs": [1, 2],
    }
    validate_json(graph, "field")
    with pytest.raises(SchemaError, match=r"^outputs\[1\]: expected an integer, got a number"):
        validate_json({**graph, "outputs": [1, 2.5]}, "field")
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({**graph, "nodes": [["x", 0], "neg"]}))
    with pytest.raises(FieldError, match="^" + re.escape(f"{path}: nodes[1]: expected")):
        read_field(str(path), time=1)


def test_lipschitz_flow_instance_schedule_is_checked_with_its_path(tmp_path, capsys) -> None:
    instance = {"schedule": mutate(example("schedule"), ("pieces", 1, "W"), "W"), "X": [[0, 0]]}
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(instance))
    argv = ["lipschitz", "--instance", str(path), "--hypothesis", "flow"]
    assert main([*argv, "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: schedule.pieces[1].W: expected a list of rows" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()


def test_the_command_line_exits_2_with_the_path(tmp_path: Path, capsys) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text(json.dumps(mutate(example("schedule"), ("pieces", 1, "W"), [[1, 0]])))
    points = tmp_path / "p.json"
    points.write_text(json.dumps({"X": [[0, 0]], "Y": "none"}))
    out = tmp_path / "c.json"
    assert main(["flow", "--schedule", str(schedule), "--points", str(points),
                 "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()
    assert str(schedule) in err or str(points) in err


def test_validation_is_fast_on_a_large_file() -> None:
    """The fast path of ``items`` keeps structure checking far cheaper than reading numbers."""
    import time

    big = {"X": [[0.5 * i, "1/3", -i, "1e-3"] for i in range(50_000)]}
    validate_json(big, "points")  # warm: jsonschema imported, validator built
    t0 = time.perf_counter()
    validate_json(big, "points")
    assert time.perf_counter() - t0 < 2.0  # jsonschema alone: ~20 s on this machine
    big["X"][-1][2] = None
    with pytest.raises(NumberFormatError, match=r"^X\[49999\]\[2\]: None"):
        validate_json(big, "points")


# --- every valid file passes: the examples, with numbers in every accepted form ---------------


def _defs_target(root: dict, sub: Any) -> Any:
    while isinstance(sub, dict) and "$ref" in sub and sub["$ref"] != "#/$defs/number":
        sub = root["$defs"][sub["$ref"].removeprefix("#/$defs/")]
    return sub


def number_paths(root: dict, sub: Any, inst: Any, path: tuple = ()) -> list[tuple]:
    """The paths of ``inst`` whose schema is ``$defs/number`` (walking the schemas used here:
    properties, items, if/then/else, oneOf by the branch that holds, additionalProperties)."""
    sub = _defs_target(root, sub)
    if not isinstance(sub, dict):
        return []
    if sub.get("$ref") == "#/$defs/number":
        return [path]
    if "if" in sub:
        branch = (
            sub["then"]
            if jsonschema.Draft202012Validator(sub["if"]).is_valid(inst)
            else sub["else"]
        )
        return number_paths(root, branch, inst, path)
    if "oneOf" in sub:
        validator = jsonschema.Draft202012Validator
        for branch in sub["oneOf"]:
            if validator({**_defs_target(root, branch), "$defs": root["$defs"]}).is_valid(inst):
                return number_paths(root, branch, inst, path)
        return []
    out: list[tuple] = []
    if isinstance(inst, dict):
        props = sub.get("properties", {})
        for key, value in inst.items():
            child = props.get(key, sub.get("additionalProperties"))
            out += number_paths(root, child, value, (*path, key))
    elif isinstance(inst, list) and "items" in sub:
        for i, value in enumerate(inst):
            out += number_paths(root, sub["items"], value, (*path, i))
    return out


def number_forms() -> st.SearchStrategy[Any]:
    """Every number form the readers accept: JSON integers and doubles, decimal, exponent,
    rational, dyadic and hexadecimal strings (with surrounding spaces)."""
    ints = st.integers(-(10**30), 10**30)
    floats = st.floats(allow_nan=False, allow_infinity=False)
    fractions = st.fractions(max_denominator=10**12).map(lambda q: f"{q.numerator}/{q.denominator}")
    decimals = st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str)
    exponents = st.tuples(ints, st.integers(-400, 400)).map(lambda t: f"{t[0]}e{t[1]}")
    dyadics = st.tuples(ints, st.integers(-1074, 1074)).map(lambda t: f"{t[0]}*2^{t[1]}")
    hexes = floats.map(float.hex)
    strings = st.one_of(fractions, decimals, exponents, dyadics, hexes, ints.map(str))
    return st.one_of(ints, floats, strings, strings.map(lambda s: f" {s} "))


KINDS = sorted(READERS)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_every_example_with_its_numbers_in_any_form_passes_validation(kind: str, data) -> None:
    obj = example(kind)
    validate_json(obj, kind)  # the example itself
    root = schema(kind)
    paths = number_paths(root, root, obj)
    assert paths, kind  # every example holds numbers
    chosen = data.draw(st.lists(st.sampled_from(paths), max_size=8, unique=True))
    for path in chosen:
        obj = mutate(obj, path, data.draw(number_forms()))
    assert validate_json(obj, kind) is obj
    jsonschema.validate(obj, root)  # and jsonschema's own validator agrees


@pytest.mark.parametrize("kind", KINDS)
def test_every_example_is_read(kind: str) -> None:
    READERS[kind](EXAMPLES / f"{kind}.json")


def leaves() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
                        st.sampled_from(["", "1/3", "x", "relu"]))  # fmt: skip
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(["a", "X", "points"]), inner, max_size=2),
        ),
        max_leaves=6,
    )


def all_paths(inst: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if path else []
    if isinstance(inst, dict):
        for key, value in inst.items():
            out += all_paths(value, (*path, key))
    elif isinstance(inst, list):
        for i, value in enumerate(inst):
            out += all_paths(value, (*path, i))
    return out


@given(kind=st.sampled_from(KINDS), data=st.data())
def test_validate_json_agrees_with_jsonschema(kind: str, data) -> None:
    """The fast path changes the cost, never the answer: a random edit of an example is
    refused by :func:`validate_json` exactly when jsonschema's own validator refuses it, and
    always with a CertifiedError (never a bare jsonschema or Python exception)."""
    obj = example(kind)
    for _ in range(data.draw(st.integers(1, 3))):
        obj = mutate(obj, data.draw(st.sampled_from(all_paths(obj))), data.draw(leaves()))
    valid = jsonschema.Draft202012Validator(schema(kind)).is_valid(obj)
    try:
        validate_json(obj, kind)
    except CertifiedError as exc:
        assert not valid, exc
        assert "\n" not in str(exc)
    else:
        assert valid


def test_huge_number_strings_are_still_accepted() -> None:
    """The schemas set no length limit on number strings: a reader accepted a 200,000-digit
    rational before the schemas were enforced, and still does."""
    q = "1/" + "3" * 200_000
    assert validate_json({"X": [[q]]}, "points")
    assert io.exact_matrix([[q]], "X")[0, 0].q > 10**100_000


@pytest.mark.parametrize(
    ("mask", "got"), [(None, "null"), (3, "3"), ("cause", '"cause"'), ({"a": 1}, "an object")]
)
def test_alternatives_that_are_not_objects_are_named(tmp_path: Path, mask: Any, got: str) -> None:
    """A ``oneOf`` of a constant and an array (a stack layer's mask) names both forms (the
    message once read 'exactly one of ? or ?')."""
    model = {"dimension": 2, "layers": [{"type": "attention", "mask": mask, "heads": [
        {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]]}]}]}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(model, schema("stack-model"))
    message = f'layers[0].mask: expected "causal" or an array, got {got}'
    with pytest.raises(SchemaError, match=re.escape(message)):
        validate_json(model, "stack-model", tmp_path / "m.json")
