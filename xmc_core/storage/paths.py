"""What is at a path a command was given, said in words before any work starts.

A model folder holds a ``meta.json`` of class ``XmcModel``; a dataset folder a
``manifest.json``. A path that is something else (missing, a file, a dataset where a model is
expected, raw split files where a dataset is expected) is a :class:`PathError` saying what it
is and which command makes the right thing. Every check here only stats paths and reads one
small JSON file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from xmc_core.errors import PathError
from xmc_core.storage.atomic import finish_interrupted_swap

MODEL_CLASS = "XmcModel"
"""``class`` in the ``meta.json`` of a model folder."""
META = "meta.json"
MANIFEST = "manifest.json"
_RAW_FILES = {  # the first split file of each import format (xmc ingest FORMAT SRC DEST)
    "train_texts.txt": "lines", "train.txt": "xc", "train.jsonl": "jsonl", "train.csv": "csv",
}  # fmt: skip
_FIX_MODEL = "give the folder written by `xmc train` (or the train flow), or check the path"


def meta_class(path: Path) -> str | None:
    """``class`` of the JSON object in ``path``, or None (missing, unreadable, not an object)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("class")
    except (OSError, ValueError, AttributeError):
        return None


def file_kind(path: Path, mode: int) -> str:
    """What is at ``path``, whose ``st_mode`` is ``mode``, in words (``a FIFO (named pipe)``)."""
    if stat.S_ISLNK(mode):
        return f"a symbolic link to {os.readlink(path)!r}, which is missing or not a file"
    kinds = [
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ]
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def _exists(path: Path) -> bool | None:
    """Whether ``path`` exists (a link counts); None when this user cannot tell (EACCES...):
    the reader then reports the real error."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return None
    return True


def _missing_or_file(path: Path) -> str | None:
    exists = _exists(path)
    if exists is False:
        return "no such folder"
    if exists and not path.is_dir():
        return "it is a file, not a folder" if path.exists() else "it is a broken link"
    return None


def require_model_folder(path: Path, shown: str | None = None) -> None:
    """Refuse ``path`` unless it is an xmc model folder (an interrupted swap is finished
    first, as every open does)."""
    path, shown = Path(path), shown or str(path)
    finish_interrupted_swap(path)
    why = _missing_or_file(path)
    if why is not None:
        raise PathError(shown, f"no model at {shown}", why, _FIX_MODEL)
    what = f"{shown} is not an xmc model folder"
    meta = path / META
    if _exists(meta) is not False:  # damaged or unreadable: the reader names what is wrong
        cls = meta_class(meta)
        if cls is None or cls == MODEL_CLASS:
            return
        raise PathError(
            shown, what, f"{meta} names a saved {cls}, a part of a model or another artifact",
            "give the model folder (the one whose meta.json says XmcModel)",
        )  # fmt: skip
    if (path / MANIFEST).is_file():
        raise PathError(
            shown, what, f"it is a dataset folder: {MANIFEST}, no {META}",
            f"give a model folder; to train one on this dataset: xmc train {shown} MODEL_DIR",
        )  # fmt: skip
    raise PathError(shown, what, f"{meta} is missing", _FIX_MODEL)


def require_dataset_folder(path: Path, shown: str | None = None) -> None:
    """Refuse ``path`` unless it is a dataset folder (it holds ``manifest.json``)."""
    path, shown = Path(path), shown or str(path)
    finish_interrupted_swap(path)
    fix = f"create it with `xmc ingest FORMAT SRC {shown}` (or `xmc synth {shown}`)"
    why = _missing_or_file(path)
    if why is not None:
        raise PathError(shown, f"no dataset at {shown}", why, fix + ", or check the path")
    if _exists(path / MANIFEST) is not False:  # unreadable: the reader says so
        return
    what = f"{shown} is not a dataset folder"
    if meta_class(path / META) == MODEL_CLASS:
        raise PathError(
            shown, what, "it is an xmc model folder",
            "give a dataset folder made by `xmc ingest` (in `xmc evaluate` and `xmc predict` "
            "the model comes first)",
        )  # fmt: skip
    raw = [fmt for name, fmt in _RAW_FILES.items() if (path / name).is_file()]
    if raw:
        raise PathError(
            shown, what, f"it holds raw {raw[0]} files, no {MANIFEST}",
            f"import them first: xmc ingest {raw[0]} {shown} DATASET_DIR",
        )  # fmt: skip
    raise PathError(shown, what, f"no {MANIFEST}", fix)


def require_writable(target: Path, shown: str | None = None, folder: bool = False) -> None:
    """Refuse an output ``target`` that cannot be written: a folder where a file goes, or no
    folder this user may write where it (or the folders leading to it) would be created.

    A device or FIFO is left to the writer (it is written into, not replaced).
    """
    target, shown = Path(target), shown or str(target)
    if target.is_dir() and not folder:
        raise PathError(
            shown, f"cannot write {shown}", "it is a folder",
            f"give a file name, e.g. {Path(shown) / 'predictions.jsonl'}",
        )  # fmt: skip
    if target.exists() and not target.is_file() and not target.is_dir():
        return
    real = Path(os.path.realpath(target))
    parent = real.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PathError(
            shown, f"cannot write {shown}", f"{parent} is a file, not a folder",
            "choose another path",
        )  # fmt: skip
    if not os.access(parent, os.W_OK | os.X_OK):
        why = f"{parent} is not writable"
        if os.statvfs(parent).f_flag & os.ST_RDONLY:
            why += " (read-only file system)"
        raise PathError(
            shown, f"cannot write {shown}", why,
            "write it to a folder you may write to, or give this user access (chmod/chown)",
        )  # fmt: skip
