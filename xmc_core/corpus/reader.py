"""Open and validate a dataset folder; read it one partition (Parquet row group) at a time."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from xmc_core.corpus.schema import (
    FORMAT_VERSION,
    GROUP_FIELD,
    LABELS_SCHEMA,
    SPLITS,
    Manifest,
    corpus_schema,
)
from xmc_core.errors import InputError
from xmc_core.storage.paths import require_dataset_folder


@dataclass(frozen=True)
class PartitionRef:
    """One partition: a row group of one Parquet file of one split."""

    split: str
    file: str
    row_group: int
    rows: int


def partition_fingerprint(ref: PartitionRef) -> str:
    """sha256 of the content of one partition (its rows, every column), wherever it sits.

    Merged corpora keep unchanged row groups, so the per-partition stages of a retraining run
    are keyed by this rather than by the whole corpus and are reused for unchanged partitions.
    """
    stat = Path(ref.file).stat()
    return _partition_digest(ref.file, ref.row_group, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _partition_digest(file: str, row_group: int, _mtime_ns: int, _size: int) -> str:
    table = pq.ParquetFile(file).read_row_group(row_group).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue()).hexdigest()


class Corpus:
    """A validated dataset folder (see :mod:`xmc_core.corpus.schema`)."""

    @classmethod
    def load(cls, folder: str | Path) -> Corpus:
        """Open the dataset folder ``folder`` (as every saved artifact is opened)."""
        return cls(folder)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.manifest = read_manifest(self.path)
        self.kind = self.manifest.kind
        self._files = {split: self._split_files(split) for split in SPLITS}
        self.grouped = GROUP_FIELD.name in _read_schema(self._files["train"][0]).names
        """Whether every document carries a group (every file has the column, or none)."""
        self.schema = corpus_schema(self.kind, self.grouped)
        for files in self._files.values():
            for f in files:
                self._check_schema(f)

    @property
    def fingerprint(self) -> str:
        """Content fingerprint of the corpus (stable across row-group layouts)."""
        return self.manifest.fingerprint

    def split_fingerprint(self, split: str) -> str:
        """Content fingerprint of one split: its partitions' (:func:`partition_fingerprint`),
        in order. A corpus grown by merging keeps the row groups of a split no drop changed,
        so a held-out split's figures stay valid while its training split grows."""
        digest = hashlib.sha256(f"{self.kind}/{split}".encode())
        for ref in self.partitions(split):
            digest.update(partition_fingerprint(ref).encode())
        return digest.hexdigest()

    def _split_files(self, split: str) -> list[Path]:
        base = self.path / f"{split}.parquet"
        if base.is_dir():
            files = sorted(
                p
                for p in base.rglob("*.parquet")
                if not any(part.startswith((".", "_")) for part in p.relative_to(base).parts)
            )
        elif base.is_file():
            files = [base]
        else:
            raise InputError(
                base, f"the {split} split is missing", "re-ingest the dataset with `xmc ingest`"
            )
        if not files:
            raise InputError(base, "folder holds no .parquet file", "re-ingest the dataset")
        return files

    def _check_schema(self, path: Path) -> None:
        schema = _read_schema(path)
        if (GROUP_FIELD.name in schema.names) != self.grouped:
            first = self._files["train"][0]
            has, lacks = ("lacks", "has") if self.grouped else ("has", "lacks")
            raise InputError(path, f"{has} a {GROUP_FIELD.name!r} column, which {first} {lacks}",
                             "give every file of the corpus the column, or none")  # fmt: skip
        for field in self.schema:
            if field.name not in schema.names:
                raise InputError(
                    path,
                    f"missing column {field.name!r} (has {schema.names})",
                    f"add a {field.name!r} column of type {field.type} or re-ingest",
                )
            got = schema.field(field.name).type
            if not got.equals(field.type) and not _compatible(got, field.type):
                raise InputError(
                    path,
                    f"column {field.name!r} has type {got}, expected {field.type}",
                    "re-ingest the dataset with `xmc ingest`",
                )

    def partitions(self, split: str) -> list[PartitionRef]:
        """Every row group of ``split``, in order."""
        refs = []
        for f in self._files[split]:
            meta = pq.ParquetFile(f).metadata
            for g in range(meta.num_row_groups):
                rows = meta.row_group(g).num_rows
                if rows:
                    refs.append(PartitionRef(split, str(f), g, rows))
        return refs

    def read_partition(self, ref: PartitionRef, columns: list[str] | None = None) -> pa.Table:
        """The rows of one partition, cast to the corpus schema."""
        table = pq.ParquetFile(ref.file).read_row_group(ref.row_group, columns=columns)
        target = (
            self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        )
        return table.select(target.names).cast(target)

    def read_split(self, split: str, columns: list[str] | None = None) -> pa.Table:
        """A whole split in memory (tests, small corpora)."""
        parts = [self.read_partition(r, columns) for r in self.partitions(split)]
        return pa.concat_tables(parts)

    def label_texts(self) -> pa.Table | None:
        """``labels.parquet`` (label, text) if the dataset has label texts."""
        path = self.path / "labels.parquet"
        if not path.exists():
            return None
        table = pq.read_table(path)
        missing = [n for n in LABELS_SCHEMA.names if n not in table.column_names]
        if missing:
            raise InputError(path, f"missing columns {missing}", "re-ingest the dataset")
        return table.select(LABELS_SCHEMA.names).cast(LABELS_SCHEMA)


def _read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise InputError(path, f"not a readable Parquet file ({err})", "re-ingest") from err


def _compatible(got: pa.DataType, want: pa.DataType) -> bool:
    """Accept equivalent encodings (large_string, large_list, non-null item flags)."""
    if pa.types.is_dictionary(got):
        return _compatible(got.value_type, want)
    if pa.types.is_string(want):
        return pa.types.is_string(got) or pa.types.is_large_string(got)
    if pa.types.is_list(want) and (pa.types.is_list(got) or pa.types.is_large_list(got)):
        return _compatible(got.value_type, want.value_type) or got.value_type == want.value_type
    return False


def require_split(path: Path, split: str) -> None:
    """Refuse a split name the dataset folder ``path`` does not have."""
    if split not in SPLITS:
        raise InputError(
            path,
            f"has no split {split!r} (a dataset has {' and '.join(SPLITS)})",
            "pass " + " or ".join(f"--split {s}" for s in SPLITS),
        )


def read_manifest(path: Path) -> Manifest:
    """The checked ``manifest.json`` of the dataset folder ``path`` (the corpus is not read:
    a cheap check before work starts)."""
    mpath = path / "manifest.json"
    require_dataset_folder(path)  # a missing folder, a model, raw files: said as such
    try:
        manifest = Manifest.model_validate(json.loads(mpath.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as err:
        raise InputError(
            mpath, f"manifest.json is invalid: {err}", "re-ingest the dataset"
        ) from err
    if manifest.format_version != FORMAT_VERSION:
        raise InputError(
            mpath,
            f"format version {manifest.format_version}, this xmc reads {FORMAT_VERSION}",
            "re-ingest the dataset with this version of xmc",
        )
    return manifest
