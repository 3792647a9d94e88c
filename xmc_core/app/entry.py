"""One error path for every command line (``xmc``, ``python -m flows.*``).

Expected failures (bad input, a full disk, a file this user may not read, a read-only folder, an
invalid configuration) become ``error: <what> (<path>)`` and ``  fix: <what to do>`` on stderr and
exit status 2, with no traceback; a Ctrl-C becomes one ``interrupted: ...`` line and exit status
130 (:mod:`xmc_core.interrupt`). Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from xmc_core.config_errors import plain_error
from xmc_core.errors import XmcError
from xmc_core.interrupt import EXIT_INTERRUPTED, interrupted_line
from xmc_core.storage.folder_swap import FolderExists

EXIT_ERROR = 2
"""Exit status of a command that failed on an expected error."""

_OS_ERRORS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: (
        "no space left on the device",
        "free space on that disk, or write the output to another one",
    ),
    errno.EDQUOT: (
        "disk quota exceeded",
        "free space within your quota, or write the output to another disk",
    ),
    errno.EACCES: (
        "permission denied",
        "give this user access to it (chmod/chown), or run as a user who has it",
    ),
    errno.EPERM: (
        "operation not permitted",
        "give this user access to it (chmod/chown), or run as a user who has it",
    ),
    errno.EROFS: (
        "read-only file system",
        "write to a writable folder (another output path, or --set work_dir=...)",
    ),
}


def _os_error_code(err: OSError) -> int | None:
    """``err.errno``, or the code its message names (pyarrow raises OSError without errno)."""
    if err.errno in _OS_ERRORS:
        return err.errno
    if err.errno is None:
        text = str(err)
        for code in _OS_ERRORS:
            if os.strerror(code) in text:
                return code
    return None


def error_text(err: BaseException, writing: Path | None = None) -> str | None:
    """The message of an expected failure (``what``, then ``  fix: ...``), or None for a bug.

    ``writing``: the output the command was writing, named when an OSError carries no path.
    """
    if isinstance(err, XmcError):
        return str(err)
    if isinstance(err, FolderExists):  # an output folder of `xmc train|ingest|synth`
        what = "appeared while this run wrote it" if err.appeared else "already exists"
        return (
            f"{err.target} {what}\n  fix: pass --overwrite to replace it, or choose another folder"
        )
    if isinstance(err, FileExistsError):
        if err.errno is None:
            return str(err)
        return f"already exists ({err.filename})\n  fix: remove it, or choose another path"
    if isinstance(err, ValidationError):  # options built into a model (IngestOptions, ...)
        return plain_error(err)
    if isinstance(err, OSError):
        code = _os_error_code(err)
        if code is None:
            return None
        what, fix = _OS_ERRORS[code]
        path = err.filename or (f"while writing {writing}" if writing else None)
        return f"{what} ({path})\n  fix: {fix}" if path else f"{what}: {err}\n  fix: {fix}"
    return None


def run_command(command: Callable[[], object], writing: Path | str | None = None) -> int:
    """Run ``command``; return 0, or print the error of an expected failure and return 2, or
    the line of a Ctrl-C and return 130.

    Exceptions that are not expected failures propagate with their traceback (they are bugs).
    """
    try:
        command()
    except KeyboardInterrupt as err:
        print(interrupted_line(err), file=sys.stderr)
        gc.freeze()  # the process ends now: leave its objects to the OS, not to a last collection
        return EXIT_INTERRUPTED
    except Exception as err:  # sorted into expected failures and bugs below
        text = error_text(err, Path(writing) if writing else None)
        if text is None:
            raise
        print(f"error: {text}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def whole_count(text: str) -> int:
    """An argparse ``type``: a whole number >= 1 (a top-k, a beam size); anything else is a
    usage error (exit status 2) before any work starts."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def probability(text: str) -> float:
    """An argparse ``type``: a number in [0, 1] (a threshold); anything else is a usage error."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a probability in [0, 1], got {text!r}")
    return value


def positive_number(text: str) -> float:
    """An argparse ``type``: a finite number > 0 (a scale); anything else is a usage error."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value
