"""Rows of one corpus written into another: Arrow tables fed to a split writer, in row groups
the caller cuts, and its label texts (the intake's merge, the calibration carve)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from xmc_core.corpus.split_writer import SplitWriter


class RowAppender:
    """Feeds Arrow rows into a split writer; cuts a row group every ``group_rows`` rows."""

    def __init__(self, writer: SplitWriter, group_rows: int | None, id_prefix: str = "") -> None:
        self.writer = writer
        self.group_rows = group_rows
        self.id_prefix = id_prefix
        self._pending = 0

    def add_table(self, table: pa.Table, source: str) -> None:
        """Add every row of ``table`` (corpus schema); ``source`` names it in error messages."""
        bow = self.writer.kind == "bow"
        for row_no, row in enumerate(table.to_pylist(), 1):
            features = row_features(row) if bow else None
            doc_id = self.id_prefix + row["doc_id"]
            group = row.get("group")  # absent from an ungrouped corpus's rows
            self.writer.add(doc_id, row["text"], row["labels"], source, row_no, features, group)
            self._pending += 1
            if self.group_rows is not None and self._pending >= self.group_rows:
                self.end_group()

    def end_group(self) -> None:
        """Write the buffered rows as one row group (nothing if none is buffered)."""
        self.writer.flush()
        self._pending = 0


def row_features(row: dict) -> tuple[np.ndarray, np.ndarray]:
    """A bag-of-words row's feature ids (int32) and values (float32)."""
    return (
        np.asarray(row["feature_ids"], dtype=np.int32),
        np.asarray(row["feature_values"], dtype=np.float32),
    )


def label_text_dict(table: pa.Table) -> dict[str, str | None]:
    """``labels.parquet`` as label -> text (None: no text), as ``DatasetWriter.set_label_texts``
    takes it."""
    return dict(zip(table["label"].to_pylist(), table["text"].to_pylist(), strict=True))
