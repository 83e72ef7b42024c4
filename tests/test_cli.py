"""The command-line contract: exit codes, --json output, nothing written on failure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from certified import __version__
from certified.cli import main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "certified.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert __version__ in capsys.readouterr().out
    assert main([]) == 2  # no command: help on stdout, usage error


def test_usage_errors_exit_2():
    r = run("bench", "nonexistent-suite")
    assert r.returncode == 2
    assert "invalid choice" in r.stderr
    r = run("frobnicate")
    assert r.returncode == 2


def test_demo_verifies_and_writes_summary(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["command"] == "demo"
    assert payload["verdict"] == "VERIFIED"
    assert set(payload) >= {"command", "verdict", "certificate", "seconds"}
    summary = json.loads((out / "demo_summary.json").read_text())
    assert summary["kind"] == "demo-summary"
    assert all(c["passed"] for c in summary["checks"])
    names = sorted(p.name for p in out.iterdir())  # no temporary file left over
    assert not [n for n in names if n.startswith(".") or not n.endswith(".json")]
    assert {"demo_summary.json", "laminar_flow.json", "tanh_flow.json"} <= set(names)
    certificates = [str(out / n) for n in names if n != "demo_summary.json"]
    assert main(["check", *certificates]) == 0  # every certificate the demo writes
    assert main(["check", str(out / "tanh_flow.json"), str(out / "laminar_flow.json")]) == 0


def test_demo_output_under_a_file_exits_2_and_writes_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = run("demo", "--out", str(blocker / "sub"))
    assert r.returncode == 2
    assert "I/O error" in r.stderr
    assert r.stdout.count("\n") <= 20
    assert blocker.read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_demo_failure_exits_1_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from certified import demo

    real = demo.run_demo

    def broken():
        checks = real()
        return [checks[0].__class__(c.name, False, c.max_width, c.detail) for c in checks]

    monkeypatch.setattr(demo, "run_demo", broken)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 1
    assert "REFUTED" in capsys.readouterr().out
    assert not out.exists()


def test_bench_json_contract(capsys):
    assert main(["bench", "arith", "--quick", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["command"] == "bench"
    names = [b["name"] for b in payload["benchmarks"]]
    assert any("matmul" in n for n in names) and any("exp" in n for n in names)
    for b in payload["benchmarks"]:
        assert set(b) >= {"name", "seconds", "baseline", "baseline_seconds", "ratio"}
        assert b["ratio"] == pytest.approx(b["seconds"] / b["baseline_seconds"])


SMOOTH_SCHEDULE = {
    "dimension": 2,
    "activation": "tanh",
    "pieces": [
        {
            "duration": "1/2",
            "W": [[1, "-1/2"], ["1/3", 1]],
            "A": [[1, 0], [0, 1]],
            "b": [0, "1/10"],
        },
        {"duration": "1/4", "W": [[-1, 0], [0, 1]], "A": [[1, 1], [1, -1]], "b": ["0.2", 0]},
    ],
}


def _flow_files(tmp_path, schedule=SMOOTH_SCHEDULE, points="0.1,0.2\n-0.5,1\n"):
    s = tmp_path / "schedule.json"
    s.write_text(json.dumps(schedule))
    p = tmp_path / "points.csv"
    p.write_text(points)
    return s, p


def test_flow_writes_a_certificate_the_checker_accepts(tmp_path, capsys):
    s, p = _flow_files(tmp_path)
    out = tmp_path / "cert.json"
    assert (
        main(["flow", "--schedule", str(s), "--points", str(p), "--out", str(out), "--json"]) == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "VERIFIED" and payload["certificate"] == str(out)
    assert len(payload["enclosures"]) == 2 and len(payload["enclosures"][0]) == 2
    assert float(payload["max_width"]) < 1e-12
    assert main(["check", str(out)]) == 0


@pytest.mark.parametrize(
    ("schedule", "points", "words"),
    [
        ({**SMOOTH_SCHEDULE, "dimension": 3}, "0.1,0.2\n", "W"),
        (SMOOTH_SCHEDULE, "0.1,0.2,0.3\n", "coordinates"),
        (SMOOTH_SCHEDULE, "nan,0.2\n", "points"),
        ({**SMOOTH_SCHEDULE, "pieces": []}, "0.1,0.2\n", "pieces"),
        (
            {**SMOOTH_SCHEDULE, "pieces": [{**SMOOTH_SCHEDULE["pieces"][0], "duration": "-1"}]},
            "0.1,0.2\n",
            "duration",
        ),
    ],
)
def test_flow_bad_input_exits_2_and_writes_nothing(tmp_path, schedule, points, words):
    s, p = _flow_files(tmp_path, schedule, points)
    out = tmp_path / "cert.json"
    r = run("flow", "--schedule", str(s), "--points", str(p), "--out", str(out))
    assert r.returncode == 2, r.stderr
    assert words in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["points.csv", "schedule.json"]
