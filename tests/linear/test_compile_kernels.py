"""``python -m xmc_core.app.compile_kernels`` (``make install`` runs it): the tiny training
calls every numba kernel of the default path, so that later processes find them all cached."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli_helpers import REPO_ROOT

KERNEL_MODULES = (
    "xmc_core.features._pifa_kernels",
    "xmc_core.linear._tree_kernels",
    "xmc_core.linear._solver_kernels",
    "xmc_core.linear._dual_cd",
    "xmc_core.linear._chunk_kernels",
    "xmc_core.linear._beam_kernels",
)
ENTRY_POINTS = {
    "xmc_core.features._pifa_kernels": ["label_sum_sizes", "label_sums", "normalized_rows"],
    "xmc_core.linear._tree_kernels": ["split_depth"],
    "xmc_core.linear._solver_kernels": ["gather_parents", "solve_groups", "kept_weights"],
    "xmc_core.linear._chunk_kernels": ["count_features", "fill_chunks"],
    "xmc_core.linear._beam_kernels": ["score_level"],
}
"""The kernels called from Python: the others are compiled into them (a process that loads
these from the cache never compiles the kernels they call)."""

CHECK = f"""
import importlib, json
from numba.core.registry import CPUDispatcher
from xmc_core.app.compile_kernels import main
main()
found = {{}}
for name in {list(KERNEL_MODULES)!r}:
    module = importlib.import_module(name)
    for attr, obj in vars(module).items():
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == name:
            found[f"{{name}}.{{attr}}"] = len(obj.signatures)
print(json.dumps(found))
"""


def test_the_tiny_training_calls_every_kernel_of_the_default_path() -> None:
    """In a fresh process (nothing compiled or loaded before), each kernel has a signature
    once the command ran: it was compiled, or loaded from the cache it fills."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, last = done.stdout.splitlines()[0], done.stdout.splitlines()[-1]
    assert first.startswith("numba kernels compiled and cached (")
    signatures = json.loads(last)
    assert len(signatures) >= 25, signatures  # the modules hold their kernels
    entry = [f"{module}.{name}" for module, names in ENTRY_POINTS.items() for name in names]
    assert [k for k in entry if signatures[k] == 0] == []
