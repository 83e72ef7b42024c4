"""certified separate: the CLI contract (verdicts, --json keys, exit codes, nothing written on
failure or bad input) and the demo step."""

from __future__ import annotations

import json

import pytest
from moment_pairs import PTE_5

from certified.checker import check_file
from certified.cli import main


def _write(path, obj):
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(path)


@pytest.fixture
def pte_files(tmp_path):
    mu = _write(tmp_path / "mu.json", {"points": [[x] for x in PTE_5[0]]})
    nu = _write(tmp_path / "nu.json", {"points": [[x] for x in PTE_5[1]], "weights": ["1/6"] * 6})
    return mu, nu


def test_separate_verified_writes_a_checked_certificate(tmp_path, pte_files, capsys):
    out = tmp_path / "sep.json"
    assert (
        main(["separate", "--mu", pte_files[0], "--nu", pte_files[1], "--out", str(out), "--json"])
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"command", "verdict", "certificate", "seconds", "witness"}
    assert payload["command"] == "separate" and payload["verdict"] == "VERIFIED"
    assert payload["certificate"] == str(out)
    assert payload["first_differing_moment"] == 6
    w = payload["witness"]
    assert set(w) == {"q", "coordinate", "mu", "nu", "precision", "direction"}
    cert = json.loads(out.read_text())
    assert cert["claim"] == {k: w[k] for k in ("q", "coordinate", "mu", "nu")}
    assert check_file(out).verified
    assert main(["check", str(out)]) == 0
    # text mode; the existing certificate is replaced only with --force
    argv = ["separate", "--mu", pte_files[0], "--nu", pte_files[1], "--out", str(out)]
    assert main(argv) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert "VERIFIED" in capsys.readouterr().out


def test_equal_measures_refuted_with_reason_and_nothing_written(tmp_path, capsys):
    mu = _write(tmp_path / "mu.json", {"points": [[0], [1], [1]], "weights": ["1/2", "1/4", "1/4"]})
    nu = _write(tmp_path / "nu.json", {"points": [[1], [0]]})
    out = tmp_path / "sep.json"
    assert main(["separate", "--mu", mu, "--nu", nu, "--out", str(out), "--json"]) == 1
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["verdict"] == "REFUTED" and payload["witness"] is None
    assert payload["certificate"] is None and "mu = nu" in payload["reason"]
    assert "REFUTED" in captured.err
    assert not out.exists()


def test_undecided_when_the_precision_is_too_low(tmp_path, capsys):
    mu = _write(tmp_path / "mu.json", {"points": [[0], [1]], "weights": ["1/2", "1/2"]})
    nu = _write(
        tmp_path / "nu.json",
        {"points": [[0], [1]], "weights": [f"{2**399 + 1}/{2**400}", f"{2**399 - 1}/{2**400}"]},
    )
    out = tmp_path / "sep.json"
    code = main(
        ["separate", "--mu", mu, "--nu", nu, "--out", str(out), "--max-prec", "128", "--json"]
    )
    assert code == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "UNDECIDED" and "max_prec" in payload["reason"]
    assert not out.exists()
    assert main(["separate", "--mu", mu, "--nu", nu, "--out", str(out)]) == 0
    assert check_file(out).verified


@pytest.mark.parametrize(
    "nu, words",
    [
        ({"points": [[0], [1]], "weights": ["1/2", "1/3"]}, "not exactly 1"),
        ({"points": [[0], [1]], "weights": ["3/2", "-1/2"]}, "negative"),
        ('{"points": [[0], [NaN]]}', "NaN"),
        ({"points": [[0], [1, 2]]}, "points[1]"),
        ({"points": [[0], [1]], "weights": ["1"]}, "weights"),
        ({"points": []}, "empty"),
        ({"points": [[0, 1], [1, 0]]}, "coordinates"),
        ({"points": [[0]], "extra": 1}, "extra"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, pte_files, nu, words):
    out = tmp_path / "sep.json"
    out.write_text("old")
    bad = _write(tmp_path / "bad.json", nu)
    argv = ["separate", "--mu", pte_files[0], "--nu", bad, "--out", str(out), "--force"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "bad.json" in err
    assert out.read_text() == "old"


def test_missing_file_and_bad_max_prec_exit_2(tmp_path, pte_files, capsys):
    out = tmp_path / "sep.json"
    assert (
        main(
            [
                "separate",
                "--mu",
                str(tmp_path / "nope.json"),
                "--nu",
                pte_files[1],
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "separate",
                "--mu",
                pte_files[0],
                "--nu",
                pte_files[1],
                "--out",
                str(out),
                "--max-prec",
                "3",
            ]
        )
        == 2
    )
    assert "max_prec" in capsys.readouterr().err
    assert not out.exists()


def test_demo_step_separates_the_pte_pair():
    from certified.moments.command import demo_check

    check = demo_check()
    assert check.passed and "rule separation" in check.detail
    assert check.certificates["separation_pte.json"]["kind"] == "separation"
