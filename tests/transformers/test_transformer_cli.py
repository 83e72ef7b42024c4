"""``certified transformer flow | cluster``: the --json contract, certificates the checker
accepts, bad input exits 2 with one line and writes nothing."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from certified.checker import check_file
from certified.cli import main

E3 = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
FLOW = {"tokens": [[1, 0, 0], [0, 0.6, 0.8]], "pieces": [{"duration": "1/4", "V": E3, "B": E3}]}


def _write(tmp_path, obj, name="inst.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_flow_json_and_certificate(tmp_path, capsys):
    inst, out = _write(tmp_path, FLOW), tmp_path / "cert.json"
    assert main(["transformer", "flow", "--instance", str(inst), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "transformer flow" and data["verdict"] == "VERIFIED"
    assert data["certificate"] == str(out) and isinstance(data["seconds"], float)
    assert len(data["enclosures"]) == 2 and len(data["enclosures"][0]) == 3
    lo, hi = data["enclosures"][1][2]
    assert isinstance(lo, str) and Fraction(lo) <= Fraction(hi)
    assert float(data["max_width"]) < 1e-12
    assert check_file(out).verified


def test_cluster_json_and_certificate(tmp_path, capsys):
    inst, out = _write(tmp_path, FLOW), tmp_path / "cert.json"
    argv = ["transformer", "cluster", "--instance", str(inst), "--eps", "2", "--samples", "2"]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "VERIFIED" and data["switches"] == 0
    assert float(data["diameter_upper"]) <= 2 and data["hemisphere_witness"] is not None
    assert data["first_time"] is not None
    assert check_file(out).verified


@pytest.mark.parametrize(
    ("obj", "extra", "message"),
    [
        ({**FLOW, "tokens": [[1, 0, 0], [0, 1, 1]]}, [], "off the unit sphere"),
        ({**FLOW, "pieces": [{"duration": "1/4", "V": [[float("nan")] * 3] * 3}]}, [], "NaN"),
        (FLOW, ["--eps", "1"], "--eps"),
    ],
)
def test_bad_input_flow(tmp_path, capsys, obj, extra, message):
    inst, out = _write(tmp_path, obj), tmp_path / "cert.json"
    code = main(["transformer", "flow", "--instance", str(inst), *extra, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("obj", "extra", "message"),
    [
        (FLOW, [], "--eps"),
        (FLOW, ["--eps", "-1"], "--eps"),
        (
            {**FLOW, "pieces": [{"duration": 1, "V": E3, "B": [[2, 0, 0], E3[1], E3[2]]}]},
            ["--eps", "1"],
            "B = beta I",
        ),
    ],
)
def test_bad_input_cluster(tmp_path, capsys, obj, extra, message):
    inst, out = _write(tmp_path, obj), tmp_path / "cert.json"
    code = main(["transformer", "cluster", "--instance", str(inst), *extra, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert not out.exists()


def test_a_flow_certificate_out_of_the_generic_engines_reach_is_refused_at_once(tmp_path, capsys):
    """n = 64, d = 8 (the bench's size): UNDECIDED at once with what to do (--no-certificate),
    exit 1, nothing written; not hours of the generic engine."""
    import json

    import numpy as np

    from certified.cli import main
    from certified.transformers.command import GENERIC_MAX_COORDINATES

    X = np.random.default_rng(3).standard_normal((64, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    eye = np.eye(8).tolist()
    path = tmp_path / "inst.json"
    path.write_text(
        json.dumps({"tokens": X.tolist(), "pieces": [{"duration": 5, "V": eye, "B": eye}]})
    )
    out = tmp_path / "c.json"
    assert 64 * 8 > GENERIC_MAX_COORDINATES
    argv = ["transformer", "flow", "--instance", str(path), "--out", str(out), "--json"]
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "UNDECIDED" and data["certificate"] is None
    assert "--no-certificate" in data["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst.json"]
