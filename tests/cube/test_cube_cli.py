"""``certified transport-to-cube``: JSON contract, a certificate the checker accepts (empirical
measures and densities), bad input exits 2 with a specific message and writes nothing."""

import json
import re

import numpy as np
import pytest

from certified.checker import check_file
from certified.cli import main


def _write(tmp_path, obj, name="mu.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


POINTS = np.random.default_rng(11).standard_normal((90, 2)).tolist()


def test_json_contract_and_certificate(tmp_path, capsys):
    mu, out = _write(tmp_path, {"points": POINTS}), tmp_path / "cert.json"
    argv = ["transport-to-cube", "--measure", str(mu), "--width", "3", "--epsilon", "0.25"]
    assert main([*argv, "--q", "3/2", "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["command"] == "transport-to-cube" and res["verdict"] == "VERIFIED"
    assert res["certificate"] == str(out)
    assert res["switches"] == 2 * -(-90 // 3) - 1
    assert isinstance(res["formula_switches"], int) and res["formula_switches"] > res["switches"]
    num, den = (int(x) for x in res["bound"].split("/"))
    assert num / den <= 0.25 and res["q"] == "3/2"
    verdict = check_file(out)
    assert verdict.verified and verdict.kind == "transport-to-cube"


def test_text_output(tmp_path, capsys):
    mu, out = _write(tmp_path, {"points": POINTS}), tmp_path / "cert.json"
    argv = ["transport-to-cube", "--measure", str(mu), "--width", "2", "--epsilon", "1/4"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "VERIFIED: certificate written to" in text and "switches (formula" in text


BAD = [
    ({"points": [[0, 0], [1, 1]], "weights": ["1/2", "1/3"]}, [], "weights: sum to 5/6"),
    ({"points": [[0, 0], [1, 1]], "weights": ["3/2", "-1/2"]}, [], "negative"),
    ({"points": POINTS}, ["--width", "1"], "p >= d"),
    ({"points": POINTS}, ["--epsilon", "0"], "epsilon: 0 is not positive"),
    ({"points": POINTS}, ["--epsilon", "-1"], "epsilon"),
    ({"points": POINTS}, ["--q", "2"], r"q: 2 is outside \[1, 2/1\)"),
    ({"points": POINTS}, ["--q", "0.5"], "q: 1/2 is outside"),
    ({"points": POINTS}, ["--epsilon", "0.01"], "too few or too heavy"),
    ({"points": [[0.5], [0.25]]}, ["--width", "1"], "d = 1"),
    ({"grid": [[0, 1, 2], [0, 1]], "masses": [["1/2"], ["-1/2"]]}, [], r"masses\[1, 0\]: -1/2"),
    ({"grid": [[0, 1, 2], [0, 1]], "masses": [["1/2"], ["1/3"]]}, [], "masses: sum to 5/6"),
    ({"grid": [[0, 2, 1], [0, 1]], "masses": [["1/2"], ["1/2"]]}, [], "strictly increasing"),
    ({"grid": [[0, 1], [0, 1]], "masses": [["1/2", "1/2"]]}, [], "masses"),
    ({"grid": [[0, 1], [0, 1]], "masses": [[1]]}, ["--width", "1"], "p >= d"),
    ({"grid": [[0, 1], [0, 1]], "masses": [[1]]}, ["--q", "2"], "q: 2 is outside"),
    ({"grid": [[0, 1], [0, 1]], "masses": [[1]]}, ["--epsilon", "0"], "epsilon: 0 is not"),
    ({"grid": [[0, 1, 2]], "masses": ["1/2", "1/2"]}, ["--width", "1"], "d = 1"),
    ({"points": POINTS, "extra": 1}, [], "unknown key"),
]


@pytest.mark.parametrize(("obj", "extra", "message"), BAD)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, obj, extra, message):
    mu, out = _write(tmp_path, obj), tmp_path / "cert.json"
    opts = {"--width": "2", "--epsilon": "0.25"}
    for k, v in zip(extra[::2], extra[1::2], strict=True):
        opts[k] = v
    argv = ["transport-to-cube", "--measure", str(mu), "--out", str(out)]
    argv += [x for kv in opts.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()


def test_density_json_contract_and_certificate(tmp_path, capsys):
    dens = {"grid": [[0, 1, 2], [0, "1/2", 1]], "masses": [["1/4", "1/4"], ["1/8", "3/8"]]}
    mu, out = _write(tmp_path, dens), tmp_path / "cert.json"
    argv = ["transport-to-cube", "--measure", str(mu), "--width", "3", "--epsilon", "0.2"]
    assert main([*argv, "--q", "3/2", "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["verdict"] == "VERIFIED" and res["certificate"] == str(out)
    num, den = (int(x) for x in res["bound"].split("/"))
    assert num / den <= 0.2 and res["q"] == "3/2" and res["cells"] >= res["parts_per_axis"] ** 2
    assert res["formula_switches"] > res["switches"] > 0
    assert "W_2" in res["scope"] and check_file(out).verified


def test_out_naming_the_input_is_refused(tmp_path, capsys):
    mu = _write(tmp_path, {"points": POINTS})
    before = mu.read_text()
    argv = ["transport-to-cube", "--measure", str(mu), "--width", "2", "--epsilon", "0.25"]
    assert main([*argv, "--out", str(mu)]) == 2
    assert "--out" in capsys.readouterr().err and mu.read_text() == before
