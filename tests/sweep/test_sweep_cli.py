"""``certified sweep`` on the command line, and the optional extra staying optional."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from certified.cli import main
from certified.commands.registry import COMMANDS

PACKAGE = Path(__file__).resolve().parents[2] / "certified"
EXTRA = ("dask", "distributed", "pandas", "pyarrow")


def _run(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("family", [r.name for r in COMMANDS if r.sweep])
def test_init_prints_a_commented_example_spec(capsys, family):
    code, out, err = _run(capsys, "sweep", "init", family)
    assert code == 0 and err == ""
    assert out.startswith("# certified sweep spec")
    assert tomllib.loads(out)["family"] == family


def _spec(tmp_path, obj):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(obj))
    return path


H2 = {
    "family": "lipschitz",
    "statement": "H2",
    "generate": [{"kind": "random", "seed": 3, "count": 6, "n": [1, 3], "d": 2, "k": 2}],
}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["init"], "init: name a family"),
        (["init", "bogus"], "family: 'bogus' is not a sweep family"),
        (["check"], "check: name a sweep's output directory"),
        (["check", "{out}"], "holds no certificates/ directory"),
        (["{spec:family=bogus}", "--out", "{out}"], "family: 'bogus' is not a sweep family"),
        (["{spec:grid}", "--out", "{out}"], "generate[0].grid.N: -4 is not an integer"),
        (["{spec}", "--out", "{out}", "--scheduler", "tcp://127.0.0.1:9"], "cannot reach"),
        (["{spec}", "--out", "{out}", "--workers", "0"], "--workers: 0"),
        (["{spec}"], "out: give an output directory"),
        (["{missing}", "--out", "{out}"], "cannot read the spec"),
        (["{spec:budget}", "--out", "{out}"], "options.time_budget: -1 is not in (0, 1000000]"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(capsys, tmp_path, argv, message):
    specs = {
        "{spec}": _spec(tmp_path, H2),
        "{spec:family=bogus}": _spec(tmp_path / "..", {**H2, "family": "bogus"}),
        "{missing}": tmp_path / "missing.toml",
        "{out}": tmp_path / "out",
    }
    grid = {"family": "interpolate", "generate": [{"kind": "grid", "grid": {"N": [-4]}}]}
    (tmp_path / "g").mkdir()
    specs["{spec:grid}"] = _spec(tmp_path / "g", grid)
    (tmp_path / "b").mkdir()
    specs["{spec:budget}"] = _spec(tmp_path / "b", {**H2, "options": {"time_budget": -1}})
    code, out, err = _run(capsys, "sweep", *[specs.get(a, a) for a in argv])
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("certified sweep: ") and message in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "out").exists()


def test_a_sweep_on_a_running_scheduler_then_check_every_certificate(
    capsys, tmp_path, monkeypatch, client2
):
    (tmp_path / "specs").mkdir()
    _spec(tmp_path / "specs", {**H2, "out": "../out"})  # relative to the spec file
    monkeypatch.chdir(tmp_path / "specs")
    address = client2.scheduler.address
    code, out, err = _run(capsys, "sweep", "spec.json", "--scheduler", address, "--json")
    assert code == 0 and err == ""  # no progress bar off a terminal
    assert not (tmp_path / "specs" / "out").exists()
    result = json.loads(out)
    assert result["command"] == "sweep" and result["instances"] == 6
    assert sum(result["counts"].values()) == 6 and result["failed"] == 0
    certificates = sorted((tmp_path / "out" / "certificates").glob("*.json"))
    assert len(certificates) == 6
    code, out, _ = _run(capsys, "check", *certificates)
    assert code == 0 and out.count("VERIFIED lipschitz") == 6
    assert (tmp_path / "out" / "plots" / "lipschitz_ratio_vs_n.png").stat().st_size > 0


def test_rows_over_budget_are_kept_until_redo_exceeded_is_asked(capsys, tmp_path, client2):
    address = client2.scheduler.address
    tiny = _spec(tmp_path, {**H2, "options": {"time_budget": 0.001}})
    out = tmp_path / "out"
    code, stdout, _ = _run(capsys, "sweep", tiny, "--out", out, "--scheduler", address, "--json")
    result = json.loads(stdout)
    assert code == 0 and result["counts"] == {"UNDECIDED": 6} and result["verdict"] == "UNDECIDED"
    assert not list((out / "certificates").iterdir())
    code, stdout, _ = _run(capsys, "sweep", tiny, "--out", out, "--scheduler", address, "--json")
    assert json.loads(stdout)["computed"] == 0
    (tmp_path / "big").mkdir()
    roomy = _spec(tmp_path / "big", {**H2, "options": {"time_budget": 600}})
    code, stdout, _ = _run(capsys, "sweep", roomy, "--out", out, "--scheduler", address,
                           "--redo-exceeded", "--json")  # fmt: skip
    result = json.loads(stdout)
    assert code == 0 and result["computed"] == 6 and "UNDECIDED" not in result["counts"]
    assert len(list((out / "certificates").glob("*.json"))) == 6


_PROBE = """
import json, sys
import certified, certified.cli, certified.sweep, certified.sweep.spec, certified.sweep.families
import certified.sweep.tasks, certified.sweep.command
import certified.interpolation, certified.attention, certified.transport, certified.moments
import certified.flow, certified.checker, certified.bench, certified.demo
from certified.sweep import load_spec
spec = load_spec({"family": "lipschitz", "generate": [
    {"kind": "random", "seed": 1, "count": 3, "n": 2, "d": 2, "k": 2}]})
spec.instances()
from certified.cli import main
main(["sweep", "init", "interpolate"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in EXTRA)))
""".replace("EXTRA", repr(EXTRA))


def test_the_package_imports_no_dask_pandas_or_pyarrow_until_a_sweep_runs():
    r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def _imported_tops(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            tops.add(node.module.split(".")[0])
    return tops


def test_only_the_sweep_driver_names_the_extra():
    allowed = {"run.py", "table.py", "recheck.py", "_bench.py"}
    for path in sorted(PACKAGE.rglob("*.py")):
        bad = _imported_tops(path) & set(EXTRA)
        inside = path.parent.name == "sweep" and path.name in allowed
        assert not bad or inside, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
