"""Write the bytecode of every installed package and of this tree once, with a worker per core:
``make install`` runs ``python -m xmc_core.app.compile_bytecode`` after ``pip install
--no-compile``, beside the numba kernels' compile (``compile_kernels``).

pip writes the same bytecode on one core, a step of about two minutes here (torch, transformers,
prefect, mlflow); this spreads it over the machine's cores. It also compiles this tree's own
modules (``xmc_core``, ``flows``, ``tasks``, ``tests``, ``benchmarks``): where
``PYTHONDONTWRITEBYTECODE`` is set no process writes them, and every process the tests start
would compile them again. As with pip, a file that does not compile (a package's test data
written for a later Python) is left without bytecode and does not fail the install.
"""

from __future__ import annotations

import compileall
import sys
import sysconfig
import time
from pathlib import Path

TREE = ("xmc_core", "flows", "tasks", "tests", "benchmarks")
"""This checkout's packages, compiled when they are beside the installed library (an editable
install)."""


def folders() -> list[Path]:
    """The installed packages' folders (pure and platform-specific: one folder in a venv here,
    two where the platform's packages live apart), then each of this tree's packages that
    exists."""
    root = Path(__file__).resolve().parents[2]
    paths = sysconfig.get_paths()
    installed = dict.fromkeys(Path(paths[key]) for key in ("purelib", "platlib"))
    return [*installed, *(root / name for name in TREE if (root / name).is_dir())]


def compile_bytecode() -> float:
    """Compile every folder with a worker per core; returns the wall seconds it took."""
    began = time.perf_counter()
    for folder in folders():
        compileall.compile_dir(folder, quiet=2, workers=0)
    return time.perf_counter() - began


def main() -> int:
    seconds = compile_bytecode()
    print(f"bytecode written for the installed packages and this tree ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
