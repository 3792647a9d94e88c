"""Label-frequency statistics of one split of a dataset: the head/tail picture.

Computed by streaming the ``labels`` column only, one partition (row group) at a time; the
per-label counts are merged as Arrow tables, so memory grows with the number of distinct labels,
not with the number of documents.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from xmc_core.corpus.reader import Corpus

BUCKETS: dict[str, tuple[int, int | None]] = {
    "1": (1, 1), "2-5": (2, 5), "6-20": (6, 20), "21-100": (21, 100), ">100": (101, None)
}  # fmt: skip
"""Ranges of documents per label (inclusive; None: no upper bound) counted in ``buckets``."""
TOP_SHARE = 0.01
"""Fraction of the labels (the most frequent, at least one) whose share of assignments is given."""
N_TOP = 5
_MERGE_EVERY = 16  # partitions whose counts are held before they are merged


class LabelStats(BaseModel):
    """Label frequencies of one split.

    ``docs_per_label``: min, median, mean, max over the labels that occur; ``labels_per_doc``:
    mean and max over every document (a kept unlabeled one counts 0); ``buckets``: how many
    labels have 1, 2-5, 6-20, 21-100, >100 documents (keys ``"1"``, ``"2-5"``, ..., ``">100"``);
    ``top_share``: share of all assignments held by the ``top_labels_counted`` most frequent
    labels (the top 1%); ``top``: the ``N_TOP`` most frequent labels (ties: by name).
    """

    model_config = ConfigDict(frozen=True)

    split: str
    n_docs: int
    n_labels: int
    assignments: int
    docs_per_label: dict[str, float]
    labels_per_doc: dict[str, float]
    buckets: dict[str, int]
    top_labels_counted: int
    top_share: float
    top: list[tuple[str, int]]


def label_stats(corpus: Corpus, split: str = "train") -> LabelStats:
    """:class:`LabelStats` of ``split`` of ``corpus`` (reads its ``labels`` column only)."""
    pending: list[pa.Table] = []
    n_docs = max_per_doc = 0
    for ref in corpus.partitions(split):
        labels = corpus.read_partition(ref, ["labels"]).column("labels").combine_chunks()
        n_docs += len(labels)
        lengths = pc.list_value_length(labels)
        max_per_doc = max(max_per_doc, pc.max(lengths).as_py() or 0)
        counts = pc.value_counts(pc.list_flatten(labels))
        pending.append(pa.table({"label": counts.field(0), "n": counts.field(1)}))
        if len(pending) >= _MERGE_EVERY:
            pending = [_merge(pending)]
    merged = _merge(pending) if pending else pa.table({"label": [], "n": []})
    names = merged.column("label").to_pylist()
    counts = merged.column("n").to_numpy().astype(np.int64)
    return _summarize(split, n_docs, max_per_doc, names, counts)


def _merge(tables: list[pa.Table]) -> pa.Table:
    """One row per label: the sum of its counts in ``tables``."""
    summed = pa.concat_tables(tables).group_by("label").aggregate([("n", "sum")])
    return summed.rename_columns(["label", "n"])


def _summarize(
    split: str, n_docs: int, max_per_doc: int, names: list[str], counts: np.ndarray
) -> LabelStats:
    """The figures of :class:`LabelStats` from per-label document counts (n_labels,)."""
    total = int(counts.sum())
    order = sorted(range(len(names)), key=lambda i: (-int(counts[i]), names[i]))
    n_top = max(1, math.ceil(TOP_SHARE * len(names))) if names else 0
    top_total = int(sum(int(counts[i]) for i in order[:n_top]))
    buckets = {
        name: int(np.count_nonzero((counts >= lo) & ((counts <= hi) if hi else True)))
        for name, (lo, hi) in BUCKETS.items()
    }
    empty = not len(counts)
    return LabelStats(
        split=split,
        n_docs=n_docs,
        n_labels=len(names),
        assignments=total,
        docs_per_label={
            "min": 0.0 if empty else float(counts.min()),
            "median": 0.0 if empty else float(np.median(counts)),
            "mean": 0.0 if empty else float(counts.mean()),
            "max": 0.0 if empty else float(counts.max()),
        },
        labels_per_doc={"mean": total / n_docs if n_docs else 0.0, "max": float(max_per_doc)},
        buckets=buckets,
        top_labels_counted=n_top,
        top_share=top_total / total if total else 0.0,
        top=[(names[i], int(counts[i])) for i in order[:N_TOP]],
    )


def format_label_stats(s: LabelStats) -> str:
    """A few lines for people (figures rounded)."""
    d, p = s.docs_per_label, s.labels_per_doc
    buckets = ", ".join(f"{k}: {v}" for k, v in s.buckets.items())
    top = ", ".join(f"{name} ({n})" for name, n in s.top)
    return "\n".join(
        [
            f"label frequencies ({s.split}, {s.n_docs} docs, {s.n_labels} labels):",
            f"  docs per label: min {d['min']:g}, median {d['median']:g}, "
            f"mean {d['mean']:.2f}, max {d['max']:g}",
            f"  labels per doc: mean {p['mean']:.2f}, max {p['max']:g}",
            f"  labels by {s.split} docs: {buckets}",
            f"  top 1% of labels ({s.top_labels_counted}) hold {100 * s.top_share:.2f}% "
            "of assignments",
            f"  most frequent: {top}",
        ]
    )
