"""xmc_core is the pure library: it never imports the orchestrators."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("prefect", "mlflow", "dask.distributed", "distributed", "prefect_dask")
SERVING_MAY_IMPORT = ("mlflow",)


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
