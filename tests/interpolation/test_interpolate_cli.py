"""``certified interpolate``: JSON contract, certificates the checker accepts, bad input exits 2
and writes nothing."""

import json

import numpy as np
import pytest

from certified.checker import check_file
from certified.cli import main


def _dataset(tmp_path, X, Y, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"X": np.asarray(X).tolist(), "Y": np.asarray(Y).tolist()}))
    return path


RNG = np.random.default_rng(8)
X, Y = RNG.random((12, 3)), RNG.random((12, 3))


@pytest.mark.parametrize("flag", [[], ["--float"]])
def test_interpolate_json_contract_and_certificate(tmp_path, capsys, flag):
    data, out = _dataset(tmp_path, X, Y), tmp_path / "cert.json"
    argv = ["interpolate", "--data", str(data), "--width", "5", "--time", "1/2", "--out", str(out)]
    assert main([*argv, "--json", *flag]) == 0
    res = json.loads(capsys.readouterr().out)
    assert {
        "command",
        "verdict",
        "certificate",
        "seconds",
        "switches",
        "formula_switches",
        "exact",
        "max_error",
    } <= set(res)
    assert res["command"] == "interpolate" and res["verdict"] == "VERIFIED"
    assert res["switches"] == res["formula_switches"] == 5
    assert res["exact"] is (not flag)
    assert (res["max_error"] == "0") is (not flag)
    assert res["certificate"] == str(out)
    verdict = check_file(out)
    assert verdict.verified and verdict.kind == "interpolation"


def test_interpolate_high_dim_and_text_output(tmp_path, capsys):
    data, out = _dataset(tmp_path, X[:2], Y[:2]), tmp_path / "c.json"
    argv = ["interpolate", "--data", str(data), "--width", "1", "--variant", "high-dim"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "high-dim" in text and "VERIFIED" in text and "exactly" in text
    assert check_file(out).verified


@pytest.mark.parametrize(
    ("X", "Y", "args", "message"),
    [
        ([[0, 1], [0, 1]], [[1, 1], [2, 2]], [], "X[0] and X[1]"),
        ([[0, 1], [1, 1]], [[2, 2], [2, 2]], [], "Y[0] and Y[1]"),
        ([[0], [1]], [[1], [0]], [], "increasing"),
        ([[0, 1]], [[1, 1]], ["--width", "0"], "p = 0"),
        ([[0, 1]], [[1, 1]], ["--time", "-1"], "not positive"),
        ([[0, 1]], [[1, 1, 1]], [], "expected 2 coordinates"),
        ([[0, 1], [1, 1]], [[2, 2], [3, 3]], ["--variant", "high-dim"], "d > N"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, X, Y, args, message):
    data, out = _dataset(tmp_path, X, Y), tmp_path / "cert.json"
    argv = ["interpolate", "--data", str(data), "--out", str(out)]
    argv += args if "--width" in args else ["--width", "2", *args]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_data_file_exits_2(tmp_path, capsys):
    out = tmp_path / "cert.json"
    argv = ["interpolate", "--data", str(tmp_path / "none.json"), "--width", "2"]
    assert main([*argv, "--out", str(out)]) == 2
    assert not out.exists()


def test_float_export_of_the_high_dimensional_variant(tmp_path, capsys):
    # C's own direction is a long integer vector whose nearest doubles are not laminar (no
    # certificate, exit 1, before issue 15); the export now rebuilds C's phase in doubles,
    # exactly laminar: auto and an explicit high-dim both write a certificate the checker accepts
    from certified.arith.exact import to_fmpq

    rng = np.random.default_rng(1)
    data = _dataset(tmp_path, rng.random((2, 4)), rng.random((2, 4)))
    argv = ["interpolate", "--data", str(data), "--width", "1", "--float", "--json"]
    for variant in ("auto", "high-dim"):
        out = tmp_path / f"{variant}.json"
        assert main([*argv, "--variant", variant, "--out", str(out)]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["variant"] == "high-dim" and res["exact"] is False
        assert res["verdict"] == "VERIFIED" and res["certificate"] == str(out)
        assert 0 < to_fmpq(res["max_error"]) < to_fmpq("1e-9")
        assert check_file(out).verified
