"""Importers: turn a folder of user files into a validated dataset folder.

Every importer streams its input (memory stays constant, apart from the writer's set of doc ids)
through :class:`~xmc_core.corpus.writer.DatasetWriter`, which checks what all formats share and
creates the destination atomically: a failed ingest leaves no destination behind.

Formats (``src`` is a folder holding the split files)::

    lines    {split}_texts.txt + {split}_labels.txt [+ {split}_ids.txt, label_map.txt]
    xc       train.txt + test.txt (Extreme Classification Repository sparse) [+ label_map.txt]
    jsonl    {split}.jsonl [+ labels.jsonl | labels.csv]
    csv      {split}.csv [+ labels.jsonl | labels.csv]
    parquet  {split}.parquet [+ labels.jsonl | labels.csv]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from xmc_core.corpus.importers.common import check_not_inside
from xmc_core.corpus.importers.lines import import_lines
from xmc_core.corpus.importers.options import IngestOptions
from xmc_core.corpus.importers.tabular import import_csv, import_jsonl, import_parquet
from xmc_core.corpus.importers.xc_sparse import import_xc
from xmc_core.corpus.schema import Manifest
from xmc_core.errors import InputError

Importer = Callable[[Path, Path, IngestOptions], Manifest]

FORMATS: dict[str, Importer] = {
    "lines": import_lines,
    "xc": import_xc,
    "jsonl": import_jsonl,
    "csv": import_csv,
    "parquet": import_parquet,
}


def ingest(
    fmt: str, src: str | Path, dest: str | Path, options: IngestOptions | None = None
) -> Manifest:
    """Import the ``fmt`` files in folder ``src`` into a new dataset folder ``dest``.

    Returns the manifest written to ``dest/manifest.json``. Raises InputError (naming the file,
    the line or row, and the fix) on bad input; ``dest`` is then left untouched.
    """
    importer = FORMATS.get(fmt)
    if importer is None:
        raise InputError(
            None, f"unknown input format {fmt!r}", f"use one of: {', '.join(sorted(FORMATS))}"
        )
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise InputError(
            src, "source is not a folder", f"pass the folder that holds the {fmt} split files"
        )
    check_not_inside(src, dest)
    return importer(src, dest, options or IngestOptions())


__all__ = ["FORMATS", "IngestOptions", "ingest"]
