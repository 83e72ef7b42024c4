"""``certified wasserstein``: a verified certificate is written and re-checks; --json follows
the contract; bad input exits 2 and writes nothing; ``bench wasserstein --quick`` runs."""

from __future__ import annotations

import json

import pytest
from flint import fmpq

from certified.arith.exact import to_fmpq
from certified.checker import check_file
from certified.cli import main

MU = {"points": [["1/3", 0], [1, 1], [2, 0]], "weights": ["1/2", "1/4", "1/4"]}
NU = {"points": [[0, 0], [1, 2]], "weights": ["1/3", "2/3"]}


def _files(tmp_path, mu=MU, nu=NU):
    a, b = tmp_path / "mu.json", tmp_path / "nu.json"
    a.write_text(json.dumps(mu))
    b.write_text(json.dumps(nu))
    return a, b


@pytest.mark.parametrize("q", ["2", "1", "3/2"])
def test_json_output_and_certificate(tmp_path, capsys, q):
    a, b = _files(tmp_path)
    out = tmp_path / "w.json"
    code = main(["wasserstein", "--mu", str(a), "--nu", str(b), "--q", q, "--out", str(out),
                 "--json"])  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["command"] == "wasserstein" and result["verdict"] == "VERIFIED"
    assert result["certificate"] == str(out)
    assert isinstance(result["seconds"], float)
    lo, hi = to_fmpq(result["lower"]), to_fmpq(result["upper"])
    assert 0 < lo <= hi
    assert check_file(out).verified
    cert = json.loads(out.read_text())
    assert to_fmpq(cert["claim"]["lower"]) == lo and to_fmpq(cert["instance"]["q"]) == to_fmpq(q)


def test_text_output(tmp_path, capsys):
    a, b = _files(tmp_path)
    out = tmp_path / "w.json"
    assert main(["wasserstein", "--mu", str(a), "--nu", str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "VERIFIED" in text and "W_2" in text


def test_uniform_points_without_weights(tmp_path, capsys):
    a, b = _files(tmp_path, {"points": [[0], [1]]}, {"points": [[0], [3]]})
    out = tmp_path / "w.json"
    code = main(["wasserstein", "--mu", str(a), "--nu", str(b), "--solver", "assignment",
                 "--out", str(out), "--json"])  # fmt: skip
    assert code == 0
    r = json.loads(capsys.readouterr().out)
    assert to_fmpq(r["lower_q"]) <= 2 <= to_fmpq(r["upper_q"])
    assert to_fmpq(r["lower"]) ** 2 <= 2 <= to_fmpq(r["upper"]) ** 2
    assert fmpq(2) - to_fmpq(r["lower_q"]) < fmpq(1, 10**14)


@pytest.mark.parametrize(
    "mu, nu, extra, match",
    [
        ({"points": [[0], [1]], "weights": [0.5, 0.25]}, NU, [], "sum to"),
        ({"points": [[0], [1]], "weights": ["3/2", "-1/2"]}, NU, [], "negative"),
        ({"points": [[0], ["nan"]]}, NU, [], "not finite"),
        ({"points": [[0, 1], [1]]}, NU, [], "coordinates"),
        ({"points": []}, NU, [], "empty"),
        ({"points": [[0], [1]]}, NU, [], "dimension"),
        (MU, NU, ["--q", "1/2"], "q"),
        (MU, NU, ["--q", "abc"], "q"),
        ({"points": [[0, 0]], "extra": 1}, NU, [], "extra"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, mu, nu, extra, match):
    a, b = _files(tmp_path, mu, nu)
    out = tmp_path / "w.json"
    code = main(["wasserstein", "--mu", str(a), "--nu", str(b), "--out", str(out), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1
    assert not out.exists()


def test_missing_file_exits_2(tmp_path, capsys):
    out = tmp_path / "w.json"
    code = main(["wasserstein", "--mu", str(tmp_path / "nope.json"), "--nu",
                 str(tmp_path / "nope.json"), "--out", str(out)])  # fmt: skip
    assert code == 2
    assert not out.exists()


def test_bench_quick(capsys):
    pytest.importorskip("ot")
    assert main(["bench", "wasserstein", "--quick", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    names = [b["name"] for b in r["benchmarks"]]
    assert any("W_2 and W_2^2 enclosures, n=100" in n for n in names)
    assert any("assignment" in n for n in names)
    for b in r["benchmarks"]:
        assert b["relative_gap"] <= 1e-12
        assert b["pot_inside_bounds_q"]
        # W_q and W_q^q labelled consistently: POT's emd2 is W_q^q, inside the W_q^q bounds
        assert b["W_q^q_lower"] <= b["pot_emd2 (W_q^q)"] <= b["W_q^q_upper"]
        assert b["W_q_lower"] <= b["W_q_upper"]
        assert b["ratio"] == pytest.approx(b["seconds"] / b["baseline_seconds"])
