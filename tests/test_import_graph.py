"""The package has no import cycles, and the trusted checker imports nothing of the rest.

Static: every module under ``certified/`` is parsed with ``ast``. An edge A -> B means that
importing A runs ``import B`` at module level (statements inside functions and under
``if TYPE_CHECKING:`` do not count: they run later, or never). ``from P import n`` points to
``P.n`` when that is a module, else to ``P``. Parent packages a submodule import also
initialises are not edges (Python finds them already in ``sys.modules``); a name taken from a
package's ``__init__`` is.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import certified

PACKAGE = Path(certified.__file__).resolve().parent
ROOT = PACKAGE.parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module):
    """Import statements that run when the module is imported."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                todo.extend(node.body)
            todo.extend(node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                todo.extend(handler.body)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            todo.extend(node.body)


def _all_imports(tree: ast.Module):
    yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def _targets(name: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """Absolute names of the modules ``node`` (in module ``name``) imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    out = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.add(sub if sub in MODULES else base)
    return out


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges = set()
        for node in _module_level_imports(tree):
            edges |= {t for t in _targets(name, node) if t in MODULES and t != name}
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_package():
    graph = _graph()
    assert {"certified.cli", "certified.checker", "certified.commands.registry"} <= set(graph)
    assert "certified.checker._parse" in graph["certified.checker"]  # relative imports resolved
    assert "certified.commands.registry" in graph["certified.cli"]


# Cycles that exist and are owned elsewhere, listed so that no new one can appear unnoticed.
# The test is strict both ways: when a listed cycle is removed, remove it here too. (The
# checker's two Lipschitz rules used to import each other; H3 now lives in _lipschitz_rule.)
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycles():
    cycles = _cycles(_graph())
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not new, "import cycles among module-level imports: " + "; ".join(
        " <-> ".join(c) for c in new
    )
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"fixed, remove from KNOWN_CYCLES: {gone}"


def test_a_cycle_would_be_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# Checker modules allowed to import numpy, each with its argument (design.md: "numpy if
# unavoidable"): float64 replays with outward rounding, vectorised over many initial sets.
NUMPY_IN_CHECKER = {
    "certified.checker._relu_vec_rule": "proofs/checker_soundness.md#relu-vectorised",
    "certified.checker._relu_vec_plan": "proofs/checker_soundness.md#relu-vectorised",
    "certified.checker._relu_mv_rule": "proofs/checker_soundness.md#relu-vectorised",
    "certified.checker.ivec": "proofs/checker_soundness.md#float-intervals",
    "certified.checker.jets64": "proofs/checker_soundness.md#float-intervals",
    "certified.checker.program64": "proofs/checker_soundness.md#float-intervals",
    "certified.checker.lohner64": "proofs/checker_soundness.md#float-intervals",
    "certified.checker.duals64": "proofs/bounds.md#quadratic",
    "certified.checker.quad64": "proofs/bounds.md#quadratic",
    "certified.checker.sensitivity64": "proofs/training.md#sensitivity64",
}


def test_the_checker_imports_only_itself_stdlib_and_flint():
    for name, path in MODULES.items():
        if not name.startswith("certified.checker"):
            continue
        allowed = set(sys.stdlib_module_names) | {"flint", "__future__"}
        allowed |= {"numpy"} if name in NUMPY_IN_CHECKER else set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _all_imports(tree):  # anywhere in the file, not only at module level
            for target in _targets(name, node):
                top = target.split(".")[0]
                if top == "certified":
                    assert target.startswith("certified.checker"), f"{name} imports {target}"
                else:
                    assert top in allowed, f"{name} imports {target}"


def _private_checker_names(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What ``node`` (in module ``name``) imports of the checker under a ``_``-prefixed name."""
    if isinstance(node, ast.Import):
        paths = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
            package = package.rsplit(".", node.level - 1)[0]
            base = f"{package}.{base}" if base else package
        paths = [f"{base}.{alias.name}" for alias in node.names]
    inside = [p for p in paths if p == "certified.checker" or p.startswith("certified.checker.")]
    return [p for p in inside if any(part.startswith("_") for part in p.split(".")[2:])]


def test_no_producer_imports_a_private_name_of_the_checker():
    # design.md: "no producer imports a private name of the checker". What producers need is
    # re-exported by certified/checker/__init__.py (or lives in a public checker module).
    bad = []
    for name, path in MODULES.items():
        if name == "certified.checker" or name.startswith("certified.checker."):
            continue
        for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
            bad += [f"{name}:{node.lineno}: {p}" for p in _private_checker_names(name, node)]
    assert not bad, "private checker names imported outside the checker: " + "; ".join(bad)


def test_a_private_checker_import_would_be_found():
    def found(source: str, module: str = "certified.moments.separation") -> list[str]:
        return _private_checker_names(module, ast.parse(source).body[0])

    assert found("from certified.checker._parse import exact")
    assert found("from certified.checker import _gc_paused")
    assert found("import certified.checker._cli")
    assert found("from ..checker import _separation_rule")
    assert found("from certified.checker.taylor import _helper")
    assert not found("from certified.checker import check_file, gc_paused")
    assert not found("from certified.checker.taylor import replay_flow")
    assert not found("from certified.arith import _private")
