"""Assertions and inputs shared by the importer, intake and retrain tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xmc_core.errors import InputError


def check_error(excinfo: pytest.ExceptionInfo, name: str, row: int | None) -> str:
    """Assert an InputError naming file ``name`` and ``row``; return its message."""
    err = excinfo.value
    assert type(err) is InputError
    msg = str(err)
    assert Path(err.path).name == name and name in msg and "fix:" in msg
    if row is not None:
        assert err.row == row and f"row {row}" in msg
    return msg


def parquet_drop(landing: Path, name: str, train: pa.Table, test: pa.Table) -> Path:
    """A ``parquet`` corpus drop: written under a hidden name, then renamed into ``landing``
    (how users make a drop arrive atomically)."""
    tmp = landing / f".{name}.tmp"
    tmp.mkdir(parents=True)
    pq.write_table(train, tmp / "train.parquet")
    pq.write_table(test, tmp / "test.parquet")
    return tmp.rename(landing / name)


def held_out_dataset(full: Path, root: Path, held_out: int) -> tuple[Path, list[str]]:
    """The dataset ``full`` ingested again into ``root/held-out`` without the training documents
    of its ``held_out`` rarest test labels (they keep their texts and test documents: labels
    seen for the first time); returns its folder and those labels."""
    import json

    import pyarrow.compute as pc

    from xmc_core.corpus import Corpus
    from xmc_core.corpus.importers import ingest

    train = pq.read_table(full / "train.parquet")
    test = pq.read_table(full / "test.parquet")
    counts = pc.value_counts(pc.list_flatten(test["labels"])).to_pylist()
    held = sorted(c["values"] for c in counts)[:held_out]
    keep = [not set(labels) & set(held) for labels in train["labels"].to_pylist()]
    drop = parquet_drop(root / "drops", "held", train.filter(pa.array(keep)), test)
    texts = Corpus(full).label_texts()
    assert texts is not None
    (drop / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in texts.to_pylist()))
    ingest("parquet", drop, root / "held-out")
    return root / "held-out", held
