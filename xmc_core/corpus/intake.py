"""Intake of corpus drops: landing folder -> validated, merged training corpus.

One call does what a scheduled retraining run needs before it trains:

1. every entry of the landing folder is examined (:func:`~xmc_core.corpus.landing.scan_drops`);
   refused entries (unsafe names, links, plain files) and drops that fail validation are moved
   to the quarantine folder with a ``REASON.txt``;
2. the valid drops are ingested into a staging folder, then merged, in arrival order, into the
   current training corpus (``merge``) or into an empty one (``replace``); the result is a
   content-addressed folder of the corpus store, which becomes ``current.json``;
3. the ingested drops are moved to the archive folder. Nothing is ever deleted.

Every step can be repeated after a crash: an unarchived drop is merged again and, as merging is
an upsert by doc id, gives the same corpus (same fingerprint, same folder). Whether the current
corpus still needs training is read from ``trained.json``, written by :func:`mark_trained` only
after a successful training run, so a run that failed after the intake is finished by the next.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from xmc_core.atomic import write_json
from xmc_core.corpus.landing import Drop, archive, ingest_drop, quarantine, scan_drops
from xmc_core.corpus.merge import current_corpus, merge_into_store, set_current_corpus
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError
from xmc_core.report import read_json

log = logging.getLogger(__name__)

TRAINED_FILE = "trained.json"


@dataclass(frozen=True)
class IntakeFolders:
    """Where drops arrive, where bad ones and ingested ones go, and the corpus store."""

    landing: Path
    quarantine: Path
    archive: Path
    store: Path


@dataclass
class IntakeResult:
    """What an intake did; ``corpus`` is the current training corpus (None: there is none)."""

    corpus: str | None
    ingested: list[str] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)
    needs_training: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def take_in(
    folders: IntakeFolders,
    mode: Literal["merge", "replace"],
    policies: Policies,
    rows_per_group: int,
    base_dataset: Path | None = None,
) -> IntakeResult:
    """Quarantine bad drops, merge the good ones into the store, archive them.

    ``base_dataset``: the corpus to merge into when the store has no current corpus yet.
    """
    folders.store.mkdir(parents=True, exist_ok=True)
    result = IntakeResult(corpus=None)
    staged: list[tuple[Drop, Path]] = []
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folders.store))
    try:
        for drop in scan_drops(folders.landing):
            problem = drop.problem
            if problem is None:
                try:
                    dest = staging / f"{len(staged):04d}"
                    ingest_drop(drop, dest, policies)
                    staged.append((drop, dest))
                    continue
                except InputError as err:
                    problem = err
            moved = quarantine(drop.path, folders.quarantine, str(problem))
            log.warning("quarantined drop %s: %s", drop.name, problem)
            result.quarantined.append({"name": drop.name, "to": str(moved), "reason": str(problem)})
        if staged:
            _merge(folders, mode, base_dataset, [d for _, d in staged], rows_per_group)
            for drop, _ in staged:
                archive(drop.path, folders.archive)
                result.ingested.append(drop.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    current = current_corpus(folders.store) or base_dataset
    result.corpus = None if current is None else str(current)
    result.needs_training = current is not None and not _is_trained(folders.store, current)
    return result


def _merge(
    folders: IntakeFolders,
    mode: str,
    base_dataset: Path | None,
    drops: list[Path],
    rows_per_group: int,
) -> None:
    base = None if mode == "replace" else (current_corpus(folders.store) or base_dataset)
    merged = merge_into_store(folders.store, base, drops, rows_per_group)
    set_current_corpus(folders.store, merged)
    log.info("training corpus is now %s (%d drops merged, mode %s)", merged, len(drops), mode)


def _is_trained(store: Path, corpus: Path) -> bool:
    path = store / TRAINED_FILE
    if not path.is_file():
        return False
    return read_json(path).get("fingerprint") == Corpus(corpus).fingerprint


def mark_trained(store: Path, corpus: Path, details: dict[str, Any]) -> Path:
    """Record that ``corpus`` was trained (with ``details``: model version, run id ...)."""
    record = {
        "corpus": str(corpus),
        "fingerprint": Corpus(corpus).fingerprint,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        **details,
    }
    return write_json(store / TRAINED_FILE, record)
