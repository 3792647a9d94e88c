"""Where a landing-folder entry goes once handled: the archive (ingested), or the quarantine
beside a ``REASON.txt`` saying why and what to do. Entries are moved (renamed on one
filesystem), never copied or deleted; each gets a new folder named after the time and the
entry's name made harmless (:func:`safe_name`)."""

from __future__ import annotations

import os
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

from xmc_core.errors import InputError
from xmc_core.intake.landing import IGNORED_NAMES, MAX_NAME_BYTES
from xmc_core.storage.atomic import write_text

REASON_FILE = "REASON.txt"


def quarantine(entry: Path, quarantine_dir: Path, reason: str) -> Path:
    """Move ``entry`` to ``quarantine_dir/<UTC time>-<name>/`` beside a ``REASON.txt``.

    ``REASON.txt`` (written first) holds ``reason``, the time and what to do. Returns the
    folder. Nothing is copied or deleted.
    """
    entry = Path(entry)
    folder = _claim_folder(Path(quarantine_dir), entry)
    moved = folder / _inner_name(entry.name)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    write_text(
        folder / REASON_FILE,
        f"xmc refused this landing-folder entry.\n\nentry:    {entry.name!r}\n"
        f"from:     {entry}\nmoved to: {moved}\ntime:     {now}\n\nreason:\n{reason}\n\n"
        "what to do: fix the problem above, then copy the fixed drop back into the landing "
        f"folder ({entry.parent}) as a sub-folder: copy it in under one of the {IGNORED_NAMES} "
        "(the landing folder ignores them), then rename it. xmc never deletes this folder; "
        "remove it once handled.\n",
    )
    _move(entry, moved)
    return folder


def archive(entry: Path, archive_dir: Path) -> Path:
    """Move an ingested ``entry`` to ``archive_dir/<UTC time>-<name>/``; returns that folder."""
    entry = Path(entry)
    folder = _claim_folder(Path(archive_dir), entry)
    _move(entry, folder / _inner_name(entry.name))
    return folder


def safe_name(name: str) -> str:
    """``name`` made harmless as a folder name: no separators, control characters, '..', or
    leading dots, at most ``MAX_NAME_BYTES`` bytes."""
    bad = ("Cc", "Cs", "Cf")
    out = "".join("_" if c in "/\\" or unicodedata.category(c) in bad else c for c in name)
    out = out.replace("..", "_").lstrip(".")
    return out.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore") or "entry"


def _inner_name(name: str) -> str:
    inner = safe_name(name)
    return f"_{inner}" if inner == REASON_FILE else inner


def _claim_folder(parent: Path, entry: Path) -> Path:
    """Create and return a new folder ``parent/<UTC time>-<safe name>[-k]`` for ``entry``.

    Refuses (InputError) a ``parent`` on another filesystem than ``entry``: moving there would
    mean copying and deleting.
    """
    parent.mkdir(parents=True, exist_ok=True)
    if os.stat(parent).st_dev != os.lstat(entry).st_dev:
        raise InputError(
            parent,
            f"is on another filesystem than {entry}: a move would copy and delete",
            "put the quarantine and archive folders on the landing folder's filesystem",
        )
    stem = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{safe_name(entry.name)}"
    for k in range(1, 10_000):
        folder = parent / (stem if k == 1 else f"{stem}-{k}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"no free folder name for {stem} in {parent}")


def _move(src: Path, dest: Path) -> None:
    """Rename ``src`` (a link is moved, not followed) to ``dest`` on the same filesystem."""
    os.rename(src, dest)
