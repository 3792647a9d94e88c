"""Merge dataset folders by doc id, keeping the row groups that did not change.

``merge_corpora(base, drops, dest)`` upserts: the documents of each corpus in ``drops`` replace
the documents with the same doc id in ``base`` and in earlier drops, whichever split they sat in
(a document moves to the split of its latest occurrence, so it never sits in both train and
test). Layout of the result, split by split:

1. the row groups of ``base``, in order. A group none of whose rows is replaced is written again
   with the same rows in the same order, so its partition caches stay valid; a group that lost
   rows is written with the rows that remain (one group, possibly smaller or gone);
2. the new and changed documents, drop after drop in input order, in row groups of
   ``rows_per_group`` rows.

A document whose latest version equals (same split, text, labels and features) the one already
in ``base`` is not a change: its base row stays where it is. Merging drops into a corpus that
already holds them therefore gives back the same content fingerprint, which makes a rerun after
a crash between "merge" and "archive the drops" a no-op. Label texts (``labels.parquet``) are
merged: a later non-empty text wins, an empty one never erases a text.

Every row goes through :class:`~xmc_core.corpus.writer.DatasetWriter` (which validates it,
computes the manifest and fingerprint, and creates the destination atomically), flushed at the
group boundaries above. The merged manifest records the most permissive policies of its inputs
(``error`` < ``drop`` < ``keep``) and in ``source`` the paths and fingerprints of the inputs; its
``dropped_*`` counts are 0, since what each input dropped is in that input's own manifest.

The corpus store that keeps merged corpora: :mod:`~xmc_core.intake.corpus_store`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa

from xmc_core.corpus.appender import RowAppender, label_text_dict, row_features
from xmc_core.corpus.importers.common import manifest_of
from xmc_core.corpus.lineage import grown, lineage_of
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import SPLITS, Lineage, Manifest, Policies
from xmc_core.corpus.split_writer import SplitWriter
from xmc_core.corpus.writer import DatasetWriter
from xmc_core.errors import InputError

_NO_AUTO_FLUSH = 2**62  # the writer never cuts a group by itself: we flush at our boundaries
_PERMISSIVENESS = {"error": 0, "drop": 1, "keep": 2}


@dataclass(frozen=True)
class _Version:
    """The latest version of one doc id among the drops: which drop, which split, what content."""

    drop: int
    split: str
    digest: bytes


def row_digest(row: dict) -> bytes:
    """Content digest of one document row (doc id, text, labels, features), split excluded."""
    h = hashlib.blake2b(digest_size=16)
    parts = [
        row["doc_id"].encode(),
        b"\x00" if row["text"] is None else b"\x01" + row["text"].encode(),
    ]
    parts += [label.encode() for label in row["labels"]]
    if "feature_ids" in row:
        ids, values = row_features(row)
        parts += [ids.tobytes(), values.tobytes()]
    h.update(len(parts).to_bytes(8, "little"))
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def merge_corpora(
    base: Path | None,
    drops: list[Path],
    dest: Path,
    rows_per_group: int,
    lineage: Lineage | str | None = None,
) -> Manifest:
    """Upsert the documents of ``drops`` (in order, later wins) into ``base``; write ``dest``.

    ``base`` None is the ``replace`` mode: the result holds the drops alone. All corpora must be
    of one kind (text, or bag-of-words with the same ``n_features``), else an InputError names
    the first offending drop; so does a drop holding one doc id in both splits. ``dest`` must
    not exist; it appears only when complete. Returns its manifest. ``lineage``: the result's
    (``DatasetWriter``); None: ``base``'s grown by the drops (no base: one named after ``dest``).
    """
    if rows_per_group < 1:
        raise ValueError(f"rows_per_group must be >= 1, got {rows_per_group}")
    if base is None and not drops:
        raise ValueError("nothing to merge: no base corpus and no drop")
    base_corpus = Corpus(base) if base is not None else None
    drop_corpora = [Corpus(p) for p in drops]
    inputs = ([base_corpus] if base_corpus else []) + drop_corpora
    kind, n_features = _common_kind(inputs)
    latest = _latest_versions(drop_corpora)
    if lineage is None and base is not None:
        lineage = grown(lineage_of(base), len(drops))
    with DatasetWriter(
        dest,
        kind=kind,
        source=_source(base_corpus, drop_corpora),
        policies=_most_permissive([c.manifest.policies for c in inputs]),
        n_features=n_features,
        rows_per_group=_NO_AUTO_FLUSH,
        lineage=lineage,
        grouped=any(c.grouped for c in inputs),  # an ungrouped input's documents: one each
    ) as ds:
        for split in SPLITS:
            writer = ds.split(split)
            present = _copy_base(writer, base_corpus, split, latest) if base_corpus else set()
            _append_new(RowAppender(writer, rows_per_group), drop_corpora, split, latest, present)
            ds.close_split(split, f"{split} split of the merged corpora")
        texts = _merged_label_texts(inputs)
        if texts is not None:
            ds.set_label_texts(texts)
    return manifest_of(ds)


def _common_kind(corpora: list[Corpus]) -> tuple[Literal["text", "bow"], int | None]:
    """The kind and n_features all ``corpora`` share; InputError names the first that differs."""
    first = corpora[0]
    for other in corpora[1:]:
        if _describe(other) != _describe(first):
            raise InputError(
                other.path,
                f"is a {_describe(other)}, but {first.path} is a {_describe(first)}",
                "merge only corpora of one kind (and, for bag-of-words, one feature space); "
                "to start over with this corpus, use retrain.mode=replace",
            )
    return first.kind, first.manifest.n_features


def _describe(corpus: Corpus) -> str:
    """The kind of ``corpus`` in words (what must agree for a merge)."""
    if corpus.kind == "bow":
        return f"bag-of-words corpus with {corpus.manifest.n_features} features"
    return "text corpus"


def _latest_versions(drops: list[Corpus]) -> dict[str, _Version]:
    """doc id -> its latest version among ``drops``; a doc id in both splits of a drop fails."""
    latest: dict[str, _Version] = {}
    for index, corpus in enumerate(drops):
        split_of: dict[str, str] = {}
        for split in SPLITS:
            for ref in corpus.partitions(split):
                for row in corpus.read_partition(ref).to_pylist():
                    doc_id = row["doc_id"]
                    other = split_of.setdefault(doc_id, split)
                    if other != split:
                        raise InputError(
                            corpus.path,
                            f"doc id {doc_id!r} is in both the {other} and the {split} split",
                            "keep every document in one split (give it a new id otherwise)",
                        )
                    latest[doc_id] = _Version(index, split, row_digest(row))
    return latest


def _copy_base(
    writer: SplitWriter, base: Corpus, split: str, latest: dict[str, _Version]
) -> set[str]:
    """Write ``base``'s groups of ``split`` minus replaced rows; return the unchanged doc ids.

    A returned doc id's latest version equals its row in ``base``: it is not appended again.
    """
    unchanged: set[str] = set()
    appender = RowAppender(writer, group_rows=None)
    for ref in base.partitions(split):
        table = base.read_partition(ref)
        ids = table.column("doc_id").to_pylist()
        keep = [True] * len(ids)
        for k, doc_id in enumerate(ids):
            version = latest.get(doc_id)
            if version is None:
                continue
            row = table.slice(k, 1).to_pylist()[0]
            if version.split == split and version.digest == row_digest(row):
                unchanged.add(doc_id)
            else:
                keep[k] = False
        kept = table if all(keep) else table.filter(pa.array(keep))
        appender.add_table(kept, f"{ref.file} row group {ref.row_group}")
        appender.end_group()
    return unchanged


def _append_new(
    appender: RowAppender,
    drops: list[Corpus],
    split: str,
    latest: dict[str, _Version],
    unchanged: set[str],
) -> None:
    """Append each drop's winning, changed documents of ``split``, in drop and row order."""
    for index, corpus in enumerate(drops):
        for ref in corpus.partitions(split):
            table = corpus.read_partition(ref)
            ids = table.column("doc_id").to_pylist()
            keep = [
                latest[d].drop == index and latest[d].split == split and d not in unchanged
                for d in ids
            ]
            if any(keep):
                appender.add_table(table.filter(pa.array(keep)), ref.file)
    appender.end_group()


def _merged_label_texts(corpora: list[Corpus]) -> dict[str, str | None] | None:
    """Label texts of all ``corpora``; a later non-empty text wins; None if none has any."""
    merged: dict[str, str | None] | None = None
    for corpus in corpora:
        table = corpus.label_texts()
        if table is None:
            continue
        merged = {} if merged is None else merged
        for label, text in label_text_dict(table).items():
            if text is not None or label not in merged:
                merged[label] = text
    return merged


def _most_permissive(policies: list[Policies]) -> Policies:
    """The most permissive policy of each kind (error < drop < keep) among ``policies``."""
    return Policies(
        on_empty=max((p.on_empty for p in policies), key=_PERMISSIVENESS.__getitem__),
        on_unlabeled=max((p.on_unlabeled for p in policies), key=_PERMISSIVENESS.__getitem__),
    )


def _source(base: Corpus | None, drops: list[Corpus]) -> dict[str, object]:
    return {
        "format": "merge",
        "base": _reference(base) if base is not None else None,
        "drops": [_reference(c) for c in drops],
    }


def _reference(corpus: Corpus) -> dict[str, str]:
    return {"path": str(corpus.path.resolve()), "fingerprint": corpus.fingerprint}


def prefix_doc_ids(src: Path, dest: Path, prefix: str) -> Manifest:
    """Copy corpus ``src`` to ``dest`` with every doc id prefixed by ``prefix``.

    Row groups, label texts, policies and the per-split statistics of ``src`` are kept; the
    manifest's ``source`` gains ``doc_id_prefix``. ``dest`` appears only when complete.
    """
    corpus = Corpus(src)
    old = corpus.manifest
    with DatasetWriter(
        dest,
        kind=old.kind,
        source={**old.source, "doc_id_prefix": prefix},
        policies=old.policies,
        n_features=old.n_features,
        rows_per_group=_NO_AUTO_FLUSH,
        grouped=corpus.grouped,
    ) as ds:
        for split in SPLITS:
            appender = RowAppender(ds.split(split), group_rows=None, id_prefix=prefix)
            for ref in corpus.partitions(split):
                appender.add_table(corpus.read_partition(ref), ref.file)
                appender.end_group()
            stats = ds.close_split(split, f"{split} split of {src}")
            before = old.splits[split]
            stats.files = list(before.files)
            stats.dropped_empty = before.dropped_empty
            stats.dropped_unlabeled = before.dropped_unlabeled
            stats.duplicate_labels_removed = before.duplicate_labels_removed
        texts = corpus.label_texts()
        if texts is not None:
            ds.set_label_texts(label_text_dict(texts))
    return manifest_of(ds)
