"""A dataset folder of rows taken from another, written in bulk.

The rows were checked when their corpus was written, so they are not checked again: each table
is written as one row group (a source partition stays one partition), the statistics come from
Arrow's kernels, the label texts file is copied. The fingerprint is not a hash of the rows (that
would read them one by one): it is derived from the source's fingerprint and ``tag``, the
description of which rows were taken, which determines them.
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from xmc_core.corpus.lineage import lineage_of
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import SPLITS, Manifest, SplitStats
from xmc_core.storage.atomic import atomic_dir, write_json

LABELS_FILE = "labels.parquet"


def write_subset(
    src: Corpus, dest: Path, splits: dict[str, list[pa.Table]], source: dict[str, object],
    tag: str,
) -> Manifest:  # fmt: skip
    """Write ``splits`` (each split's tables of ``src``'s schema, in order) as the dataset
    folder ``dest`` (which appears only when complete), with ``src``'s kind, policies, label
    texts and lineage; ``source``: the manifest's ``source``. Returns its manifest. A split
    without a row is refused (a dataset folder holds both)."""
    for split in SPLITS:
        if not sum(t.num_rows for t in splits[split]):
            raise ValueError(f"no {split} document left of {src.path}")
    counts: dict[str, Counter[str]] = {}
    stats: dict[str, SplitStats] = {}
    with atomic_dir(dest) as tmp:
        for split in SPLITS:
            counts[split], stats[split] = _write_split(tmp / f"{split}.parquet", src, splits[split])
            stats[split].files = [f"{split} split of {src.path}"]
        if (src.path / LABELS_FILE).is_file():
            shutil.copyfile(src.path / LABELS_FILE, tmp / LABELS_FILE)
        manifest = _manifest(src, counts, stats, source, tag)
        write_json(tmp / "manifest.json", manifest.model_dump(mode="json"))
    return manifest


def _write_split(
    path: Path, src: Corpus, tables: list[pa.Table]
) -> tuple[Counter[str], SplitStats]:
    """One split's file, a row group per non-empty table; its label counts and statistics."""
    counts: Counter[str] = Counter()
    rows = assignments = 0
    with pq.ParquetWriter(path, src.schema, compression="zstd") as writer:
        for table in tables:
            if not table.num_rows:
                continue
            writer.write_table(table.cast(src.schema), row_group_size=table.num_rows)
            labels = pc.list_flatten(table.column("labels"))
            for item in pc.value_counts(labels).to_pylist():
                counts[item["values"]] += item["counts"]
            rows += table.num_rows
            assignments += len(labels)
    stats = SplitStats(rows=rows, label_assignments=assignments, distinct_labels=len(counts))
    return counts, stats


def _manifest(
    src: Corpus, counts: dict[str, Counter[str]], stats: dict[str, SplitStats],
    source: dict[str, object], tag: str,
) -> Manifest:  # fmt: skip
    old = src.manifest
    train, test = counts["train"], counts["test"]
    unseen = sorted(set(test) - set(train))
    fingerprint = hashlib.sha256(f"{old.fingerprint}\0{tag}".encode()).hexdigest()
    return Manifest(
        kind=old.kind, n_features=old.n_features, splits=stats, n_labels=len(train),
        n_labels_total=len(set(train) | set(test)), unseen_test_labels=len(unseen),
        unseen_test_assignments=sum(test[label] for label in unseen),
        unseen_test_examples=unseen[:20], has_label_texts=old.has_label_texts,
        fingerprint=fingerprint, source=source, policies=old.policies,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"), lineage=lineage_of(src.path),
    )  # fmt: skip
