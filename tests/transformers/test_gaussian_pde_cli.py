"""``certified transformer gaussian-pde``: the --json contract (mean, cov, eigenvalues as exact
decimal strings, max_width), a certificate the checker accepts and a mutated one it rejects;
bad input (covariance not SPD, shapes, a time past the blow-up) exits 2 with one line and
writes nothing."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from certified.checker import check_certificate, check_file
from certified.cli import main

PARAMS = {
    "mean": [1, "1/2"],
    "cov": [[1, "1/4"], ["1/4", "1/2"]],
    "Q": [[1, 0], [0, 1]],
    "K": [["1/2", 0], ["1/3", "1/5"]],
    "V": [["1/2", "1/10"], [0, "1/2"]],
    "target": {"mean": [0, 0], "cov": [[1, 0], [0, 1]]},
}


def _write(tmp_path, obj, name="params.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_json_contract_and_certificate(tmp_path, capsys):
    p, out = _write(tmp_path, PARAMS), tmp_path / "cert.json"
    argv = ["transformer", "gaussian-pde", "--params", str(p), "--time", "1/2"]
    assert main([*argv, "--save-at", "1/4", "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "transformer gaussian-pde" and data["verdict"] == "VERIFIED"
    assert data["certificate"] == str(out)
    assert len(data["mean"]) == 2 and len(data["cov"]) == 2 and len(data["eigenvalues"]) == 2
    for lo, hi in [*data["mean"], *data["eigenvalues"], *data["cov"][0], data["w2"].values()]:
        assert isinstance(lo, str) and Fraction(lo) <= Fraction(hi)
    (l1, h1), (l2, _) = data["eigenvalues"]
    assert Fraction(l1) > 0 and Fraction(h1) <= Fraction(l2)  # increasing, positive
    assert Fraction(data["condition_number"][0]) >= 1
    assert float(data["max_width"]) < 1e-12
    assert [s["time"] for s in data["save_at"]] == ["1/4"]
    assert data["blow_up"] is None  # V is not scalar, not diagonal: no closed form
    assert check_file(out).verified


def test_mutated_certificate_is_rejected(tmp_path, capsys):
    p, out = _write(tmp_path, PARAMS), tmp_path / "cert.json"
    argv = ["transformer", "gaussian-pde", "--params", str(p), "--time", "1/4"]
    assert main([*argv, "--out", str(out)]) == 0
    cert = json.loads(out.read_text())
    assert check_certificate(cert).verified
    _, hi = cert["claim"]["enclosures"][-1][0][2]  # Sigma_00 at T, as "m*2^e"
    mantissa, exponent = hi.split("*2^")
    moved = f"{int(mantissa) + 10**6}*2^{exponent}"  # a point interval above the true value
    cert["claim"]["enclosures"][-1][0][2] = [moved, moved]
    assert not check_certificate(cert).verified


@pytest.mark.parametrize(
    ("obj", "time", "message"),
    [
        ({**PARAMS, "cov": [[1, 2], [2, 1]]}, "1", "not positive definite"),
        ({**PARAMS, "cov": [[1, 0], ["1/2", 1]]}, "1", "not symmetric"),
        ({**PARAMS, "V": [[1, 0, 0], [0, 1, 0]]}, "1", "V"),
        ({**PARAMS, "K": [[1, 0]]}, "1", "K"),
        ({**PARAMS, "mean": [1, 2, 3]}, "1", "cov"),
        ({"mean": [1], "cov": [["1/2"]], "Q": [[1]], "K": [[1]], "V": [[1]]}, "2", "blows up"),
        (PARAMS, "0", "not positive"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, obj, time, message):
    p, out = _write(tmp_path, obj), tmp_path / "cert.json"
    code = main(["transformer", "gaussian-pde", "--params", str(p), "--time", time,
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not out.exists()
