"""The ``xmc`` command line run in a subprocess, and the tiny ``lines`` source its tests ingest;
a command (``xmc``, ``python -m flows.*``) stopped by a real Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.crash_services import RUN_TIMEOUT, alive, kill_group, spawn

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


CTRL_C_EXIT_S = 10.0
"""How soon a command must end after its first Ctrl-C."""


@dataclass(frozen=True)
class Stopped:
    """A command ended by Ctrl-C: its exit status and its output before and after the SIGINT."""

    returncode: int
    before: str
    after: str


def press_ctrl_c(
    cmd: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[str], object],
    again: Callable[[str], object] | None = None,
) -> Stopped:
    """Run ``cmd`` (output to ``log``) in a process group of its own and, once ``ready(output
    so far)``, press Ctrl-C: SIGINT to the whole group, as a terminal sends it (the command's
    Dask workers and Prefect server get it too); with ``again``, press it a second time once
    ``again(output)``. The command must then end within :data:`CTRL_C_EXIT_S` and leave no
    process of its group behind."""
    proc = spawn(cmd, {**env, "PYTHONUNBUFFERED": "1"}, log)
    try:
        _wait_for(proc, log, ready)
        offset = log.stat().st_size
        os.killpg(proc.pid, signal.SIGINT)
        if again is not None:
            _wait_for(proc, log, again)
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=CTRL_C_EXIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"running {CTRL_C_EXIT_S} s after Ctrl-C: {log.read_text()[-3000:]}")
        gone = time.monotonic() + 5  # the resource tracker ends once its parent has
        while alive(proc.pid, proc.pid) and time.monotonic() < gone:
            time.sleep(0.05)
        assert not alive(proc.pid, proc.pid), "a process of the command outlived it"
    finally:
        if proc.poll() is None or alive(proc.pid, proc.pid):
            kill_group(proc)
    text = log.read_bytes()
    return Stopped(proc.returncode, text[:offset].decode(), text[offset:].decode())


def _wait_for(proc: subprocess.Popen[bytes], log: Path, ready: Callable[[str], object]) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not ready(log.read_text(errors="replace")):
        assert proc.poll() is None, f"ended before Ctrl-C: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"never ready: {log.read_text()[-3000:]}"
        time.sleep(0.05)
