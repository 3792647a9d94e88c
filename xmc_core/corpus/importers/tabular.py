"""Formats ``jsonl``, ``csv`` and ``parquet``: one record per document.

The source folder holds ``{split}.jsonl`` (one JSON object a line), ``{split}.csv`` (header row,
Python csv dialect "excel") or ``{split}.parquet`` (a file, or a folder of ``*.parquet`` parts).
Column names come from IngestOptions (``doc_id``, ``text``, ``labels`` by default). Labels are a
list of strings (JSON array, Parquet list<string>) or one string split by ``label_sep``. A null
text counts as empty, null labels as none. Without the id column, doc ids are
``"{split}-{record:08d}"``. Optional ``labels.jsonl`` or ``labels.csv`` (columns ``label``,
``text``) give label texts.

Malformed input stops with an InputError naming the file (and the line or row): JSON that
Python cannot hold (nesting deeper than its recursion limit, integers over 4300 digits) or with
lone surrogate escapes (``"\\ud800"``); CSV with broken quoting, parsed strictly (a file ending
inside a quoted field is an error, not a silently closed field); Parquet files that are
unreadable or damaged, with repeated column names, or with string values that are not UTF-8.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from xmc_core.corpus.importers.common import manifest_of, require_file, source_info, split_labels
from xmc_core.corpus.importers.textio import iter_lines
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.corpus.writer import DatasetWriter, brief, utf8
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from xmc_core.corpus.importers import IngestOptions

Records = Iterator[tuple[int, dict[str, Any]]]
"""(row or line number from 1, record) pairs."""

_BATCH_ROWS = 8192
_CSV_FIELD_LIMIT = 2**31 - 1
_OPTION_OF = {"text": "--text-column", "labels": "--labels-column", "doc_id": "--id-column"}


def read_jsonl(path: Path, options: IngestOptions | None = None) -> tuple[list[str], Records]:
    """Field names of the first object and all objects of a JSON-lines file.

    Blank lines are skipped.
    """
    lines = ((n, line) for n, line in iter_lines(path) if line.strip())
    first = next(lines, None)
    if first is None:
        return [], iter(())
    head = (first[0], _json_object(path, *first))

    def records() -> Records:
        yield head
        for lineno, line in lines:
            yield lineno, _json_object(path, lineno, line)

    return list(head[1]), records()


def _json_object(path: Path, lineno: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(
            path,
            f"invalid JSON: {err.msg} at column {err.colno}",
            "write one object a line",
            lineno,
        ) from None
    except RecursionError:
        raise InputError(
            path, "JSON nested too deeply to read", "flatten the nested arrays or objects", lineno
        ) from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise InputError(
            path, f"JSON value cannot be read: {err}", "write such numbers as strings", lineno
        ) from None
    if not isinstance(obj, dict):
        raise InputError(
            path, f"expected a JSON object, found {type(obj).__name__}", "write objects", lineno
        )
    return obj


def read_csv(path: Path, options: IngestOptions | None = None) -> tuple[list[str], Records]:
    """Header and rows of a CSV file; rows are dicts, numbered by their (last) line."""
    reader = csv.reader((line for _, line in iter_lines(path, keep_ends=True)), strict=True)
    header = _csv_next(path, reader) or []
    if len(set(header)) != len(header):
        raise InputError(
            path, f"header has repeated column names: {brief(header, 300)}", "rename them", 1
        )

    def records() -> Records:
        while (row := _csv_next(path, reader)) is not None:
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(
                    path,
                    f"row has {len(row)} fields but the header has {len(header)}",
                    "quote fields that contain the delimiter, quotes or newlines",
                    reader.line_num,
                )
            yield reader.line_num, dict(zip(header, row, strict=True))

    return header, records()


def _csv_next(path: Path, reader: Any) -> list[str] | None:
    old = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        return next(reader, None)
    except csv.Error as err:
        if "unexpected end of data" in str(err):
            raise InputError(
                path,
                "the file ends inside a quoted field (a quote is never closed)",
                "close the quote, or check whether the file was cut short",
                reader.line_num,
            ) from None
        raise InputError(
            path,
            f"malformed CSV: {err}",
            "fix the quoting: quote a field that holds a comma, quote or newline, and write a "
            'quote inside a quoted field as ""',
            reader.line_num,
        ) from None
    finally:
        csv.field_size_limit(old)


def read_parquet(path: Path, options: IngestOptions) -> tuple[list[str], Records]:
    """Columns and rows of a Parquet file or folder of parts, read one batch at a time.

    Only the id, text and labels columns are read; their types are checked first.
    """
    parts = [path]
    if path.is_dir():
        parts = sorted(p for p in path.rglob("*.parquet") if p.is_file() and p.name[0] not in "._")
    if not parts:
        raise InputError(path, "folder holds no .parquet file", "put the Parquet parts in it")
    files = [_parquet_file(p) for p in parts]
    names = files[0].schema_arrow.names
    for part, pf in zip(parts, files, strict=True):
        if pf.schema_arrow.names != names:
            raise InputError(
                part,
                f"columns {brief(pf.schema_arrow.names, 300)} differ from {brief(names, 300)}",
                "align",
            )
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InputError(
                part,
                f"column names appear more than once: {brief(repeated, 300)}",
                "rename the copies",
            )
        _check_parquet_types(part, pf.schema_arrow, options)
    wanted = [
        n for n in names if n in {options.id_column, options.text_column, options.labels_column}
    ]

    def records() -> Records:
        row = 0
        for part, pf in zip(parts, files, strict=True):
            for columns, n_rows in _parquet_batches(path, part, pf, wanted, row):
                for i in range(n_rows):
                    row += 1
                    yield row, {name: values[i] for name, values in columns.items()}

    return names, records()


_DAMAGED_FIX = "re-create the file from its source (e.g. pyarrow.parquet.write_table)"


def _parquet_file(path: Path) -> pq.ParquetFile:
    try:
        pf = pq.ParquetFile(path)
        pf.schema_arrow  # noqa: B018 (decodes the schema: column names may be invalid UTF-8)
    except (OSError, ValueError, pa.ArrowException) as err:
        raise InputError(
            path,
            f"not a readable Parquet file ({err})",
            f"check that it is a complete Parquet file; {_DAMAGED_FIX}",
        ) from err
    return pf


def _parquet_batches(
    path: Path, part: Path, pf: pq.ParquetFile, columns: list[str], rows_before: int
) -> Iterator[tuple[dict[str, list[Any]], int]]:
    """``(column name -> Python values, row count)`` per batch of ``part``.

    Damaged data is an InputError naming ``part``; a string that is not UTF-8 one naming
    ``path`` (the split's file or folder) and its row counted over the split.
    """
    row = rows_before
    try:
        batches = pf.iter_batches(batch_size=_BATCH_ROWS, columns=columns)
        while (batch := next(batches, None)) is not None:
            try:
                values = batch.to_pydict()
            except UnicodeDecodeError:
                raise _not_utf8(path, batch, row) from None
            yield values, batch.num_rows
            row += batch.num_rows
    except (OSError, pa.ArrowException) as err:
        raise InputError(
            part,
            f"the Parquet data is damaged: reading from row {row + 1} of the split failed ({err})",
            _DAMAGED_FIX,
        ) from None


def _not_utf8(path: Path, batch: pa.RecordBatch, rows_before: int) -> InputError:
    """The error for the first value of ``batch`` that is not valid UTF-8."""
    for i in range(batch.num_rows):
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            try:
                column[i].as_py()
            except UnicodeDecodeError as err:
                bad = err.object[max(0, err.start - 20) : err.end + 20]
                return InputError(
                    path,
                    f"column {name!r} holds bytes that are not valid UTF-8 (near {bad!r})",
                    "decode the strings with their real encoding before writing the Parquet "
                    "file (Parquet strings are UTF-8)",
                    rows_before + i + 1,
                )
    return InputError(path, "a string column is not valid UTF-8", "re-encode it as UTF-8")


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)


def _check_parquet_types(path: Path, schema: pa.Schema, options: IngestOptions) -> None:
    checks = {
        options.text_column: ("text", _is_string, "string"),
        options.labels_column: ("labels", _is_labels_type, "list<string> or string"),
        options.id_column: ("doc_id", _is_id_type, "string or integer"),
    }
    for name, (role, ok, want) in checks.items():
        if name is None or name not in schema.names:
            continue
        got = schema.field(name).type
        if not ok(got):
            raise InputError(
                path,
                f"{role} column {name!r} has type {got}; expected {want}",
                f"convert the column to {want}, or set {_OPTION_OF[role]} to another column",
            )


def _is_labels_type(t: pa.DataType) -> bool:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _is_string(t.value_type)
    return _is_string(t)


def _is_id_type(t: pa.DataType) -> bool:
    return _is_string(t) or pa.types.is_integer(t)


READERS: dict[str, Callable[[Path, IngestOptions], tuple[list[str], Records]]] = {
    "jsonl": read_jsonl,
    "csv": read_csv,
    "parquet": read_parquet,
}


@dataclass(frozen=True)
class Columns:
    """Which record fields hold the doc id (None: generated), the text and the labels."""

    doc_id: str | None
    text: str
    labels: str

    @classmethod
    def pick(cls, path: Path, found: list[str], options: IngestOptions) -> Columns:
        """Check that the text and labels columns exist in ``found``."""
        for role, name in (("text", options.text_column), ("labels", options.labels_column)):
            if name not in found:
                raise InputError(
                    path,
                    f"no {role} column {name!r}; columns found: "
                    f"{brief(found, 300) if found else 'none (empty file)'}",
                    f"rename the column or set {_OPTION_OF[role]} to the column holding the {role}",
                )
        has_id = options.id_column is not None and options.id_column in found
        return cls(
            options.id_column if has_id else None, options.text_column, options.labels_column
        )

    def get(self, path: Path, row: int, record: dict[str, Any], role: str) -> Any:
        """The value of ``role`` ("doc_id", "text" or "labels") in ``record``."""
        name = getattr(self, role)
        if name not in record:
            raise InputError(
                path,
                f"record has no {role} field {name!r}; fields: {brief(sorted(record), 300)}",
                f"give every record the field, or set {_OPTION_OF[role]}",
                row,
            )
        return record[name]


def _as_text(value: Any, path: Path, row: int) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    raise InputError(
        path, f"text is {type(value).__name__} ({value!r:.60}), not a string", "store text", row
    )


def _as_labels(value: Any, sep: str, path: Path, row: int) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return split_labels(value, sep)
    if isinstance(value, list | tuple):
        return list(value)
    raise InputError(
        path,
        f"labels is {type(value).__name__} ({value!r:.60}), not a list of strings or a string",
        f"store labels as a list of strings or one string separated by {sep!r}",
        row,
    )


def _as_doc_id(value: Any, path: Path, row: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(
        path, f"doc id is {type(value).__name__} ({value!r:.60})", "use string or integer ids", row
    )


def import_jsonl(src: Path, dest: Path, options: IngestOptions) -> Manifest:
    """Ingest ``train.jsonl``/``test.jsonl`` from ``src`` into dataset folder ``dest``."""
    return _import("jsonl", src, dest, options)


def import_csv(src: Path, dest: Path, options: IngestOptions) -> Manifest:
    """Ingest ``train.csv``/``test.csv`` from ``src`` into dataset folder ``dest``."""
    return _import("csv", src, dest, options)


def import_parquet(src: Path, dest: Path, options: IngestOptions) -> Manifest:
    """Ingest ``train.parquet``/``test.parquet`` from ``src`` into dataset folder ``dest``."""
    return _import("parquet", src, dest, options)


def _import(fmt: str, src: Path, dest: Path, options: IngestOptions) -> Manifest:
    paths = {split: _split_path(src / f"{split}.{fmt}", fmt) for split in SPLITS}
    label_texts, texts_path = read_label_texts(src)
    inputs = list(paths.values()) + ([texts_path] if texts_path else [])
    with DatasetWriter(
        dest,
        kind="text",
        source=source_info(fmt, src, inputs),
        policies=options.policies,
        rows_per_group=options.rows_per_group,
        overwrite=options.overwrite,
    ) as ds:
        for split in SPLITS:
            _write_split(ds, split, paths[split], READERS[fmt], options)
        if label_texts is not None:
            ds.set_label_texts(label_texts)
    return manifest_of(ds)


def _split_path(path: Path, fmt: str) -> Path:
    return path if fmt == "parquet" and path.is_dir() else require_file(path, fmt)


def _write_split(
    ds: DatasetWriter,
    split: str,
    path: Path,
    reader: Callable[[Path, IngestOptions], tuple[list[str], Records]],
    options: IngestOptions,
) -> None:
    found, records = reader(path, options)
    cols = Columns.pick(path, found, options)
    writer = ds.split(split)
    for index, (row, record) in enumerate(records, 1):
        raw_id = cols.get(path, row, record, "doc_id") if cols.doc_id else None
        doc_id = _as_doc_id(raw_id, path, row) if cols.doc_id else f"{split}-{index:08d}"
        text = _as_text(cols.get(path, row, record, "text"), path, row)
        labels = _as_labels(cols.get(path, row, record, "labels"), options.label_sep, path, row)
        writer.add(doc_id, text, labels, path, row)
    ds.close_split(split, path.name)


def read_label_texts(src: Path) -> tuple[dict[str, str | None] | None, Path | None]:
    """Label texts from ``labels.jsonl`` or ``labels.csv`` (columns label, text), if present."""
    present = [p for p in (src / "labels.jsonl", src / "labels.csv") if p.is_file()]
    if not present:
        return None, None
    if len(present) > 1:
        raise InputError(src, "both labels.jsonl and labels.csv exist", "keep only one of them")
    path = present[0]
    found, records = (read_jsonl if path.suffix == ".jsonl" else read_csv)(path)
    missing = [c for c in ("label", "text") if c not in found]
    if missing:
        raise InputError(
            path,
            f"missing columns {missing}; columns found: {brief(found, 300)}",
            "name them label and text",
        )
    texts: dict[str, str | None] = {}
    for row, record in records:
        label, text = record.get("label"), record.get("text")
        if not isinstance(label, str) or not label.strip():
            raise InputError(path, f"label {brief(label)} is not a non-empty string", "fix it", row)
        if text is not None and not isinstance(text, str):
            raise InputError(path, f"text of {brief(label)} is not a string", "store text", row)
        if label.strip() in texts:
            raise InputError(
                path, f"label {brief(label)} appears twice", "keep one line a label", row
            )
        utf8(label, "label", path, row)
        utf8(text or "", "text", path, row)
        texts[label.strip()] = text
    return texts, path
