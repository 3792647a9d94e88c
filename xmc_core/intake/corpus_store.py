"""The corpus store: merged corpora (:func:`~xmc_core.intake.merge.merge_corpora`) kept under
``root/<fingerprint[:16]>/``, the current one named in ``root/current.json``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Lineage
from xmc_core.errors import InputError
from xmc_core.intake.merge import merge_corpora
from xmc_core.storage.atomic import write_json

CURRENT_FILE = "current.json"
STORE_NAME_CHARS = 16


def merge_into_store(
    root: Path,
    base: Path | None,
    drops: list[Path],
    rows_per_group: int,
    lineage: Lineage | str | None = None,
) -> Path:
    """Merge into the store ``root`` (:func:`merge_corpora`, with ``lineage``): the result lands
    in ``root/<fingerprint[:16]>``.

    Written to a hidden temporary folder in ``root`` first, then renamed; if a folder of that
    name already exists (the same content was merged before, e.g. a rerun) it is reused and the
    new copy discarded. Returns the corpus folder. The current corpus is not changed.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".merge-", suffix=".tmp", dir=root))
    try:
        manifest = merge_corpora(base, drops, staging / "corpus", rows_per_group, lineage)
        final = root / manifest.fingerprint[:STORE_NAME_CHARS]
        if not final.exists():
            try:
                os.replace(staging / "corpus", final)
            except OSError:
                if not final.exists():  # not a concurrent twin: a real failure
                    raise
        _check_store_entry(final, manifest.fingerprint)
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_store_entry(path: Path, fingerprint: str) -> None:
    found = Corpus(path).fingerprint
    if found != fingerprint:
        raise InputError(
            path,
            f"store folder holds fingerprint {found}, expected {fingerprint}",
            "the corpus store was edited by hand: move this folder out of the store",
        )


def current_corpus(root: Path) -> Path | None:
    """The current corpus of store ``root`` (``root/current.json``), None if none was set."""
    pointer = Path(root) / CURRENT_FILE
    if not pointer.exists():
        return None
    try:
        name = json.loads(pointer.read_text(encoding="utf-8"))["corpus"]
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(
            pointer, f"not a valid pointer file ({err})", "set the current corpus again"
        ) from err
    if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
        raise InputError(pointer, f"corpus {name!r} is not a folder name", "set it again")
    path = Path(root) / name
    if not path.is_dir():
        raise InputError(
            pointer, f"names corpus {name!r}, which is missing", "set the current corpus again"
        )
    return path


def set_current_corpus(root: Path, path: Path) -> Path:
    """Make ``path`` (a corpus folder directly in store ``root``) current; atomic. Returns it."""
    root, path = Path(root), Path(path)
    if path.resolve().parent != root.resolve():
        raise InputError(
            path, f"is not a corpus folder of the store {root}", "use merge_into_store"
        )
    corpus = Corpus(path)
    write_json(
        root / CURRENT_FILE,
        {
            "corpus": path.name,
            "fingerprint": corpus.fingerprint,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    return path
