"""Replacing a folder in one step, one writer at a time (the machinery of ``atomic_dir``).

Names beside a folder target ``NAME``: ``.NAME.xxxxxxxx.tmp`` (a writer's temporary, or the old
copy it is removing), ``.NAME.lock`` (the writers' lock, ``flock``) and ``.NAME.swap`` (the
journal of a replacement on a filesystem without ``renameat2``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import json
import logging
import os
import platform
import re
import secrets
import shutil
import stat
import time
from pathlib import Path

from xmc_core.errors import ArtifactError, InputError

RENAME_NOREPLACE = 1  # renameat2: fail with EEXIST if the target exists
RENAME_EXCHANGE = 2  # renameat2: swap the two paths in one step
_AT_FDCWD = -100
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "arm64": 276, "riscv64": 276, "ppc64le": 357}
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}  # filesystem or kernel lacks it
log = logging.getLogger(__name__)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _renameat2(src: Path, dst: Path, flags: int) -> None:
    """Linux ``renameat2(2)`` through libc, or the raw syscall where libc lacks the wrapper.

    Raises OSError: EEXIST (RENAME_NOREPLACE, target exists), EINVAL/ENOSYS/EOPNOTSUPP (the
    filesystem or kernel does not offer it: callers fall back), or any error ``rename`` gives.
    """
    libc, machine = _libc(), platform.machine()
    args = (_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), ctypes.c_uint(flags))
    if libc is not None and hasattr(libc, "renameat2"):
        rc = libc.renameat2(*args)
    elif libc is not None and machine in _SYS_RENAMEAT2:
        rc = libc.syscall(ctypes.c_long(_SYS_RENAMEAT2[machine]), *args)
    else:
        raise OSError(errno.ENOSYS, "renameat2 is not available here", str(src))
    if rc != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(src), None, str(dst))


def beside(target: Path, suffix: str) -> Path:
    return target.parent / f".{target.name}.{suffix}"


def _temporaries(target: Path) -> re.Pattern[str]:
    """Names of ``target``'s temporaries (``mkdtemp``'s 8 random characters)."""
    return re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")


class FolderExists(FileExistsError):
    """The output folder ``target`` exists and overwriting was not asked for (``appeared``: it
    appeared while the new one was being written). The message names the ``overwrite``
    argument; the command lines say ``--overwrite``."""

    def __init__(self, target: Path, appeared: bool = False) -> None:
        self.target, self.appeared = target, appeared
        how = " appeared while it was being written and was left as it is" if appeared else ""
        super().__init__(f"{target}{how or ' already exists'} (pass overwrite to replace it)")


def check_dir_target(target: Path, overwrite: bool) -> None:
    """Refuse an output folder ``target`` that is a link or a file, or (without
    ``overwrite``) that exists."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise InputError(
            target,
            f"is a symbolic link (to {os.readlink(target)}); a folder is never written over one",
            "write to the folder it points to, or remove the link",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(target, "exists and is not a folder", "remove it or choose another path")
    if not overwrite:
        raise FolderExists(target)


def lock(target: Path, wait: bool) -> int | None:
    """Lock ``.NAME.lock`` beside ``target``; its descriptor, or None if another holds it."""
    path = beside(target, "lock")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(FileNotFoundError):  # else a finishing writer removed it: retry
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)


def unlock(target: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(beside(target, "lock"))  # while still held: a waiter then retries on a new one
    os.close(fd)


def clear_stale(target: Path) -> None:
    """Remove temporary folders of ``target`` (with the lock held, their writers are dead).

    Each is first renamed ``.NAME.xxxxxxxx.dead``, unread: a removal cut short never leaves a
    half-emptied folder that looks like a writer's temporary."""
    pattern = _temporaries(target)
    dead = re.compile(pattern.pattern.removesuffix(r"\.tmp") + r"\.dead")
    for entry in os.scandir(target.parent):
        if not entry.is_dir(follow_symlinks=False):
            continue
        if pattern.fullmatch(entry.name):
            with contextlib.suppress(OSError):
                gone = os.path.join(target.parent, entry.name.removesuffix(".tmp") + ".dead")
                os.rename(entry.path, gone)
                shutil.rmtree(gone, ignore_errors=True)
        elif dead.fullmatch(entry.name):
            shutil.rmtree(entry.path, ignore_errors=True)


def _appeared(target: Path) -> FileExistsError:
    return FolderExists(target, appeared=True)


def publish(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move the finished ``tmp`` to ``target`` (lock held); after an exchange ``tmp`` holds the
    old folder."""
    if not os.path.lexists(target):
        _rename_noreplace(tmp, target)
    elif not overwrite:
        raise _appeared(target)
    else:
        check_dir_target(target, overwrite=True)
        try:
            _renameat2(tmp, target, RENAME_EXCHANGE)
        except OSError as err:
            if err.errno not in _UNSUPPORTED:
                raise
            _swap_with_journal(tmp, target)
    fsync_dir(target.parent)


def _rename_noreplace(tmp: Path, target: Path) -> None:
    try:
        _renameat2(tmp, target, RENAME_NOREPLACE)
        return
    except OSError as err:
        if err.errno == errno.EEXIST:
            raise _appeared(target) from None
        if err.errno not in _UNSUPPORTED:
            raise
    # Portable: the lock keeps xmc writers out; rename(2) still refuses a non-empty folder that
    # another program made between this check and the rename.
    if os.path.lexists(target):
        raise _appeared(target)
    try:
        os.rename(tmp, target)
    except OSError as err:
        if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise _appeared(target) from None
        raise


def _swap_with_journal(tmp: Path, target: Path) -> None:
    """Two renames for a filesystem without RENAME_EXCHANGE, journaled for :func:`repair`."""
    journal = beside(target, "swap")
    old = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    _write_journal(journal, {"new": tmp.name, "old": old.name})
    os.rename(target, old)
    os.rename(tmp, target)
    fsync_dir(target.parent)
    journal.unlink()
    fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def _write_journal(journal: Path, record: dict[str, str]) -> None:
    """Write the journal whole (temporary, fsync, rename) before the first rename."""
    tmp = journal.with_name(journal.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, journal)
    fsync_dir(journal.parent)


def repair(target: Path) -> None:
    """Finish a journaled swap of ``target`` a kill interrupted (lock held): put the new copy
    (complete before the journal was written) or else the old one at ``target``; drop the rest.
    Logs one warning saying which copy ``target`` now holds."""
    journal = beside(target, "swap")
    if not os.path.lexists(journal):
        return
    copies = _journal_copies(journal, target)
    found = [c for c in copies if c.is_dir() and not c.is_symlink()]
    if os.path.lexists(target):  # killed before the first rename, or after the second
        held = "the previous copy" if copies[0] in found else "the new copy"
    elif found:
        os.rename(found[0], target)
        fsync_dir(target.parent)
        held = "the new copy" if found[0] == copies[0] else "the previous copy"
    else:
        raise ArtifactError(
            journal,
            f"a replacement of {target} was interrupted and neither copy is left",
            f"re-create {target.name}, then delete {journal.name}",
        )
    journal.unlink()
    fsync_dir(target.parent)
    for copy in copies:
        shutil.rmtree(copy, ignore_errors=True)
    log.warning("%s: finished a replacement that was interrupted: it holds %s", target, held)


def _journal_copies(journal: Path, target: Path) -> list[Path]:
    """[new copy, old copy] named by the journal, both temporaries of ``target``."""
    fix = (
        f"move the complete one of the hidden .{target.name}.*.tmp folders beside it to "
        f"{target.name}, then delete {journal.name}"
    )
    try:
        record = json.loads(journal.read_text(encoding="utf-8"))
        names = [record["new"], record["old"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        problem = f"journal of an interrupted replacement of {target} is unreadable ({err})"
        raise ArtifactError(journal, problem, fix) from err
    pattern = _temporaries(target)
    if not all(isinstance(n, str) and pattern.fullmatch(n) for n in names):
        raise ArtifactError(journal, f"names copies that are not temporaries of {target}", fix)
    return [target.parent / n for n in names]


def finish_interrupted_swap(folder: str | Path, timeout_s: float = 30.0) -> None:
    """Before a model or dataset folder is read: finish a replacement of it that a kill cut
    between its two renames (only where ``renameat2`` is missing, see ``atomic.atomic_dir``), or
    report it as ArtifactError. One ``lstat`` when there is nothing to do."""
    folder = Path(folder)
    journal = beside(folder, "swap")
    if not os.path.lexists(journal):
        return
    deadline = time.monotonic() + timeout_s
    try:
        while (fd := lock(folder, wait=False)) is None:
            if not os.path.lexists(journal):
                return  # the writer holding the lock finished its swap
            if time.monotonic() > deadline:
                raise ArtifactError(journal, f"another process is replacing {folder}", "retry")
            time.sleep(0.05)
        try:
            repair(folder)
        finally:
            unlock(folder, fd)
    except OSError as err:
        raise ArtifactError(
            journal,
            f"a replacement of {folder} was interrupted and cannot be finished here ({err})",
            f"open it once as a user who may write to {folder.parent}, or rerun its writer",
        ) from err
