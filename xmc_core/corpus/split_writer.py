"""One split of a dataset folder being written: its rows checked and streamed to parquet in row
groups, its statistics and content hash (:class:`SplitWriter`). The folder, its manifest and
the checks across splits: :class:`~xmc_core.corpus.writer.DatasetWriter`, which hands these
out (``DatasetWriter.split``)."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xmc_core.corpus.schema import (
    Policies,
    SplitStats,
    corpus_schema,
)
from xmc_core.corpus.values import brief, utf8
from xmc_core.errors import InputError
from xmc_core.wording import counted

log = logging.getLogger(__name__)


def hash_fields(h: hashlib._Hash, fields: list[bytes]) -> None:
    """Feed a record into ``h`` unambiguously: field count, then each field length-prefixed."""
    h.update(len(fields).to_bytes(8, "little"))
    for field in fields:
        h.update(len(field).to_bytes(8, "little"))
        h.update(field)


class SplitWriter:
    """Writes one split (``train`` or ``test``) row group by row group."""

    def __init__(
        self,
        path: Path,
        kind: Literal["text", "bow"],
        policies: Policies,
        rows_per_group: int,
        grouped: bool = False,
    ) -> None:
        self.path = path
        self.grouped = grouped
        self.kind = kind
        self.policies = policies
        self.rows_per_group = rows_per_group
        self.stats = SplitStats()
        self.label_counts: Counter[str] = Counter()
        self.hash = hashlib.sha256()
        self._schema = corpus_schema(kind, grouped)
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._closed = False
        self._start = time.perf_counter()
        self._seen_ids: dict[str, tuple[str, int]] = {}
        self._buf: dict[str, list] = {name: [] for name in self._schema.names}

    def add(
        self,
        doc_id: str,
        text: str | None,
        labels: Sequence[str],
        source: str | Path,
        row: int,
        features: tuple[np.ndarray, np.ndarray] | None = None,
        group: str | None = None,
    ) -> bool:
        """Validate and buffer one document; returns False if a policy dropped it.

        ``source``/``row`` name where the record came from, for error messages. ``features`` is
        ``(ids int32, values float32)`` for bag-of-words corpora. ``group``: the document's
        group in a grouped corpus (None: a group of its own, its doc id); ignored otherwise.
        """
        if (features is not None) != (self.kind == "bow"):
            wanted = "(ids, values)" if self.kind == "bow" else "None"
            raise ValueError(f"a {self.kind} corpus takes features={wanted}")
        if self._is_empty(text, features, source, row):
            return False
        labels = self._clean_labels(labels, source, row)
        if not labels:
            if self.policies.on_unlabeled == "error":
                raise InputError(
                    source,
                    "document has no label",
                    "give it at least one label, or ingest with --on-unlabeled drop "
                    "(drop and report) or --on-unlabeled keep",
                    row,
                )
            if self.policies.on_unlabeled == "drop":
                self.stats.dropped_unlabeled += 1
                return False
            self.stats.kept_unlabeled += 1
        self._check_id(doc_id, source, row)
        if self.grouped:
            group = doc_id if group is None else group
            if not isinstance(group, str) or not group.strip():
                raise InputError(source, f"group {brief(group)} is empty",
                                 "give every document a group, or none (its own)", row)  # fmt: skip
        self._buffer(doc_id, text, labels, features, source, row, group if self.grouped else None)
        return True

    def _is_empty(
        self,
        text: str | None,
        features: tuple[np.ndarray, np.ndarray] | None,
        source: str | Path,
        row: int,
    ) -> bool:
        empty = (len(features[0]) == 0) if self.kind == "bow" else (not text or text.isspace())
        if not empty:
            return False
        if self.policies.on_empty == "drop":
            self.stats.dropped_empty += 1
            return True
        what = (
            "document has no features" if self.kind == "bow" else "text is empty or whitespace-only"
        )
        raise InputError(
            source, what, "remove or fill the document, or ingest with --on-empty drop", row
        )

    def _clean_labels(self, labels: Sequence[str], source: str | Path, row: int) -> list[str]:
        out: list[str] = []
        seen: set[str] = set()
        for raw in labels:
            if not isinstance(raw, str):
                raise InputError(
                    source, f"label {brief(raw)} is not a string", "write labels as strings", row
                )
            label = raw.strip()
            if not label:
                raise InputError(
                    source,
                    f"empty label name in {brief(list(labels), 200)}",
                    "remove the stray separator (e.g. 'a,,b' or a trailing comma)",
                    row,
                )
            if label in seen:
                self.stats.duplicate_labels_removed += 1
                continue
            seen.add(label)
            out.append(label)
        return out

    def _check_id(self, doc_id: str, source: str | Path, row: int) -> None:
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise InputError(
                source, f"doc id {brief(doc_id)} is empty", "give every document an id", row
            )
        first = self._seen_ids.get(doc_id)
        if first is not None:
            raise InputError(
                source,
                f"duplicate doc id {brief(doc_id)} (first seen in {first[0]} row {first[1]})",
                "make doc ids unique within the split",
                row,
            )
        self._seen_ids[doc_id] = (str(source), row)

    def _buffer(
        self,
        doc_id: str,
        text: str | None,
        labels: list[str],
        features: tuple[np.ndarray, np.ndarray] | None,
        source: str | Path,
        row: int,
        group: str | None,
    ) -> None:
        if group is not None:  # its own record first: a corpus without groups hashes as before
            hash_fields(self.hash, [b"group", utf8(group, "group", source, row)])
        fields = [
            utf8(doc_id, "doc id", source, row),
            b"\x00" if text is None else b"\x01" + utf8(text, "text", source, row),
        ]
        fields += [utf8(label, "label", source, row) for label in labels]
        self._buf["doc_id"].append(doc_id)
        self._buf["text"].append(text if self.kind == "text" else None)
        self._buf["labels"].append(labels)
        if group is not None:
            self._buf["group"].append(group)
        if features is not None:
            ids = np.ascontiguousarray(features[0], dtype=np.int32)
            vals = np.ascontiguousarray(features[1], dtype=np.float32)
            self._buf["feature_ids"].append(ids)
            self._buf["feature_values"].append(vals)
            fields += [ids.tobytes(), vals.tobytes()]
        hash_fields(self.hash, fields)
        self.stats.rows += 1
        self.stats.label_assignments += len(labels)
        self.label_counts.update(labels)
        if len(self._buf["doc_id"]) >= self.rows_per_group:
            self.flush()

    def flush(self) -> None:
        """Write buffered rows as one row group."""
        if not self._buf["doc_id"]:
            return
        table = pa.Table.from_pydict(self._buf, schema=self._schema)
        self._writer.write_table(table, row_group_size=len(table))
        secs = time.perf_counter() - self._start
        log.info(
            "%s: %s written (%.0f docs/s)",
            self.path.stem,
            counted(self.stats.rows, "document"),
            self.stats.rows / max(secs, 1e-9),
        )
        self._buf = {name: [] for name in self._schema.names}

    def abort(self) -> None:
        """Close the Parquet file without flushing (the folder is about to be discarded)."""
        if not self._closed:
            self._writer.close()
            self._closed = True

    def close(self, source: str | Path) -> None:
        """Flush and close; an empty split is an error."""
        self.flush()
        self._writer.close()
        self._closed = True
        self.stats.distinct_labels = len(self.label_counts)
        dropped = self.stats.dropped_empty + self.stats.dropped_unlabeled
        if self.stats.rows == 0 and dropped:
            raise InputError(
                source,
                f"no documents left in this split: the policies dropped all "
                f"{counted(dropped, 'document')} (empty text or no label)",
                "check the input file",
            )
        if self.stats.rows == 0:
            raise InputError(
                source, "the file holds no documents", "write the split's documents into it"
            )
