"""The command registry: every record resolves, ``cli`` / ``demo`` / ``bench`` read it, the
families never import them, and ``certified --help`` imports no family."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import certified
from certified.commands import COMMANDS, bench_suites, command, demo_steps, load

PACKAGE = Path(certified.__file__).resolve().parent
SHELL = {"certified.cli", "certified.demo", "certified.bench"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (anywhere in the file)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def test_records_resolve_to_add_arguments_and_run():
    names = [r.name for r in COMMANDS]
    assert len(names) == len(set(names))
    assert names[:4] == ["demo", "check", "flow", "bench"]  # the order of `certified --help`
    for record in COMMANDS:
        assert command(record.name) is record
        assert callable(load(f"{record.module}:add_arguments")), record.name
        assert callable(load(f"{record.module}:run")), record.name
    with pytest.raises(KeyError):
        command("frobnicate")
    with pytest.raises(ValueError):
        load("certified.cli")


def test_demo_steps_and_bench_suites_resolve():
    steps = demo_steps()
    assert steps[0] == "certified.demo:arithmetic_checks"
    assert all(callable(load(ref)) for ref in steps)
    suites = bench_suites()
    assert set(suites) == {
        "arith",
        "certificates",
        "flow",
        "gradient",
        "interpolation",
        "sinkhorn",
        "sweep",
        "tokens",
        "transformer",
        "wasserstein",
    }
    assert all(callable(load(ref)) for ref in suites.values())


def test_no_family_imports_cli_demo_or_bench():
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module in SHELL:
            continue
        bad = _imported(path) & SHELL
        assert not bad, f"{module} imports {sorted(bad)}: families reach the shell via the registry"


def test_the_registry_imports_no_family():
    for name in ("registry", "records", "__init__", "check"):
        imported = _imported(PACKAGE / "commands" / f"{name}.py")
        top = {m.split(".")[0] for m in imported}
        assert top <= set(sys.stdlib_module_names) | {"certified", "__future__"}, name
        assert {m for m in imported if m.startswith("certified.")} <= {
            m for m in imported if m.startswith("certified.commands")
        } | {"certified.checker"} | {
            f"certified.checker.{n}" for n in ("check_paths", "check_file", "Verdict")
        }, name


_PROBE = """
import json, sys
from certified.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "numba", "scipy")
               or m.startswith(("certified.flow", "certified.interpolation", "certified.arith",
                                "certified.attention", "certified.moments", "certified.transport",
                                "certified.models", "certified.certificates")))
print(json.dumps(heavy))
"""


def _loaded(*argv: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_help_imports_no_family():
    assert _loaded("--help") == []
    assert _loaded("check", "--help") == []


def test_a_command_imports_its_family_only_when_chosen():
    assert any(m.startswith("certified.flow") for m in _loaded("flow", "--help"))
    assert not any(m.startswith("certified.flow") for m in _loaded("separate", "--help"))


_CHECK_PROBE = """
import json, sys
from certified.cli import main
status = main(["check", *sys.argv[1:]])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""
_PRODUCERS = ("certified.flow", "certified.interpolation", "numpy", "numba")


def test_check_imports_only_the_checker(tmp_path):
    golden = Path(__file__).parent / "checker" / "golden_lipschitz_h1_refutation.json"
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "flow"}')
    r = subprocess.run(
        [sys.executable, "-c", _CHECK_PROBE, str(golden), str(broken), str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("VERIFIED lipschitz ") and lines[1].startswith("REJECTED ")
    assert lines[2].startswith("REJECTED ") and "I/O error" in lines[2]
    out = json.loads(lines[-1])
    assert out["status"] == 2
    loaded = [m for m in out["modules"] if m.startswith(_PRODUCERS)]
    assert not loaded, f"certified check imported producers: {loaded[:8]}"
    family = [
        m
        for m in out["modules"]
        if m.startswith("certified.")
        and not m.startswith(("certified.checker", "certified.commands"))
    ]
    assert family == ["certified._loading", "certified.cli", "certified.errors"], family
