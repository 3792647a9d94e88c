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
