"""xmc_core is the pure library: it never imports the orchestrators."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("prefect", "mlflow", "dask.distributed", "distributed", "prefect_dask")
SERVING_MAY_IMPORT = ("mlflow",)
"""Only ``xmc_core/serving/`` and ``xmc_core/serving/registry/`` (the MLflow registry) import it."""


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def is_forbidden(module: str, allowed: tuple[str, ...] = ()) -> bool:
    return any((module == f or module.startswith(f + ".")) and f not in allowed for f in FORBIDDEN)


def test_core_never_imports_orchestrators() -> None:
    offenders = []
    for path in sorted((ROOT / "xmc_core").rglob("*.py")):
        allowed = SERVING_MAY_IMPORT if "serving" in path.parts else ()
        offenders += [
            f"{path.relative_to(ROOT)}: {m}"
            for m in imported_modules(path)
            if is_forbidden(m, allowed)
        ]
    assert offenders == []


def test_the_check_catches_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import prefect\nfrom dask.distributed import Client\nimport dask\n")
    found = {m for m in imported_modules(bad) if is_forbidden(m)}
    assert found == {"prefect", "dask.distributed"}


def module_imports(path: Path, package: str) -> set[str]:
    """The ``package`` modules ``path`` imports when it is imported (module level, not under
    ``if TYPE_CHECKING:``; imports inside functions run later and may close no cycle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)})
    return {n for n in names if n == package or n.startswith(package + ".")}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (root / package).rglob("*.py")
    }
    return {m: module_imports(p, package) & set(modules) - {m} for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (empty: none), by depth-first search."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_xmc_core_has_no_import_cycle() -> None:
    assert find_cycle(import_graph(ROOT, "xmc_core")) == []


def test_the_cycle_check_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
