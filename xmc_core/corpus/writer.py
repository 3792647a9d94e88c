"""Streaming, validating, atomic writer of dataset folders.

Every importer feeds records through :class:`DatasetWriter`, so the checks that are the same for
every format live here once (a split's rows in :mod:`~xmc_core.corpus.split_writer`): empty
texts, documents without labels, duplicate doc ids, empty label names, strings that are not
Unicode text (lone surrogates), and test labels never seen in train. Error messages quote
offending values in part (:func:`~xmc_core.corpus.values.brief`). The folder appears only when
it is complete.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal

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
)
from xmc_core.corpus.split_writer import SplitWriter, hash_fields
from xmc_core.errors import InputError
from xmc_core.storage.atomic import atomic_dir, write_json
from xmc_core.storage.paths import require_writable


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
    lineage named after ``dest``. ``grouped``: each document carries a group (``add``'s
    ``group``; :mod:`xmc_core.corpus.schema`).
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
        grouped: bool = False,
    ) -> None:
        self.dest = Path(dest)
        self.grouped = grouped
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
            self._tmp / f"{name}.parquet", self.kind, self.policies, self.rows_per_group,
            self.grouped,
        )  # fmt: skip
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
        hash_fields(digest, [self.kind.encode(), str(self.n_features).encode()])
        for name in SPLITS:
            hash_fields(digest, [name.encode(), self._writers[name].hash.digest()])
        if self._label_texts is not None:
            rows = self._write_label_texts(self._tmp / "labels.parquet", train, test)
            hash_fields(digest, [b"labels", rows])
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
            hash_fields(h, [name.encode(), (text or "").encode()])
        return h.digest()


def _clean_label_text(text: str | float | None) -> str | None:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    text = str(text).strip()
    return text or None
