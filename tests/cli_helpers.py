"""The ``xmc`` command line run in a subprocess, and the tiny ``lines`` source its tests ingest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def xmc(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m xmc_core.app.cli ARGS`` from the repository root, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "xmc_core.app.cli", *args],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
    )  # fmt: skip


def write_lines(
    src: Path, labels: str = "a,b\nb\n", texts: str = "first doc\nsecond doc\n"
) -> Path:
    """A ``lines`` source folder ``src`` whose train and test splits both hold ``texts``."""
    src.mkdir()
    for split in ("train", "test"):
        (src / f"{split}_texts.txt").write_text(texts)
        (src / f"{split}_labels.txt").write_text(labels)
    return src
