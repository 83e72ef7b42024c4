"""``certified lipschitz``: verdicts, JSON keys, certificates re-checked; bad input exits 2 and
writes nothing."""

from __future__ import annotations

import json

import pytest

from certified.checker import check_file
from certified.cli import main

H1 = {
    "Q": [[0, 1], [0, -1]],
    "K": [[1, 0], [1, 0]],
    "V": [[1, 2], [0, 1]],
    "R": 1,
    "X": [[1, 0], [0, "1/2"], ["-1/2", "-1/2"]],
}
MEASURES = {
    "Q": [["1/2", 0]],
    "K": [[1, "1/3"]],
    "V": [[1, 0], [0, "1/2"]],
    "R": 1,
    "mu": {"points": [[0, 0], ["1/2", "1/4"]], "weights": ["1/3", "2/3"]},
    "nu": {"points": [["1/10", 0], ["1/2", "1/2"]]},
}


def _run(tmp_path, instance, hypothesis, capsys, *extra):
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(instance) if not isinstance(instance, str) else instance)
    out = tmp_path / "cert.json"
    rc = main(
        [
            "lipschitz",
            "--instance",
            str(path),
            "--hypothesis",
            hypothesis,
            "--out",
            str(out),
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return rc, out, captured


def test_h1_refutation_written_and_rechecked(tmp_path, capsys):
    rc, out, cap = _run(tmp_path, H1, "H1", capsys, "--json")
    assert rc == 0, cap.err
    data = json.loads(cap.out)
    assert data["verdict"] == "REFUTED" and data["counterexample"] is True
    assert data["command"] == "lipschitz" and data["certificate"] == str(out)
    for key in ("lhs_upper", "rhs_lower", "bound", "seconds", "lhs_lower", "rhs_upper"):
        assert key in data
    assert data["rhs_upper"] == "0"
    assert check_file(out).verified


def test_h2_verified_text_output(tmp_path, capsys):
    rc, out, cap = _run(tmp_path, H1, "H2", capsys)
    assert rc == 0 and "VERIFIED" in cap.out and check_file(out).verified


def test_h3_on_measures_writes_its_certificate(tmp_path, capsys):
    rc, out, cap = _run(tmp_path, MEASURES, "H3", capsys, "--json")
    data = json.loads(cap.out)
    assert rc == 0 and data["verdict"] == "VERIFIED" and data["certificate"] == str(out)
    v = check_file(out)
    assert v.verified and v.kind == "lipschitz" and v.reason.startswith("H3 VERIFIED"), v.reason


def test_flow_hypothesis(tmp_path, capsys):
    from certified.flow.examples import LAMINAR_DEMO

    inst = {"schedule": LAMINAR_DEMO, "X": [[0, 0], ["1/2", "1/3"], [-1, 1]]}
    rc, out, cap = _run(tmp_path, inst, "flow", capsys, "--json")
    data = json.loads(cap.out)
    assert rc == 0 and data["verdict"] == "VERIFIED" and check_file(out).verified


BAD = [
    ({**H1, "R": 0}, "H1", "R"),
    ({**H1, "R": "-1"}, "H1", "R"),
    ('{"Q": [[NaN]], "K": [[1]], "V": [[1]], "R": 1, "X": [[0]]}', "H1", "NaN"),
    ({**H1, "K": [[1, 0, 0]]}, "H1", "K"),
    ({**H1, "V": [[1]]}, "H1", "V"),
    ({**H1, "X": []}, "H1", "X"),
    ({**H1, "X": [[2, 0]]}, "H1", "X[0]"),
    ({**H1, "X": [[0, 0, 0]]}, "H2", "X[0]"),
    ({k: v for k, v in H1.items() if k != "X"}, "H1", "X"),
    ({**MEASURES, "nu": {"points": [[0, 0]], "weights": ["1/2"]}}, "H3", "weights"),
    (
        {**MEASURES, "mu": {"points": [[0, 0], [0, 0]], "weights": ["3/2", "-1/2"]}},
        "H3",
        "negative",
    ),
    ({**MEASURES, "mu": {"points": []}}, "H3", "mu.points"),
    ({k: v for k, v in MEASURES.items() if k != "nu"}, "H3", "mu, nu"),
    ({**H1, "extra": 1}, "H1", "extra"),
    ({"schedule": {"dimension": 2}, "X": [[0, 0]]}, "flow", "activation"),
]


@pytest.mark.parametrize(("instance", "hypothesis", "field"), BAD)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, instance, hypothesis, field):
    rc, out, cap = _run(tmp_path, instance, hypothesis, capsys)
    assert rc == 2, cap.err
    assert field in cap.err and cap.err.count("\n") == 1
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["instance.json"]


def test_bad_precision_and_missing_file(tmp_path, capsys):
    rc, out, _ = _run(tmp_path, H1, "H1", capsys, "--prec", "3")
    assert rc == 2 and not out.exists()
    rc = main(
        [
            "lipschitz",
            "--instance",
            str(tmp_path / "nope.json"),
            "--hypothesis",
            "H1",
            "--out",
            str(tmp_path / "c.json"),
        ]
    )
    assert rc == 2


def test_search_flag(tmp_path, capsys):
    rc, _, cap = _run(tmp_path, H1, "H2", capsys, "--search", "--json")
    data = json.loads(cap.out)
    assert rc == 0 and data["search"]["n"] == 3
    assert set(data["search"]["ratio_lower"]) == {"H1", "H2"}
    other = tmp_path / "h3"
    other.mkdir()
    rc, out, cap = _run(other, MEASURES, "H3", capsys, "--search")
    assert rc == 2 and "--search" in cap.err and not out.exists()
