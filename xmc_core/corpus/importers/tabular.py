"""Formats ``jsonl``, ``csv`` and ``parquet``: one record per document.

The source folder holds ``{split}.jsonl`` (one JSON object a line), ``{split}.csv`` (header row,
Python csv dialect "excel") or ``{split}.parquet`` (a file, or a folder of ``*.parquet`` parts).
Column names come from IngestOptions (``doc_id``, ``text``, ``labels``, ``group`` by default; a
corpus is grouped when its training file has the group column, :mod:`xmc_core.corpus.schema`, a
document with a null or empty group a group of its own). Labels are a list of strings (JSON
array, Parquet list<string>) or one string split by ``label_sep``. A null text counts as empty,
null labels as none. Without the id column, doc ids are ``"{split}-{record:08d}"``. Optional
``labels.jsonl`` or ``labels.csv`` (columns ``label``, ``text``) give label texts.

Malformed input stops with an InputError naming the file (and the line or row): JSON that
Python cannot hold (nesting deeper than its recursion limit, integers over 4300 digits) or with
lone surrogate escapes (``"\\ud800"``); CSV with broken quoting, parsed strictly (a file ending
inside a quoted field is an error, not a silently closed field); Parquet files that are
unreadable or damaged, with repeated column names, or with string values that are not UTF-8.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xmc_core.corpus.importers.common import (
    OPTION_OF,
    Records,
    SeparatorCheck,
    manifest_of,
    optional_file,
    require_file,
    source_info,
    split_labels,
)
from xmc_core.corpus.importers.parquet_reader import read_parquet
from xmc_core.corpus.importers.textio import iter_lines
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.corpus.values import brief, utf8
from xmc_core.corpus.writer import DatasetWriter
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from xmc_core.corpus.importers.options import IngestOptions

_CSV_FIELD_LIMIT = 2**31 - 1


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


READERS: dict[str, Callable[[Path, IngestOptions], tuple[list[str], Records]]] = {
    "jsonl": read_jsonl,
    "csv": read_csv,
    "parquet": read_parquet,
}


@dataclass(frozen=True)
class Columns:
    """Which record fields hold the doc id (None: generated), the text, the labels and the group
    (None: not read)."""

    doc_id: str | None
    text: str
    labels: str
    group: str | None = None

    @classmethod
    def pick(
        cls, path: Path, found: list[str], options: IngestOptions, grouped: bool = False
    ) -> Columns:
        """Check that the text and labels columns exist in ``found`` (none: an empty file)."""
        if not found:
            raise InputError(
                path, "the file is empty: it holds no documents", empty_split_fix(options)
            )
        for role, name in (("text", options.text_column), ("labels", options.labels_column)):
            if name not in found:
                raise InputError(
                    path,
                    f"no {role} column {name!r}; columns found: {brief(found, 300)}",
                    f"rename the column or set {OPTION_OF[role]} to the column holding the {role}",
                )
        has_id = options.id_column is not None and options.id_column in found
        group = options.group_column if grouped else None
        return cls(
            options.id_column if has_id else None, options.text_column, options.labels_column, group
        )

    def get(self, path: Path, row: int, record: dict[str, Any], role: str) -> Any:
        """The value of ``role`` ("doc_id", "text" or "labels") in ``record``."""
        name = getattr(self, role)
        if name not in record:
            raise InputError(
                path,
                f"record has no {role} field {name!r}; fields: {brief(sorted(record), 300)}",
                f"give every record the field, or set {OPTION_OF[role]}",
                row,
            )
        return record[name]


def empty_split_fix(options: IngestOptions) -> str:
    """What to do about a split file without documents."""
    return (
        "write the split's documents into it, one record each with the fields "
        f"{options.text_column!r} and {options.labels_column!r}"
    )


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


def _as_doc_id(value: Any, path: Path, row: int, what: str = "doc id") -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(
        path, f"{what} is {type(value).__name__} ({value!r:.60})", f"use string or integer {what}s",
        row,
    )  # fmt: skip


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
    opened = {split: READERS[fmt](paths[split], options) for split in SPLITS}  # lazy records
    grouped = options.group_column is not None and options.group_column in opened["train"][0]
    label_texts, texts_path = read_label_texts(src)
    inputs = list(paths.values()) + ([texts_path] if texts_path else [])
    with DatasetWriter(
        dest,
        kind="text",
        source=source_info(fmt, src, inputs),
        policies=options.policies,
        rows_per_group=options.rows_per_group,
        overwrite=options.overwrite,
        grouped=grouped,
    ) as ds:
        for split in SPLITS:
            _write_split(ds, split, paths[split], opened[split], options)
        if label_texts is not None:
            ds.set_label_texts(label_texts)
    return manifest_of(ds)


def _split_path(path: Path, fmt: str) -> Path:
    return path if fmt == "parquet" and path.is_dir() else require_file(path, fmt)


def _write_split(
    ds: DatasetWriter,
    split: str,
    path: Path,
    opened: tuple[list[str], Records],
    options: IngestOptions,
) -> None:
    found, records = opened
    writer = ds.split(split)
    cols = Columns.pick(path, found, options, writer.grouped and options.group_column in found)
    separators = SeparatorCheck(path, options.label_sep)
    for index, (row, record) in enumerate(records, 1):
        raw_id = cols.get(path, row, record, "doc_id") if cols.doc_id else None
        doc_id = _as_doc_id(raw_id, path, row) if cols.doc_id else f"{split}-{index:08d}"
        text = _as_text(cols.get(path, row, record, "text"), path, row)
        raw_labels = cols.get(path, row, record, "labels")
        if isinstance(raw_labels, str):
            separators.see(raw_labels)
        labels = _as_labels(raw_labels, options.label_sep, path, row)
        raw_group = record.get(cols.group) if cols.group else None  # None: a group of its own
        group = None if raw_group in (None, "") else _as_doc_id(raw_group, path, row, "group")
        writer.add(doc_id, text, labels, path, row, group=group)
    ds.close_split(split, path.name)
    separators.warn()


def read_label_texts(src: Path) -> tuple[dict[str, str | None] | None, Path | None]:
    """Label texts from ``labels.jsonl`` or ``labels.csv`` (columns label, text), if present."""
    candidates = (src / "labels.jsonl", src / "labels.csv")
    present = [p for p in candidates if optional_file(p, p.suffix[1:]) is not None]
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
