"""A calibration carve: training documents held out of training, to fit calibration on.

A training document is held out when a hash of its doc id and the carve's seed falls below the
carve's share (:func:`held_out`), so the choice depends on the document alone: the same documents
are held out of a corpus however its row groups are laid out. In a grouped corpus
(:mod:`xmc_core.corpus.schema`) the hash is of the document's group (``by_group``, the default):
a group is held out whole, as a test split of whole groups is, so that the model is not
calibrated on documents whose siblings it trained on (which it predicts better than the test's).
The share is ``fraction``, lowered so that at most ``max_docs`` of the training documents are
held out (:func:`carve_share`; of groups, about that many documents). A corpus grown by merging
holds out the same documents (less those a drop replaced) while the cap does not bind, and a
subset of them once it does (a smaller share keeps the smaller hashes): a warm retrain is
calibrated on documents its champion did not train on either (a warm start reuses the
champion's parts), except those a drop replaced.

:func:`carve_corpus` writes the corpus without them: its training split keeps every other row in
order, in the source's row groups; the test split and the label texts are copied; the lineage is
the source's (the registered model's name follows from it); the manifest's ``source`` records
the carve (``calibration_carve``); written in bulk (:mod:`xmc_core.corpus.subset`).
:func:`carved_rows` reads the held-out rows back from the source corpus (:func:`held_rows`:
which they are). :func:`write_carve` writes both as a :class:`Carve` (the training stage's
artifact).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.corpus.subset import write_subset
from xmc_core.storage.artifacts import read_meta, write_meta

TRAINING, HELD = "training", "held"


@dataclass(frozen=True)
class Carve:
    """A carved corpus, as a folder: ``training/``, the corpus without its held-out training
    documents (:func:`carve_corpus`), and ``held/``, a corpus of the held-out documents alone
    (in both of its splits, as a dataset folder has two)."""

    training: Corpus
    held: Corpus

    @classmethod
    def load(cls, folder: str | Path) -> Carve:
        read_meta(folder, "Carve")
        return cls(Corpus(Path(folder) / TRAINING), Corpus(Path(folder) / HELD))


def write_carve(
    src: Path, out: Path, fraction: float, max_docs: int, seed: int, by_group: bool = True
) -> None:
    """Write the :class:`Carve` of corpus ``src`` into folder ``out``."""
    corpus = Corpus(src)
    record = _record(corpus, fraction, max_docs, seed, by_group)
    parts, held = _training_parts(corpus, record)
    _write_kept(corpus, out / TRAINING, parts, held, record)
    rows = pa.concat_tables([t.filter(pa.array(h)) for t, h in zip(parts, held, strict=True)])
    if rows.num_rows == 0:
        raise ValueError(f"the carve holds out no training document of {src}")
    write_subset(corpus, out / HELD, {split: [rows] for split in SPLITS},
                 {"calibration_carve_of": record}, f"held {record}")  # fmt: skip
    fingerprints = {name: Corpus(out / name).fingerprint for name in (TRAINING, HELD)}
    write_meta(out, "Carve", {"source": corpus.fingerprint, **fingerprints})  # its cache key


def carve_share(n_train: int, fraction: float, max_docs: int) -> float:
    """The share of ``n_train`` training documents a carve holds out: ``fraction``, at most
    ``max_docs / n_train``."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the carve's fraction must lie in (0, 1), got {fraction}")
    if max_docs < 1:
        raise ValueError(f"the carve's max_docs must be >= 1, got {max_docs}")
    return min(fraction, max_docs / n_train) if n_train > 0 else fraction


def held_out(doc_ids: list[str], share: float, seed: int) -> np.ndarray:
    """Whether each doc id is held out: bool (n,). blake2b of the seed and the id, read as a
    number in [0, 1), against ``share``: the same on every machine."""
    key = int(seed).to_bytes(8, "little", signed=True)
    draws = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(d.encode(), digest_size=8, key=key).digest(), "little")
            for d in doc_ids
        ),
        dtype=np.uint64,
        count=len(doc_ids),
    )
    return draws < np.uint64(min(int(share * 2.0**64), 2**64 - 1))


def carve_corpus(
    src: Path, dest: Path, fraction: float, max_docs: int, seed: int, by_group: bool = True
) -> Manifest:
    """Write corpus ``src`` without its held-out training documents to ``dest`` (which appears
    only when complete, :func:`~xmc_core.corpus.subset.write_subset`); returns its manifest. A
    carve that would hold out every training document is refused."""
    corpus = Corpus(src)
    record = _record(corpus, fraction, max_docs, seed, by_group)
    return _write_kept(corpus, dest, *_training_parts(corpus, record), record)


def carved_rows(
    src: Path, fraction: float, max_docs: int, seed: int, by_group: bool = True
) -> pa.Table:
    """The training rows of corpus ``src`` that :func:`carve_corpus` holds out, in order."""
    corpus = Corpus(src)
    parts, held = _training_parts(corpus, _record(corpus, fraction, max_docs, seed, by_group))
    tables = [t.filter(pa.array(h)) for t, h in zip(parts, held, strict=True)]
    return pa.concat_tables(tables) if tables else corpus.schema.empty_table()


def held_rows(
    src: Path, fraction: float, max_docs: int, seed: int, by_group: bool = True
) -> np.ndarray:
    """Whether each training row of corpus ``src``, in order, is held out: bool (n_train,)."""
    corpus = Corpus(src)
    record = _record(corpus, fraction, max_docs, seed, by_group)
    _, held = _training_parts(corpus, record, [_key(record)])  # the key column alone
    return np.concatenate(held) if held else np.zeros(0, dtype=bool)


def _record(
    corpus: Corpus, fraction: float, max_docs: int, seed: int, by_group: bool
) -> dict[str, object]:
    """What a carve of ``corpus`` is: its settings, its share, the source; ``by``: ``group``
    when it holds out whole groups (a grouped corpus and ``by_group``; absent otherwise)."""
    share = carve_share(corpus.manifest.splits["train"].rows, fraction, max_docs)
    by = {"by": "group"} if by_group and corpus.grouped else {}
    return {"fraction": fraction, "max_docs": max_docs, "seed": seed, "share": share, **by,
            "source": str(corpus.path), "source_fingerprint": corpus.fingerprint}  # fmt: skip


def _training_parts(
    corpus: Corpus, record: dict[str, object], columns: list[str] | None = None
) -> tuple[list[pa.Table], list[np.ndarray]]:
    """The training split's partitions (``columns``: None, all) and whether each of their rows
    is held out."""
    parts = [corpus.read_partition(ref, columns) for ref in corpus.partitions("train")]
    share, seed = float(record["share"]), int(record["seed"])  # type: ignore[arg-type]
    return parts, [held_out(t.column(_key(record)).to_pylist(), share, seed) for t in parts]


def _key(record: dict[str, object]) -> str:
    """The column a carve hashes: ``group`` when it holds out whole groups, else ``doc_id``."""
    return "group" if record.get("by") == "group" else "doc_id"


def _write_kept(
    corpus: Corpus, dest: Path, parts: list[pa.Table], held: list[np.ndarray],
    record: dict[str, object],
) -> Manifest:  # fmt: skip
    """The corpus without the held-out training rows (:func:`carve_corpus`)."""
    kept = [t.filter(pa.array(~h)) for t, h in zip(parts, held, strict=True)]
    splits = {"train": kept, "test": [corpus.read_partition(r) for r in corpus.partitions("test")]}
    if not sum(t.num_rows for t in splits["train"]):
        raise ValueError(f"the carve holds out every training document of {corpus.path}")
    source = {**corpus.manifest.source, "calibration_carve": record}
    return write_subset(corpus, dest, splits, source, f"kept {record}")
