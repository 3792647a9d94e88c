"""Atomic writes: everything is written to a temporary name beside its target, then renamed.

A crash at any point leaves either the old content or the new, never half of either. The
renamed file or folder gets the permissions a plain ``open``/``mkdir`` would give it (0666 /
0777 minus the umask), not the private 0600 / 0700 of the temporary names, so a worker running as
another user can read a shared ``work_dir``.

Nothing is ever renamed over a symbolic link, a device or a FIFO (see :func:`atomic_file`), and a
folder is never replaced unless its writer asked for it, nor by two writers at once (see
:func:`atomic_dir` and :mod:`xmc_core.storage.folder_swap`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from xmc_core.errors import InputError
from xmc_core.storage.folder_swap import (
    beside,
    check_dir_target,
    clear_stale,
    finish_interrupted_swap,
    fsync_dir,
    lock,
    publish,
    repair,
    unlock,
)

__all__ = [
    "atomic_dir",
    "atomic_file",
    "finish_interrupted_swap",
    "write_bytes",
    "write_json",
    "write_text",
]

_PROC_FD = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd/(\d+)")


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` is not thread-safe)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


# --- single files -------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_file(target: str | Path, follow_links: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; once the block succeeds its content becomes ``target``.

    How depends on what ``target`` is (checked with ``lstat``, never renamed over):

    - missing or a regular file: the temporary, beside it, is renamed onto it (atomic);
    - a symbolic link to a file, or to nothing yet: the file it points to is replaced the same
      way and the link stays;
    - a character or block device, a FIFO, or a link through ``/proc`` such as ``/dev/stdout``
      (``/proc/self/fd/1``): the content is copied into it after the block succeeded, through
      the process's own descriptor where the link names one. Not atomic (a kill during the
      copy leaves part of it); the temporary lives in the system's temporary folder;
    - a folder: InputError.

    With ``follow_links`` false, a symbolic link at ``target`` is itself replaced by the file
    (for files only xmc writes, e.g. cache records, where a link can only have been planted).
    """
    target = Path(target)
    streamed, path = _file_target(target, follow_links)
    with _streamed(path) if streamed else _renamed(path) as tmp:
        yield tmp


def _file_target(target: Path, follow_links: bool) -> tuple[bool, Path]:
    """(whether to copy into it rather than rename onto it, the path to write)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False, target
    path = target
    if stat.S_ISLNK(st.st_mode) and not follow_links:
        return False, target
    if stat.S_ISLNK(st.st_mode):
        if _proc_link(target):
            return True, target
        path = Path(os.path.realpath(target))
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False, path
        except OSError as err:
            raise InputError(target, f"link cannot be followed ({err.strerror})", "fix it") from err
    if stat.S_ISDIR(st.st_mode):
        raise InputError(target, "is a folder, not a file", "give the path of a file")
    return not stat.S_ISREG(st.st_mode), path


def _proc_link(path: Path) -> str | None:
    """The first ``/proc`` path met while following the links of ``path`` (``/dev/stdout`` ->
    ``/proc/<pid>/fd/1``), or None. Its ``readlink`` is a description, not a path to rename."""
    current = os.path.abspath(path)
    for _ in range(40):
        current = os.path.join(
            os.path.realpath(os.path.dirname(current)), os.path.basename(current)
        )
        if current.startswith("/proc/"):
            return current
        if not os.path.islink(current):
            return None
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return None


@contextlib.contextmanager
def _renamed(target: Path) -> Iterator[Path]:
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
        fsync_dir(target.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextlib.contextmanager
def _streamed(target: Path) -> Iterator[Path]:
    fd, tmp = tempfile.mkstemp(prefix="xmc-", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as src, _open_stream(target) as dst:
            shutil.copyfileobj(src, dst)
    finally:
        tmp_path.unlink(missing_ok=True)


def _open_stream(target: Path) -> BinaryIO:
    """Open a device, FIFO or ``/proc`` link for writing, without creating or truncating it."""
    own_fd = _PROC_FD.fullmatch(_proc_link(target) or "")
    try:
        if own_fd and int(own_fd[1]) == os.getpid():
            for stream in (sys.stdout, sys.stderr):  # what was printed before comes first
                with contextlib.suppress(AttributeError, OSError, ValueError):
                    stream.flush()
            return open(os.dup(int(own_fd[2])), "wb")
        return open(target, "ab")
    except OSError as err:
        raise InputError(target, f"cannot be written ({err.strerror})", "give a file path") from err


def write_bytes(target: str | Path, data: bytes, follow_links: bool = True) -> Path:
    """Write ``data`` to ``target`` atomically (``follow_links``: see :func:`atomic_file`)."""
    with atomic_file(target, follow_links) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def write_text(target: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``target`` atomically."""
    return write_bytes(target, text.encode("utf-8"))


def write_json(target: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON to ``target`` atomically."""
    return write_text(target, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


# --- folders ------------------------------------------------------------------------------


@contextlib.contextmanager
def atomic_dir(target: str | Path, overwrite: bool = False, wait: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``target``; on success it becomes ``target``.

    If ``target`` exists and ``overwrite`` is false, raises ``FileExistsError`` before anything is
    written, and again at the end if a folder appeared there meanwhile (it is left as it is).
    A link or a file at ``target`` is never replaced: InputError. With ``overwrite``, the old
    folder is swapped for the new one in one step (``renameat2`` RENAME_EXCHANGE), so the path
    always holds one of them. Where the filesystem lacks ``renameat2``, the swap is two renames
    recorded in a journal ``.NAME.swap``: the next writer of ``target``, or the next
    :func:`finish_interrupted_swap` (every model and dataset open), completes a swap a kill cut.

    One writer at a time: the block runs holding an exclusive lock (``flock`` on ``.NAME.lock``
    beside ``target``). A second writer fails at once with InputError naming ``target``, or,
    with ``wait``, blocks until the first is done. Holding the lock, a writer also removes the
    temporaries that dead writers of ``target`` left.
    """
    target = Path(target)
    check_dir_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = lock(target, wait)
    if fd is None:
        raise InputError(
            target,
            f"another process is writing this folder now (it holds {beside(target, 'lock')})",
            "wait for it to finish, or write to another folder",
        )
    try:
        repair(target)
        check_dir_target(target, overwrite)
        clear_stale(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        try:
            yield tmp
            os.chmod(tmp, 0o777 & ~_umask())
            fsync_dir(tmp)
            publish(tmp, target, overwrite)
        finally:  # the unused temporary, or the old copy after an exchange
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        unlock(target, fd)
