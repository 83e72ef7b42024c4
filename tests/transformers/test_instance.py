"""Bad instances are refused with a specific error naming the field; good ones parse exactly."""

from __future__ import annotations

import flint
import pytest

from certified.errors import InputError, NonFiniteError, ShapeError
from certified.fields import attention_field
from certified.transformers import parse_instance
from certified.transformers.cluster import check_theorem_setting

E3 = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
OK = {"tokens": [[1, 0, 0], [0, 1, 0]], "pieces": [{"duration": 1, "V": E3, "B": E3}]}


def _with(**changes):
    obj = {**OK, **changes}
    return {k: v for k, v in obj.items() if v is not None}


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        (_with(tokens=[[1, 0, 0], [0, 2, 0]]), InputError, r"tokens\[1\].*off the unit sphere"),
        (_with(tokens=[[1, 0, 0], [0, float("nan"), 1]]), NonFiniteError, r"tokens\[1\]\[1\]"),
        (_with(tokens=[[1, 0, 0], [0, 1]]), ShapeError, r"tokens\[1\]"),
        (_with(weights=["1/2", "1/3"]), InputError, "not exactly 1"),
        (_with(weights=["3/2", "-1/2"]), InputError, "must be > 0"),
        (_with(extra=1), InputError, "unknown key 'extra'"),
        (_with(measures=[{"tokens": [[1, 0, 0]]}]), InputError, "not both"),
        (_with(tokens=None), InputError, "give either"),
        (_with(pieces=[{"duration": 0, "V": E3}]), InputError, "not positive"),
        (_with(pieces=[{"duration": 1, "V": E3, "heads": [{"V": E3}]}]), InputError, "not both"),
        (_with(pieces=[{"duration": 1, "W": [[1], [0], [0]]}]), InputError, "all of W, U, b"),
        (_with(pieces=[{"duration": 1, "B": [[1, 0], [0, 1]]}]), ShapeError, r"pieces\[0\]\.B"),
        (_with(pieces=[{"duration": 1, "V": [[float("inf")] * 3] * 3}]), NonFiniteError, "V"),
        (_with(pieces=[{"duration": 1, "activation": "relu"}]), InputError, "activation"),
        (_with(geometry="torus"), InputError, "geometry"),
        (_with(causal="yes"), InputError, "causal"),
    ],
)
def test_bad_instances(obj, error, match):
    with pytest.raises(error, match=match):
        parse_instance(obj)


def test_euclidean_tokens_need_not_be_unit():
    inst = parse_instance(_with(tokens=[[2, 0, 0], [0, 3, 0]], geometry="euclidean"))
    assert inst.state()[0, 0] == 2


def test_exact_values_and_padding():
    inst = parse_instance({"tokens": [[1, 0, 0]], "pieces": [
        {"duration": "1/3", "heads": [{"V": E3}, {"B": E3}]},
        {"duration": "0.1", "V": E3, "W": [[1], [0], [0]], "U": [[0, 1, 0]], "b": ["1/7"]},
    ]})  # fmt: skip
    assert inst.total_time == flint.fmpq(1, 3) + flint.fmpq(1, 10)
    assert inst.heads == 2 and inst.hidden == 1
    values = inst.values(inst.pieces[1])
    assert len(values) == len(inst.problem.field.parameters)
    assert values[-1] == flint.fmpq(1, 7)


def test_cluster_setting_is_checked():
    bad = parse_instance(
        _with(pieces=[{"duration": 1, "V": E3, "B": [[1, 0, 0], [0, 2, 0], [0, 0, 1]]}])
    )
    with pytest.raises(InputError, match="B = beta I"):
        check_theorem_setting(bad)
    with pytest.raises(InputError, match="sphere"):
        check_theorem_setting(parse_instance(_with(geometry="euclidean")))
    assert check_theorem_setting(parse_instance(OK)) == [1]


def test_attention_field_arguments():
    with pytest.raises(InputError, match="geometry"):
        attention_field([2], 3, geometry="flat")
    with pytest.raises(InputError, match="sizes"):
        attention_field([0], 3)
    f = attention_field([2, 1], 3, heads=2, hidden=1, causal=True)
    assert f.dimension == 9 and len(f.parameters) == 2 * 18 + 3 + 3 + 1
