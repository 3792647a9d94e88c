"""Intake of corpus drops: landing folder -> validated, merged training corpus.

One call does what a scheduled retraining run needs before it trains:

1. every entry of the landing folder is examined (:func:`~xmc_core.intake.landing.scan_drops`);
   refused entries (unsafe names, links, plain files) and drops that fail validation are moved
   to the quarantine folder with a ``REASON.txt``;
2. the valid drops are ingested into a staging folder, then merged, in arrival order, into the
   current training corpus (``merge``) or into an empty one (``replace``); the result is a
   content-addressed folder of the corpus store, which becomes ``current.json``, of the lineage
   of the corpus it follows (``xmc_core.corpus.lineage``; the first: named after its first drop);
3. the ingested drops are moved to the archive folder. Nothing is ever deleted.

Any error of one drop, expected or not (a symbolic-link loop, an importer bug, a drop of another
kind than the corpus it is merged into), quarantines that drop with the error as its reason;
the other drops go on. A drop that cannot even be moved stays in the landing folder and is
reported as ``stuck``.

Every step can be repeated after a crash. Before the first drop is archived the batch is
recorded in ``<store>/intake-batch.json`` (the merged corpus and its drops, state ``open``); it
is closed once all are archived. A run that finds a batch open merges into that batch's corpus,
in both modes, so the drops archived before the crash stay in the corpus (``replace`` would
otherwise start from the unarchived ones alone); an unarchived drop is merged again and, as
merging is an upsert by doc id, gives the same corpus (same fingerprint, same folder). Whether
the current corpus still needs training is read from ``trained.json``, written by
:func:`mark_trained` only after a successful training run, so a run that failed after the intake
is finished by the next.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from xmc_core.corpus.lineage import grown, lineage_of
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError
from xmc_core.evaluation.report import read_json
from xmc_core.intake.corpus_store import current_corpus, merge_into_store, set_current_corpus
from xmc_core.intake.landing import (
    Drop,
    ingest_drop,
    scan_drops,
    unexpected_problem,
)
from xmc_core.intake.quarantine import archive, quarantine
from xmc_core.storage.atomic import write_json
from xmc_core.wording import counted

log = logging.getLogger(__name__)

TRAINED_FILE = "trained.json"
BATCH_FILE = "intake-batch.json"


@dataclass(frozen=True)
class IntakeFolders:
    """Where drops arrive, where bad ones and ingested ones go, and the corpus store."""

    landing: Path
    quarantine: Path
    archive: Path
    store: Path


@dataclass
class IntakeResult:
    """What an intake did; ``corpus`` is the current training corpus (None: there is none).

    ``quarantined``: ``{"name", "to", "reason"}`` per refused drop; ``stuck``: ``{"name",
    "reason", "error"}`` per refused drop that could not even be moved (it stays in the landing
    folder); ``resumed``: the drops of an interrupted batch this run finished.
    """

    corpus: str | None
    ingested: list[str] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)
    stuck: list[dict[str, str]] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
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

    ``base_dataset``: the corpus to merge into when the store has no current corpus yet. A batch
    left open by an interrupted run (see :func:`read_batch`) is finished first: its merged
    corpus is the base, in both modes, so no drop it already archived is lost. Any error of one
    drop (bad input, or an unexpected exception while examining or ingesting it, or a merge
    error naming it) quarantines that drop with the error as its reason; the other drops go on.
    """
    folders.store.mkdir(parents=True, exist_ok=True)
    result = IntakeResult(corpus=None)
    batch = read_batch(folders.store)
    if batch is not None:
        result.resumed = list(batch["drops"])
        log.warning("finishing the interrupted intake batch of %s", ", ".join(batch["drops"]))
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folders.store))
    try:
        staged = _stage_drops(folders, policies, staging, result)
        base = _base(folders, mode, base_dataset, batch)
        before = _base(folders, "merge", base_dataset, batch)  # what the new corpus follows
        merged, staged = _merge_drops(folders, base, before, staged, rows_per_group, result)
        if merged is None and batch is not None:
            merged = base
        if merged is not None:
            _commit(folders, merged, staged, batch, result)
            log.info(
                "training corpus is now %s (%s, mode %s)",
                merged,
                counted(len(staged), "drop"),
                mode,
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    current = current_corpus(folders.store) or base_dataset
    result.corpus = None if current is None else str(current)
    result.needs_training = current is not None and not _is_trained(folders.store, current)
    return result


def _stage_drops(
    folders: IntakeFolders, policies: Policies, staging: Path, result: IntakeResult
) -> list[tuple[Drop, Path]]:
    """Ingest every valid drop into ``staging``; quarantine the others (any exception)."""
    staged: list[tuple[Drop, Path]] = []
    for drop in scan_drops(folders.landing):
        problem = drop.problem
        if problem is None:
            dest = staging / f"{len(staged):04d}"
            try:
                ingest_drop(drop, dest, policies)
                staged.append((drop, dest))
                continue
            except InputError as err:
                problem = err
            except Exception as err:  # not BaseException: a kill or Ctrl-C still stops the run
                log.exception("unexpected error while ingesting drop %s", drop.name)
                problem = unexpected_problem(drop.path, "ingested", err)
        _quarantine(folders, drop, problem, result)
    return staged


def _base(
    folders: IntakeFolders, mode: str, base_dataset: Path | None, batch: dict[str, Any] | None
) -> Path | None:
    """What the drops are merged into: an open batch's corpus, else per ``mode``."""
    if batch is not None:
        path = folders.store / batch["corpus"]
        if not path.is_dir():
            raise InputError(
                folders.store / BATCH_FILE,
                f"names the interrupted batch's corpus {batch['corpus']!r}, which is missing",
                f"move the drops it lists ({', '.join(batch['drops'])}) from the archive folder "
                f"{folders.archive} back into the landing folder, then remove {BATCH_FILE}",
            )
        return path
    if mode == "replace":
        return None
    return current_corpus(folders.store) or base_dataset


def _merge_drops(
    folders: IntakeFolders,
    base: Path | None,
    before: Path | None,
    staged: list[tuple[Drop, Path]],
    rows_per_group: int,
    result: IntakeResult,
) -> tuple[Path | None, list[tuple[Drop, Path]]]:
    """Merge ``staged`` into ``base`` in the store; a drop the merge refuses (another kind of
    corpus, ...) is quarantined and the merge redone without it. Returns (corpus, drops in it).

    The new corpus continues the lineage of ``before`` (the corpus it follows, in both modes;
    ``xmc_core.corpus.lineage``), or starts one named after its first drop."""
    staged = list(staged)
    followed = None if before is None else lineage_of(before)  # read once, not per retry
    while staged:
        lineage = staged[0][0].name if followed is None else grown(followed, len(staged))
        try:
            drops = [d for _, d in staged]
            merged = merge_into_store(folders.store, base, drops, rows_per_group, lineage)
            return merged, staged
        except InputError as err:
            culprit = _culprit(staged, err)
            if culprit is None:
                raise
            staged.remove(culprit)
            problem = InputError(culprit[0].path, f"cannot be merged: {err.problem}", err.fix)
            _quarantine(folders, culprit[0], problem, result)
    return None, []


def _culprit(staged: list[tuple[Drop, Path]], err: InputError) -> tuple[Drop, Path] | None:
    """The staged drop whose ingested copy ``err`` names, if any."""
    if err.path is None:
        return None
    where = Path(err.path)
    return next((s for s in staged if where == s[1] or s[1] in where.parents), None)


def _commit(
    folders: IntakeFolders,
    merged: Path,
    staged: list[tuple[Drop, Path]],
    batch: dict[str, Any] | None,
    result: IntakeResult,
) -> None:
    """Record the batch, make ``merged`` current, archive its drops, close the batch."""
    names = [drop.name for drop, _ in staged]
    earlier = [] if batch is None else list(batch["drops"])
    record = {
        "state": "open",
        "corpus": merged.name,
        "drops": earlier + [n for n in names if n not in earlier],
        "opened_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_json(folders.store / BATCH_FILE, record)
    set_current_corpus(folders.store, merged)
    for drop, _ in staged:
        archive(drop.path, folders.archive)
        result.ingested.append(drop.name)
    write_json(folders.store / BATCH_FILE, record | {"state": "closed"})


def read_batch(store: Path) -> dict[str, Any] | None:
    """The open intake batch of ``store`` (``intake-batch.json``), None when there is none.

    A batch is recorded before its first drop is archived (the merged corpus's store folder and
    the drops in it) and closed once all are archived; a batch still open means a run stopped in
    between, and the next run merges into its corpus instead of starting from scratch.
    """
    path = Path(store) / BATCH_FILE
    if not path.is_file():
        return None
    record = read_json(path)
    if record.get("state") != "open":
        return None
    if not isinstance(record.get("corpus"), str) or not isinstance(record.get("drops"), list):
        raise InputError(path, "not a valid intake batch record", f"remove {BATCH_FILE}")
    return record


def _quarantine(
    folders: IntakeFolders, drop: Drop, problem: Exception, result: IntakeResult
) -> None:
    """Move ``drop`` to quarantine with ``problem`` as its reason; if even that fails, leave it
    in the landing folder and record it as stuck."""
    try:
        moved = quarantine(drop.path, folders.quarantine, str(problem))
    except Exception as err:
        log.error("drop %s could not be quarantined (%s): %s", drop.name, err, problem)
        result.stuck.append(
            {"name": drop.name, "reason": str(problem), "error": f"{type(err).__name__}: {err}"}
        )
        return
    log.warning("quarantined drop %s: %s", drop.name, problem)
    result.quarantined.append({"name": drop.name, "to": str(moved), "reason": str(problem)})


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
