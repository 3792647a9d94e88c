"""Atomic writes: everything is written to a temporary name beside its target, then renamed.

A crash at any point leaves either the old content or the new, never half of either. The
renamed file or folder gets the permissions a plain ``open``/``mkdir`` would give it (0666 /
0777 minus the umask), not the private 0600 / 0700 of the temporary names, so a worker running as
another user can read a shared ``work_dir``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` is not thread-safe)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, target)
        _fsync_dir(target.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes(target: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically."""
    with atomic_file(target) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def write_text(target: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``target`` atomically."""
    return write_bytes(target, text.encode("utf-8"))


def write_json(target: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON to ``target`` atomically."""
    return write_text(target, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_dir(target: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``target``; on success it becomes ``target``.

    If ``target`` exists and ``overwrite`` is false, raises ``FileExistsError`` before anything is
    written. With ``overwrite``, the old folder is replaced only once the new one is complete.
    """
    target = Path(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists (pass overwrite to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        _fsync_dir(tmp)
        if target.exists():
            old = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
            )
            os.replace(target, old / "x")
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
