"""Streaming, validating, atomic writer of dataset folders.

Every importer feeds records through :class:`DatasetWriter`, so the checks that are the same for
every format live here once: empty texts, documents without labels, duplicate doc ids, empty
label names, strings that are not Unicode text (lone surrogates), and test labels never seen in
train. Error messages quote offending values in part (:func:`brief`). The folder appears only
when it is complete.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xmc_core.config import DEFAULT_ROWS_PER_GROUP
from xmc_core.corpus.lineage import lineage_of, started_at
from xmc_core.corpus.schema import (
    LABELS_SCHEMA,
    SPLITS,
    Lineage,
    Manifest,
    Policies,
    SplitStats,
    corpus_schema,
)
from xmc_core.corpus.values import brief, utf8
from xmc_core.errors import InputError
from xmc_core.storage.atomic import atomic_dir, write_json
from xmc_core.storage.paths import require_writable
from xmc_core.wording import counted

log = logging.getLogger(__name__)


def _hash_fields(h: hashlib._Hash, fields: list[bytes]) -> None:
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
    ) -> None:
        self.path = path
        self.kind = kind
        self.policies = policies
        self.rows_per_group = rows_per_group
        self.stats = SplitStats()
        self.label_counts: Counter[str] = Counter()
        self.hash = hashlib.sha256()
        self._schema = corpus_schema(kind)
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
    ) -> bool:
        """Validate and buffer one document; returns False if a policy dropped it.

        ``source``/``row`` name where the record came from, for error messages. ``features`` is
        ``(ids int32, values float32)`` for bag-of-words corpora.
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
        self._buffer(doc_id, text, labels, features, source, row)
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
    ) -> None:
        fields = [
            utf8(doc_id, "doc id", source, row),
            b"\x00" if text is None else b"\x01" + utf8(text, "text", source, row),
        ]
        fields += [utf8(label, "label", source, row) for label in labels]
        self._buf["doc_id"].append(doc_id)
        self._buf["text"].append(text if self.kind == "text" else None)
        self._buf["labels"].append(labels)
        if features is not None:
            ids = np.ascontiguousarray(features[0], dtype=np.int32)
            vals = np.ascontiguousarray(features[1], dtype=np.float32)
            self._buf["feature_ids"].append(ids)
            self._buf["feature_values"].append(vals)
            fields += [ids.tobytes(), vals.tobytes()]
        _hash_fields(self.hash, fields)
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


class DatasetWriter:
    """Context manager that writes a dataset folder atomically.

    Usage::

        with DatasetWriter(dest, kind="text", source={...}) as ds:
            train = ds.split("train")
            for i, (text, labels) in enumerate(rows, 1):
                train.add(f"train-{i}", text, labels, "train_texts.txt", i)
            ds.close_split("train", "train_texts.txt")
            ...  # then "test"

    ``lineage`` (:mod:`xmc_core.corpus.lineage`): the ``Lineage`` the dataset continues, or the
    name of a lineage it starts; None: the lineage of the dataset folder it overwrites, else a
    lineage named after ``dest``.
    """

    def __init__(
        self,
        dest: str | Path,
        kind: Literal["text", "bow"],
        source: dict[str, object],
        policies: Policies | None = None,
        n_features: int | None = None,
        rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
        overwrite: bool = False,
        lineage: Lineage | str | None = None,
    ) -> None:
        self.dest = Path(dest)
        self.lineage = lineage
        self.kind = kind
        self.source = source
        self.policies = policies or Policies()
        self.n_features = n_features
        self.rows_per_group = rows_per_group
        self.overwrite = overwrite
        self.manifest: Manifest | None = None
        self._writers: dict[str, SplitWriter] = {}
        self._label_texts: dict[str, str | None] | None = None
        self._ctx = atomic_dir(self.dest, overwrite=overwrite)
        self._tmp: Path | None = None

    def __enter__(self) -> DatasetWriter:
        require_writable(self.dest, folder=True)
        if self.dest.exists() and not self.overwrite:
            raise InputError(
                self.dest, "destination already exists", "choose a new folder or pass --overwrite"
            )
        self._tmp = self._ctx.__enter__()
        return self

    def split(self, name: str) -> SplitWriter:
        """Open the writer of split ``name``; train must be written (and closed) before test."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")
        if name == "test" and "train" not in self._writers:
            raise ValueError("write the train split before the test split")
        assert self._tmp is not None, "use DatasetWriter as a context manager"
        writer = SplitWriter(
            self._tmp / f"{name}.parquet", self.kind, self.policies, self.rows_per_group
        )
        self._writers[name] = writer
        return writer

    def close_split(self, name: str, source: str | Path) -> SplitStats:
        """Finish split ``name``; ``source`` names its input file(s) for messages."""
        writer = self._writers[name]
        writer.stats.files = [str(source)]
        writer.close(source)
        return writer.stats

    def set_label_texts(self, texts: dict[str, str | None]) -> None:
        """Label texts (label -> text or None) to store in ``labels.parquet``."""
        self._label_texts = texts

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc_type is None:
            try:
                self._finish()
            except BaseException as err:
                self._close_writers()
                self._ctx.__exit__(type(err), err, err.__traceback__)
                raise
        else:
            self._close_writers()
        return self._ctx.__exit__(exc_type, exc, tb)

    def _close_writers(self) -> None:
        for w in self._writers.values():
            w.abort()

    def _finish(self) -> None:
        missing = [s for s in SPLITS if s not in self._writers]
        if missing:
            raise ValueError(f"splits never written: {missing}")
        assert self._tmp is not None
        train = self._writers["train"].label_counts
        test = self._writers["test"].label_counts
        unseen = sorted(set(test) - set(train))
        digest = hashlib.sha256()
        _hash_fields(digest, [self.kind.encode(), str(self.n_features).encode()])
        for name in SPLITS:
            _hash_fields(digest, [name.encode(), self._writers[name].hash.digest()])
        if self._label_texts is not None:
            rows = self._write_label_texts(self._tmp / "labels.parquet", train, test)
            _hash_fields(digest, [b"labels", rows])
        self.manifest = Manifest(
            kind=self.kind,
            n_features=self.n_features,
            splits={s: self._writers[s].stats for s in SPLITS},
            n_labels=len(train),
            n_labels_total=len(set(train) | set(test)),
            unseen_test_labels=len(unseen),
            unseen_test_assignments=sum(test[lab] for lab in unseen),
            unseen_test_examples=unseen[:20],
            has_label_texts=self._label_texts is not None,
            fingerprint=digest.hexdigest(),
            source=self.source,
            policies=self.policies,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            lineage=self._lineage(digest.hexdigest()),
        )
        write_json(self._tmp / "manifest.json", self.manifest.model_dump(mode="json"))

    def _lineage(self, fingerprint: str) -> Lineage:
        """The new dataset's lineage (see the class docstring)."""
        if isinstance(self.lineage, Lineage):
            return self.lineage
        if self.lineage is None and self.overwrite and (self.dest / "manifest.json").is_file():
            try:
                return lineage_of(self.dest)  # the same dataset, kept current in place
            except (InputError, OSError):
                pass  # not a readable dataset: the new one starts its own lineage
        return started_at(self.lineage or self.dest.resolve().name, fingerprint)

    def _write_label_texts(self, path: Path, train: Counter[str], test: Counter[str]) -> bytes:
        """Write ``labels.parquet``; returns the digest of its rows (each label and its text,
        ``""`` for none)."""
        assert self._label_texts is not None
        names = sorted(set(self._label_texts) | set(train) | set(test))
        texts = [_clean_label_text(self._label_texts.get(n)) for n in names]
        table = pa.Table.from_pydict({"label": names, "text": texts}, schema=LABELS_SCHEMA)
        pq.write_table(table, path, compression="zstd")
        h = hashlib.sha256()
        for name, text in zip(names, texts, strict=True):
            _hash_fields(h, [name.encode(), (text or "").encode()])
        return h.digest()


def _clean_label_text(text: str | float | None) -> str | None:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    text = str(text).strip()
    return text or None
