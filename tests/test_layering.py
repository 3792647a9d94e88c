"""The layers of the code, checked: xmc_core is the pure library (it never imports the
orchestrators; mlflow only in ``serving/``), every module belongs to one layer of
:data:`LAYERS` and imports only its own layer and those below, and no import cycle remains.

Imports inside functions count like those at module level (they run when the function does).
Imports under ``if TYPE_CHECKING:`` do not: they never run, they only name types for
annotations (e.g. ``model/contract.py`` names ``XmcConfig``, a layer above it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("prefect", "mlflow", "dask.distributed", "distributed", "prefect_dask")
SERVING_MAY_IMPORT = ("mlflow",)
"""Only ``xmc_core/serving/`` and ``xmc_core/serving/registry/`` (the MLflow registry) import it."""
PACKAGES = ("xmc_core", "tasks", "flows")

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("errors and storage", (
        "xmc_core.errors", "xmc_core.version", "xmc_core.wording", "xmc_core.interrupt",
        "xmc_core.progress", "xmc_core.env", "xmc_core.storage", "xmc_core.threads",
    )),
    ("registry", ("xmc_core.model.contract", "xmc_core.model.registry")),
    ("config", (
        "xmc_core.config", "xmc_core.config_errors", "xmc_core.config_io",
        "xmc_core.config_lifecycle", "xmc_core.config_linear", "xmc_core.config_section",
    )),
    ("corpus", ("xmc_core.corpus",)),
    ("stage graph", ("xmc_core.stages",)),
    ("parts", (
        "xmc_core.features", "xmc_core.linear", "xmc_core.transformer", "xmc_core.evaluation",
        "xmc_core.calibration", "xmc_core.neural",
        "xmc_core.neural_loop",
    )),
    ("frame", (
        "xmc_core.model.xmc_model", "xmc_core.model.model_folder", "xmc_core.model.layout",
        "xmc_core.families.common",
        "xmc_core.families.featurize", "xmc_core.families.matrices", "xmc_core.families.train",
        "xmc_core.families.configured", "xmc_core.families.warm", "xmc_core.families.calibrate",
        "xmc_core.intake",
    )),
    ("families", ("xmc_core.families",)),
    ("app and serving", (
        "xmc_core.model.estimator", "xmc_core.app", "xmc_core.serving", "xmc_core.model",
        "xmc_core.lifecycle",
    )),
    ("tasks", ("tasks",)),
    ("flows", ("flows",)),
]  # fmt: skip
"""Bottom to top: a module of a layer imports modules of its own layer and of those below.
A module belongs to the layer of its longest matching prefix (``xmc_core.families.train`` is
frame, ``xmc_core.families.astec.parts`` families); the ``xmc_core`` package itself (its
``XmcClassifier`` re-export) sits with the app."""


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module`` (-1: none; ``xmc_core`` itself: the app's)."""
    if module == "xmc_core":
        return next(i for i, (name, _) in enumerate(LAYERS) if name == "app and serving")
    best, found = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    return found


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


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def runtime_imports(source: str) -> set[str]:
    """The modules (and ``module.name`` of each ``from module import name``) ``source``
    imports when it runs: at module level and inside functions, not under
    ``if TYPE_CHECKING:`` (its ``else`` branch does run)."""
    names: set[str] = set()
    pending: list[ast.AST] = [ast.parse(source)]
    while pending:
        node = pending.pop()
        if _is_type_checking(node):
            pending.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)})
        pending.extend(ast.iter_child_nodes(node))
    return names


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports at run time (itself excluded)."""
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for package in packages
        for p in (root / package).rglob("*.py")
    }
    return {
        m: runtime_imports(p.read_text(encoding="utf-8")) & set(modules) - {m}
        for m, p in modules.items()
    }


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a layer above its own, and each module in no layer."""
    found = [f"{m}: in no layer of LAYERS" for m in sorted(graph) if layer_of(m) < 0]
    for module in sorted(graph):
        own = layer_of(module)
        for target in sorted(graph[module]):
            if layer_of(target) > own >= 0:
                found.append(
                    f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                )
    return found


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


def test_every_module_imports_only_its_layer_and_those_below() -> None:
    assert layer_violations(import_graph(ROOT)) == []


def test_no_import_cycle_remains() -> None:
    assert find_cycle(import_graph(ROOT)) == []


def test_the_layer_check_finds_an_upward_import_and_a_module_in_no_layer() -> None:
    graph = {
        "xmc_core.config": {"xmc_core.families.astec.parts"},  # config -> a family: upward
        "xmc_core.families.astec.parts": {"xmc_core.config", "xmc_core.linear.tree"},
        "xmc_core.linear.tree": set(),
        "elsewhere.module": set(),
    }
    assert layer_violations(graph) == [
        "elsewhere.module: in no layer of LAYERS",
        "xmc_core.config (config) imports xmc_core.families.astec.parts (families)",
    ]
    assert layer_of("xmc_core.families.train") == layer_of("xmc_core.model.xmc_model")
    assert layer_of("xmc_core.families.astec") > layer_of("xmc_core.families.train")


def test_imports_inside_functions_count_and_type_checking_ones_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import xmc_core.errors\n"
        "if TYPE_CHECKING:\n    from xmc_core.config import XmcConfig\n"
        "else:\n    import xmc_core.wording\n"
        "def f():\n    from xmc_core.linear import tree\n"
    )
    assert {n for n in runtime_imports(source) if n.startswith("xmc_core")} == {
        "xmc_core.errors", "xmc_core.wording", "xmc_core.linear", "xmc_core.linear.tree",
    }  # fmt: skip


def test_the_cycle_check_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_every_import_is_absolute() -> None:
    """Relative imports would pass the checks above unseen: there are none."""
    relative = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []
