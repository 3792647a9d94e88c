"""The contract between DatasetWriter (through the importers) and Corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus, PartitionRef, partition_fingerprint
from xmc_core.corpus.schema import Policies
from xmc_core.corpus.writer import DatasetWriter
from xmc_core.errors import InputError

TEXTS = ["alpha beta", "gamma", "delta epsilon", "zeta", "eta theta"]
LABELS = ["a,b", "b", "c", "a", "b,c"]


def make_src(tmp_path: Path, test_texts: str = "x\ny\n", test_labels: str = "a\nnew1,b\n") -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "train_texts.txt").write_text("\n".join(TEXTS) + "\n")
    (src / "train_labels.txt").write_text("\n".join(LABELS) + "\n")
    (src / "test_texts.txt").write_text(test_texts)
    (src / "test_labels.txt").write_text(test_labels)
    return src


def leftovers(parent: Path) -> list[str]:
    """Hidden temporary folders the atomic writer may have left in ``parent``."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_writer_round_trip_text_and_bow(tmp_path: Path) -> None:
    feats = (np.array([3, 0], dtype=np.int32), np.array([0.5, 2.0], dtype=np.float32))
    with DatasetWriter(tmp_path / "bow", kind="bow", source={"t": 1}, n_features=4) as ds:
        ds.split("train").add("d1", None, ["x", "x", " y "], "f", 1, features=feats)
        ds.close_split("train", "f")
        ds.split("test").add("t1", None, ["y"], "g", 1, features=feats)
        ds.close_split("test", "g")
    corpus = Corpus(tmp_path / "bow")
    row = corpus.read_split("train").to_pylist()[0]
    assert row == {
        "doc_id": "d1",
        "text": None,
        "labels": ["x", "y"],
        "feature_ids": [3, 0],
        "feature_values": [0.5, 2.0],
    }
    assert corpus.manifest.splits["train"].duplicate_labels_removed == 1
    assert corpus.fingerprint == ds.manifest.fingerprint


def test_row_groups_are_partitions(tmp_path: Path) -> None:
    ingest("lines", make_src(tmp_path), tmp_path / "ds", IngestOptions(rows_per_group=2))
    corpus = Corpus(tmp_path / "ds")
    parts = corpus.partitions("train")
    assert [(p.row_group, p.rows) for p in parts] == [(0, 2), (1, 2), (2, 1)]
    texts = [t for p in parts for t in corpus.read_partition(p, ["text"]).column(0).to_pylist()]
    assert texts == TEXTS
    assert corpus.read_partition(parts[1]).schema == corpus.schema


def test_partition_fingerprint_follows_rows_not_place(tmp_path: Path) -> None:
    """Equal rows in another corpus folder and row-group position: equal fingerprints."""
    ingest("lines", make_src(tmp_path), tmp_path / "ds", IngestOptions(rows_per_group=2))
    parts = Corpus(tmp_path / "ds").partitions("train")
    digests = [partition_fingerprint(p) for p in parts]
    assert len(set(digests)) == 3
    table = pq.read_table(tmp_path / "ds" / "train.parquet")
    moved = tmp_path / "moved.parquet"
    swapped = pa.concat_tables([table.slice(2, 2), table.slice(0, 2)])
    pq.write_table(swapped, moved, row_group_size=2)
    refs = [PartitionRef("train", str(moved), g, 2) for g in (0, 1)]
    assert [partition_fingerprint(r) for r in refs] == [digests[1], digests[0]]


@pytest.mark.parametrize("rows_per_group", [1, 2, 3, 10_000])
def test_manifest_stable_across_rows_per_group(tmp_path: Path, rows_per_group: int) -> None:
    src = make_src(tmp_path)
    ref = ingest("lines", src, tmp_path / "ref", IngestOptions(rows_per_group=5))
    got = ingest("lines", src, tmp_path / "ds", IngestOptions(rows_per_group=rows_per_group))
    assert got.fingerprint == ref.fingerprint
    assert got.splits == ref.splits and got.n_labels == ref.n_labels
    assert len(Corpus(tmp_path / "ds").partitions("train")) == -(-len(TEXTS) // rows_per_group)


def test_fingerprint_follows_content(tmp_path: Path) -> None:
    ref = ingest("lines", make_src(tmp_path), tmp_path / "a")
    other = ingest("lines", make_src(tmp_path, test_texts="x\nY\n"), tmp_path / "b")
    assert other.fingerprint != ref.fingerprint


def test_multi_file_split_folder_is_readable(tmp_path: Path) -> None:
    ingest("lines", make_src(tmp_path), tmp_path / "ds", IngestOptions(rows_per_group=2))
    whole = Corpus(tmp_path / "ds").read_split("train")
    shutil.copytree(tmp_path / "ds", tmp_path / "parts")
    folder = tmp_path / "parts" / "train.parquet"
    folder.unlink()
    (folder / "sub").mkdir(parents=True)
    pq.write_table(whole.slice(0, 3), folder / "part-000.parquet", row_group_size=2)
    pq.write_table(whole.slice(3), folder / "sub" / "part-001.parquet")
    (folder / ".hidden.parquet").write_text("not parquet")
    corpus = Corpus(tmp_path / "parts")
    parts = corpus.partitions("train")
    assert [(Path(p.file).name, p.rows) for p in parts] == [
        ("part-000.parquet", 2),
        ("part-000.parquet", 1),
        ("part-001.parquet", 2),
    ]
    assert corpus.read_split("train").equals(whole)


def test_failed_ingest_leaves_no_dest_and_no_temp(tmp_path: Path) -> None:
    src = make_src(tmp_path, test_labels="a\nb,,c\n")  # the error comes after train was written
    with pytest.raises(InputError, match="row 2"):
        ingest("lines", src, tmp_path / "out" / "ds")
    assert not (tmp_path / "out" / "ds").exists()
    assert leftovers(tmp_path / "out") == []


def test_failed_overwrite_keeps_old_dataset(tmp_path: Path) -> None:
    good = ingest("lines", make_src(tmp_path), tmp_path / "ds")
    (tmp_path / "src" / "test_labels.txt").write_text("a\n\n")
    with pytest.raises(InputError, match="no label"):
        ingest("lines", tmp_path / "src", tmp_path / "ds", IngestOptions(overwrite=True))
    assert Corpus(tmp_path / "ds").fingerprint == good.fingerprint
    assert leftovers(tmp_path) == []


def test_unseen_test_labels_reported_not_fatal(tmp_path: Path) -> None:
    src = make_src(tmp_path, test_texts="x\ny\nz\n", test_labels="a\nnew1,b\nnew2,new1\n")
    manifest = ingest("lines", src, tmp_path / "ds")
    assert manifest.n_labels == 3 and manifest.n_labels_total == 5
    assert manifest.unseen_test_labels == 2 and manifest.unseen_test_assignments == 3
    assert manifest.unseen_test_examples == ["new1", "new2"]
    saved = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert saved["unseen_test_labels"] == 2


def test_drop_policies_report_counts(tmp_path: Path) -> None:
    src = make_src(tmp_path, test_texts="x\n \ny\nz\n", test_labels="a\nb\n\nc\n")
    options = IngestOptions(policies=Policies(on_empty="drop", on_unlabeled="drop"))
    manifest = ingest("lines", src, tmp_path / "ds", options)
    stats = manifest.splits["test"]
    assert (stats.rows, stats.dropped_empty, stats.dropped_unlabeled) == (2, 1, 1)
    assert manifest.policies == options.policies
    ids = Corpus(tmp_path / "ds").read_split("test").column("doc_id").to_pylist()
    assert ids == ["test-00000001", "test-00000004"]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    ingest("lines", make_src(tmp_path), tmp_path / "ds")
    return tmp_path / "ds"


def test_reader_missing_column(dataset: Path) -> None:
    table = pq.read_table(dataset / "train.parquet").drop_columns(["labels"])
    pq.write_table(table, dataset / "train.parquet")
    with pytest.raises(InputError, match="missing column 'labels'") as info:
        Corpus(dataset)
    assert "train.parquet" in str(info.value)


def test_reader_wrong_type(dataset: Path) -> None:
    table = pq.read_table(dataset / "train.parquet")
    table = table.set_column(2, "labels", pa.array(["a"] * table.num_rows))
    pq.write_table(table, dataset / "train.parquet")
    with pytest.raises(InputError, match="column 'labels' has type string") as info:
        Corpus(dataset)
    assert "train.parquet" in str(info.value)


def test_reader_missing_manifest_and_split(dataset: Path) -> None:
    (dataset / "test.parquet").unlink()
    with pytest.raises(InputError, match="test split is missing"):
        Corpus(dataset)
    (dataset / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"is not a dataset folder \(no manifest\.json\)"):
        Corpus(dataset)
    with pytest.raises(InputError, match=r"no dataset at .*nowhere \(no such folder\)"):
        Corpus(dataset.parent / "nowhere")


def test_reader_wrong_format_version_and_bad_json(dataset: Path) -> None:
    path = dataset / "manifest.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(InputError, match="format version 99") as info:
        Corpus(dataset)
    assert "manifest.json" in str(info.value)
    path.write_text("{not json")
    with pytest.raises(InputError, match=r"manifest\.json is invalid"):
        Corpus(dataset)


def test_writer_reports_missing_split(tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="never written"),
        DatasetWriter(tmp_path / "ds", kind="text", source={}) as ds,
    ):
        ds.split("train").add("d", "text", ["a"], "f", 1)
        ds.close_split("train", "f")
    assert list(tmp_path.iterdir()) == []
