"""``certified tokens``: verdicts and exit codes, JSON keys, bad input exits 2 in one line."""

from __future__ import annotations

import json

import flint
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from certified.cli import main

INSTANCE = {
    "Q": [[1, 0.5], [0, 1]],
    "K": [[1, 0], [0, 1]],
    "V": [[1, 0], [0, 1]],
    "R": 1,
    "samples": [[0.1, -0.3], [1.2, 0.4], [-0.7, 0.9], [0.3, 0.3], ["1/3", "-2/3"]],
    "population": {"gaussian": {"mean": [0, 0], "cov": [[1, 0], [0, 1]]}},
}


def _run(tmp_path, capsys, instance, *extra):
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(instance) if not isinstance(instance, str) else instance)
    rc = main(["tokens", "--instance", str(path), *extra])
    return rc, capsys.readouterr()


def test_verified_and_refuted_json(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, INSTANCE, "--C", "5", "--json")
    obj = json.loads(out.out)
    assert rc == 0 and obj["verdict"] == "VERIFIED" and obj["certificate"] is None
    for key in ("command", "seconds", "lower", "upper", "threshold", "witness", "boxes"):
        assert key in obj
    assert flint.fmpq(obj["upper"]) <= flint.fmpq(obj["threshold"][0])
    rc, out = _run(tmp_path, capsys, INSTANCE, "--C", "1/10", "--json")
    obj = json.loads(out.out)
    assert rc == 0 and obj["verdict"] == "REFUTED"
    assert flint.fmpq(obj["lower"]) > flint.fmpq(obj["threshold"][1])


def test_undecided_exit_1(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, INSTANCE, "--C", "2", "--max-boxes", "1", "--rel-tol", "10")
    # after one box: lower ~ 0.28·√5, upper ~ 3·√5 straddle C = 2 (C/√n ~ 0.89)
    assert rc == 1 and "UNDECIDED" in out.out and out.err.strip()


def test_hardmax_and_uniform(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, INSTANCE, "--C", "1", "--family", "hardmax", "--rate", "log")
    assert rc == 0 and "REFUTED" in out.out
    box = dict(INSTANCE, population={"uniform": {"lower": [-1, -1], "upper": [1, "3/2"]}})
    rc, out = _run(tmp_path, capsys, box, "--C", "100")
    assert rc == 0 and "VERIFIED" in out.out


@pytest.mark.parametrize(
    ("change", "args", "text"),
    [
        ({"R": 0}, (), "R: 0 is not > 0"),
        ({"R": -2}, (), "R: -2 is not > 0"),
        ({}, ("--C", "-1"), "C: -1 is not > 0"),
        ({"samples": [[0.1, 0.2, 0.3]]}, (), "samples"),
        ({"population": {"gaussian": {"mean": [0, 0]}}}, (), "missing key 'cov'"),
        ({"population": {"poisson": {}}}, (), "unknown key 'poisson'"),
        ({"population": {}}, (), "exactly one"),
        ({"population": {"uniform": {"lower": [0, 0], "upper": [0, 1]}}}, (), "upper"),
        ({"extra": 1}, (), "unknown key 'extra'"),
        ({"samples": [["1e400", 0.0], [0.5, 0.5]]}, (), "samples: "),
        ({"Q": [["1e400", 0], [0, 1]]}, (), "Q, K, V: "),
        ({"R": "1e200"}, (), "R: "),
        ({"samples": [["1e200", 0.0], [0.5, 0.5]]}, (), "too large for the float64"),
        ({}, ("--C", "1", "--rate", "log", "--max-boxes", "0"), "max_boxes"),
    ],
)
def test_bad_input_exit_2(tmp_path, capsys, change, args, text):
    inst = dict(INSTANCE, **change)
    rc, out = _run(tmp_path, capsys, inst, *(args or ("--C", "1")))
    assert rc == 2 and out.out == ""
    assert text in out.err and len(out.err.strip().splitlines()) == 1
    assert "Traceback" not in out.err


def test_malformed_json_exit_2(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, "{not json", "--C", "1")
    assert rc == 2 and len(out.err.strip().splitlines()) == 1


HOSTILE = [
    "nan", "inf", "-Infinity", "1/0", "1e400", "1e-400", "0x10", "", "1 2", None, True, [], {},
    [[]], [None], {"a": 1}, "\u00e9", "1" * 5000, -1, 0, 10**400,
]  # fmt: skip


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(obj, list):
        return [p for k, v in enumerate(obj) for p in _leaves(v, (*path, k))] or [path]
    return [path]


def _set(obj, path, value):
    if not path:
        return value
    obj[path[0]] = _set(obj[path[0]], path[1:], value)
    return obj


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_hostile_leaves_never_trace(tmp_path, capsys, data):
    obj = json.loads(json.dumps(INSTANCE))
    if data is not None:
        path = data.draw(st.sampled_from(_leaves(obj)))
        obj = _set(obj, path, data.draw(st.sampled_from(HOSTILE)))
        family = data.draw(st.sampled_from(["softmax", "hardmax"]))
    else:  # pinned: a sample beyond the double range
        obj["samples"][0][0] = "1e400"
        family = "softmax"
    try:
        rc, out = _run(tmp_path, capsys, obj, "--C", "1", "--family", family, "--max-boxes", "50")
    except SystemExit as exc:  # argparse usage error
        rc, out = exc.code, capsys.readouterr()
    assert "Traceback" not in out.err and rc in (0, 1, 2), (rc, out.err)
    if rc == 2:
        assert out.err.count("\n") == 1, out.err
