"""``certified sinkhorn``: verified certificates, the --json contract (exact bounds), bad input
exits 2 with one line and writes nothing."""

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


@pytest.mark.parametrize("extra", [[], ["--divergence"], ["--q", "1"]])
def test_json_output_and_certificate(tmp_path, capsys, extra):
    a, b = _files(tmp_path)
    out = tmp_path / "s.json"
    args = ["sinkhorn", "--mu", str(a), "--nu", str(b), "--gamma", "0.25", "--out", str(out)]
    assert main([*args, *extra, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["command"] == "sinkhorn" and result["verdict"] == "VERIFIED"
    assert result["certificate"] == str(out) and result["gamma"] == "1/4"
    lo, hi = to_fmpq(result["lower"]), to_fmpq(result["upper"])
    assert lo <= hi and (hi - lo) < fmpq(1, 10**10) * abs(hi)
    assert check_file(out).verified
    cert = json.loads(out.read_text())
    assert cert["instance"]["quantity"] == ("divergence" if extra == ["--divergence"] else "ot")
    assert to_fmpq(cert["claim"]["upper"]) == hi


BAD = [
    ({"--gamma": "0"}, "gamma"),
    ({"--gamma": "-1"}, "gamma"),
    ({"--gamma": "abc"}, "gamma"),
    ({"--gamma": "1e400"}, "gamma"),  # once an internal error (float of a huge rational)
    ({"--gamma": "nan"}, "gamma"),
    ({"--q": "1/2"}, "q"),
    ({"mu": {"points": [[0, 0], [1, 1]], "weights": [0.5, 0.6]}}, "sum"),
    ({"mu": {"points": [[0, 0, 0]]}}, "dimension"),
    ({"mu": {"points": [[0, "nan"]]}}, "points"),
    ({"mu": {"points": [[0, 0]], "weights": ["nan"]}}, "weights"),
    ({"mu": {"points": []}}, "points"),
    ({"mu": {"points": [[0, 0]], "weights": [1], "extra": 1}}, "extra"),
    ({"mu": {"points": [[0, 0], [1, 1]], "weights": ["3/2", "-1/2"]}}, "negative"),
    ({"mu": {"points": [[1e300, 0]]}}, "overflow"),
]


@pytest.mark.parametrize("change,needle", BAD)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, change, needle):
    a, b = _files(tmp_path, mu=change.get("mu", MU))
    out = tmp_path / "s.json"
    opts = {"--gamma": "1", "--q": "2"} | {k: v for k, v in change.items() if k.startswith("--")}
    args = ["sinkhorn", "--mu", str(a), "--nu", str(b), "--out", str(out)]
    for k, v in opts.items():
        args += [k, v]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not out.exists()
