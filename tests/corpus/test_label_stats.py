"""Label-frequency statistics of a split, on a dataset small enough to count by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from xmc_core.corpus import Corpus, DatasetWriter
from xmc_core.corpus import label_stats as stats_module
from xmc_core.corpus.label_stats import label_stats

# label "h" in 120 docs (> 100), "m" in 30 (21-100), "s" in 7 (6-20), "u" in 1;
# 120 docs: doc i carries h, plus m when i < 30, s when i < 7, u when i == 0
TRAIN = [["h", *(["m"] if i < 30 else []), *(["s"] if i < 7 else []), *(["u"] if i == 0 else [])]
         for i in range(120)]  # fmt: skip


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    # 25 rows a group: the train split is 5 partitions
    with DatasetWriter(tmp_path / "ds", kind="text", source={"t": 1}, rows_per_group=25) as ds:
        for split, rows in (("train", TRAIN), ("test", [["h"]])):
            writer = ds.split(split)
            for i, labels in enumerate(rows):
                writer.add(f"{split}-{i}", "some text", labels, "f", i + 1)
            ds.close_split(split, "f")
    return tmp_path / "ds"


@pytest.mark.parametrize("merge_every", [1, 16])
def test_counts_by_hand(dataset: Path, merge_every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_module, "_MERGE_EVERY", merge_every)
    assert len(Corpus(dataset).partitions("train")) == 5
    s = label_stats(Corpus(dataset))
    assert (s.n_docs, s.n_labels, s.assignments) == (120, 4, 158)  # 120 + 30 + 7 + 1
    assert s.docs_per_label == {"min": 1.0, "median": 18.5, "mean": 39.5, "max": 120.0}
    assert s.labels_per_doc == {"mean": pytest.approx(158 / 120), "max": 4.0}
    assert s.buckets == {"1": 1, "2-5": 0, "6-20": 1, "21-100": 1, ">100": 1}
    assert s.top_labels_counted == 1 and s.top_share == pytest.approx(120 / 158)
    assert s.top == [("h", 120), ("m", 30), ("s", 7), ("u", 1)]
    assert label_stats(Corpus(dataset), "test").top == [("h", 1)]
