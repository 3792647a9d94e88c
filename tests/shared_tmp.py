"""Work done once per test run and shared by the pytest-xdist workers: a folder they all see
(:func:`shared_root`) and a file lock (:func:`held`) under which the first to come makes a thing
and the others, waiting, find it made."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The run's temporary folder every worker sees: the parent of a worker's own (under
    pytest-xdist, ``PYTEST_XDIST_WORKER`` set), else the run's."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """The exclusive lock of file ``lock`` (created if missing), held for the block."""
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
