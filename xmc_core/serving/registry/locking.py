"""Who holds the registry: the identity of a process (so that a dead writer's leftovers can be
told from a live one's, :mod:`~xmc_core.serving.registry.reconcile`) and the registry lock that
serializes promotions, registrations and rollbacks of one model and alias on this machine."""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from xmc_core.errors import XmcError
from xmc_core.serving.registry.store import UNSAFE_CHARS

if TYPE_CHECKING:
    from xmc_core.config import XmcConfig

LOCK_TIMEOUT_S = 3600.0
PROCESS_TAG = "xmc.process"
"""Run and version tag: ``host:pid:start`` of the process that created it (see
:func:`process_identity`)."""


def process_identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (this one by default); ``start`` is its start time in
    clock ticks since boot (``/proc/PID/stat``), so a reused pid does not pass for it."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def process_gone(identity: str) -> bool:
    """Whether the process :func:`process_identity` described has ended. Only a process of
    this host can be checked: one of another host (or an unreadable identity) counts as alive."""
    host, _, rest = identity.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return _start_ticks(int(pid)) != start


def _start_ticks(pid: int) -> str:
    """Field 22 of ``/proc/PID/stat`` ("" when the process does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def lock_path(cfg: XmcConfig) -> Path:
    """``<mlflow_dir>/locks/registry-<name>-<alias>.lock``."""
    name = UNSAFE_CHARS.sub("_", cfg.registry.model_name)
    alias = UNSAFE_CHARS.sub("_", cfg.registry.alias)
    return cfg.mlflow_dir() / "locks" / f"registry-{name}-{alias}.lock"


@contextmanager
def registry_lock(cfg: XmcConfig, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[Path]:
    """Exclusive ``flock`` of :func:`lock_path` (created if missing) for the block's duration.

    Excludes other threads (each call opens its own file description) and processes of this
    machine. Raises ``XmcError`` after ``timeout_s`` seconds of waiting.
    """
    path = lock_path(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(path, "a+", encoding="utf-8") as fh:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise XmcError(
                        f"{path}: another promotion has held the registry lock for over "
                        f"{timeout_s:.0f} s\n  fix: wait for it, or stop the stuck process"
                    ) from None
                time.sleep(0.05)
        try:
            yield path
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
