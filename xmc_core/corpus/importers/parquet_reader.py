"""Reading ``{split}.parquet`` (a file, or a folder of ``*.parquet`` parts) for the ``parquet``
importer, one record batch at a time, with clear errors for unreadable or damaged files,
repeated column names, wrong column types and string values that are not UTF-8."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from xmc_core.corpus.importers.common import OPTION_OF, Records
from xmc_core.corpus.values import brief
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from xmc_core.corpus.importers.options import IngestOptions

BATCH_ROWS = 8192
"""Rows per record batch read from a Parquet file."""


def read_parquet(path: Path, options: IngestOptions) -> tuple[list[str], Records]:
    """Columns (of the first part) and rows of a Parquet file or folder of parts, read one batch
    at a time.

    Only the id, text, labels and group columns are read; their types are checked first. Parts
    may differ in other columns (ignored), not in which of those four they hold.
    """
    parts = [path]
    if path.is_dir():
        parts = sorted(p for p in path.rglob("*.parquet") if p.is_file() and p.name[0] not in "._")
    if not parts:
        raise InputError(path, "folder holds no .parquet file", "put the Parquet parts in it")
    files = [_parquet_file(p) for p in parts]
    names = files[0].schema_arrow.names
    roles = {options.id_column, options.text_column, options.labels_column, options.group_column}
    for part, pf in zip(parts, files, strict=True):
        _check_same_roles(part, pf.schema_arrow.names, parts[0], names, roles)
        part_names = pf.schema_arrow.names
        repeated = sorted({n for n in part_names if part_names.count(n) > 1})
        if repeated:
            raise InputError(
                part,
                f"column names appear more than once: {brief(repeated, 300)}",
                "rename the copies",
            )
        _check_parquet_types(part, pf.schema_arrow, options)
    wanted = [n for n in names if n in roles]

    def records() -> Records:
        row = 0
        for part, pf in zip(parts, files, strict=True):
            for columns, n_rows in _parquet_batches(path, part, pf, wanted, row):
                for i in range(n_rows):
                    row += 1
                    yield row, {name: values[i] for name, values in columns.items()}

    return names, records()


def _check_same_roles(
    part: Path, names: list[str], first: Path, first_names: list[str], roles: set[str | None]
) -> None:
    """``part`` must hold the same id/text/labels columns (``roles``) as the first part."""
    missing = [n for n in first_names if n in roles and n not in names]
    extra = [n for n in names if n in roles and n not in first_names]
    if not missing and not extra:
        return
    problem = [f"lacks the columns {missing} that {first.name} has"] if missing else []
    problem += [f"has the columns {extra} that {first.name} lacks"] if extra else []
    fixes = [f"add the columns {missing} to this part"] if missing else []
    fixes += [f"add the columns {extra} to every part, or drop them from this one"] if extra else []
    raise InputError(
        part,
        f"{' and '.join(problem)} (the id, text, labels and group columns must be the same in "
        f"every part of {part.parent}; other columns may differ and are ignored)",
        f"{'; '.join(fixes)}, or move this part out of {part.parent}",
    )


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
        batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)
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
        options.group_column: ("group", _is_id_type, "string or integer"),
    }
    for name, (role, ok, want) in checks.items():
        if name is None or name not in schema.names:
            continue
        got = schema.field(name).type
        if not ok(got):
            raise InputError(
                path,
                f"{role} column {name!r} has type {got}; expected {want}",
                f"convert the column to {want}, or set {OPTION_OF[role]} to another column",
            )


def _is_labels_type(t: pa.DataType) -> bool:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _is_string(t.value_type)
    return _is_string(t)


def _is_id_type(t: pa.DataType) -> bool:
    return _is_string(t) or pa.types.is_integer(t)
