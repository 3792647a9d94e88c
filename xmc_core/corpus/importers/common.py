"""Helpers shared by the importers: required files, label maps, label strings, the manifest."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xmc_core.corpus.importers.textio import iter_lines
from xmc_core.corpus.schema import Manifest
from xmc_core.corpus.values import brief
from xmc_core.corpus.writer import DatasetWriter
from xmc_core.errors import InputError
from xmc_core.storage.paths import file_kind
from xmc_core.wording import counted

Records = Iterator[tuple[int, dict[str, Any]]]
"""(row or line number from 1, record) pairs, as the tabular readers yield them."""

OPTION_OF = {"text": "--text-column", "labels": "--labels-column", "doc_id": "--id-column",
             "group": "--group-column"}  # fmt: skip
"""The ``xmc ingest`` option naming the column of each role (for error messages)."""

_LISTED_FILES = 20
LIKELY_SEPARATORS = ("|", ";")
"""Characters that join labels in files made elsewhere (checked when they are not the
separator)."""
log = logging.getLogger(__name__)


def require_file(path: Path, fmt: str) -> Path:
    """``path`` if it is a file, else an InputError that lists what the folder holds (or says
    what ``path`` is instead: a FIFO, a folder ...)."""
    if optional_file(path, fmt) is not None:
        return path
    names = sorted(p.name for p in path.parent.iterdir()) if path.parent.is_dir() else []
    shown = ", ".join(names[:_LISTED_FILES]) + (" ..." if len(names) > _LISTED_FILES else "")
    raise InputError(
        path,
        f"format {fmt!r} needs {path.name}, which is missing "
        f"(the folder holds: {shown or 'nothing'})",
        f"put {path.name} in {path.parent} or pick the format that matches the files",
    )


def optional_file(path: Path, fmt: str) -> Path | None:
    """``path`` if it is a regular file (a link to one counts), None if there is nothing of that
    name; an InputError if it is something else (FIFO, socket, device, folder, broken link)."""
    if path.is_file():
        return path
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    raise InputError(
        path,
        f"format {fmt!r} reads {path.name} as a regular file, but it is {file_kind(path, mode)}",
        f"replace {path.name} by a regular file holding its data (copy the data in, not a pipe, "
        "device or link to it)",
    )


class SeparatorCheck:
    """Watches the label strings of one file for labels joined by another separator than
    ``sep`` (``a|b`` under the default ``,`` is one label named ``a|b``); :meth:`warn` logs
    it when at least half of them look so."""

    def __init__(self, path: Path, sep: str) -> None:
        self.path, self.sep = path, sep
        self.n_values = 0
        self.holding: Counter[str] = Counter()

    def see(self, value: str) -> None:
        """Count one label string as the importer reads it."""
        if not value.strip():
            return
        self.n_values += 1
        if self.sep not in value:
            self.holding.update(c for c in LIKELY_SEPARATORS if c != self.sep and c in value)

    def warn(self) -> None:
        """Log a warning naming the file and the separator option, if the labels look joined."""
        for char, n in self.holding.most_common(1):
            if 2 * n >= self.n_values:
                log.warning(
                    "%s: %r but no %r (the label separator) in %s of %s, each taken as one "
                    "label; if %r separates labels, ingest with --label-sep %r (a landing "
                    "drop: label_sep in its drop.yaml)",
                    self.path, char, self.sep, f"{n:,}", counted(self.n_values, "label value"),
                    char, char,
                )  # fmt: skip


def split_labels(value: str, sep: str) -> list[str]:
    """Label names of a ``sep``-separated string; an empty or blank string has none.

    Names are not stripped or checked here: the writer strips them and rejects empty ones.
    """
    return value.split(sep) if value.strip() else []


@dataclass(frozen=True)
class LabelMap:
    """``label_map.txt``: id -> name (when ids are parsed), name -> text (None: no text column)."""

    names: dict[int, str]
    texts: dict[str, str | None] | None


def read_label_map(path: Path, parse_ids: bool) -> LabelMap:
    """Read ``id TAB name [TAB train-frequency [TAB label text]]`` lines; blank lines are skipped.

    Names must be unique and non-empty; with ``parse_ids`` ids must be unique integers.
    """
    names: dict[int, str] = {}
    texts: dict[str, str | None] = {}
    has_text = False
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t", 3)
        name = cols[1].strip() if len(cols) > 1 else ""
        if not name:
            raise InputError(
                path,
                f"line {lineno} has no label name: expected 'id<TAB>name[<TAB>freq<TAB>text]'",
                "separate the columns with tabs and give every label a name",
                lineno,
            )
        if name in texts:
            raise InputError(path, f"label name {brief(name)} appears twice", "remove one", lineno)
        texts[name] = cols[3] if len(cols) > 3 else None
        has_text = has_text or len(cols) > 3
        if parse_ids:
            _add_label_id(path, lineno, cols[0], name, names)
    return LabelMap(names, texts if has_text else None)


def _add_label_id(path: Path, lineno: int, raw: str, name: str, names: dict[int, str]) -> None:
    try:
        label_id = int(raw)
    except ValueError:
        raise InputError(
            path, f"label id {brief(raw)} is not an integer", "make column 1 the label id", lineno
        ) from None
    if label_id in names:
        raise InputError(path, f"label id {label_id} appears twice", "make ids unique", lineno)
    names[label_id] = name


def check_not_inside(src: Path, dest: Path) -> None:
    """Refuse a destination that is, or contains, the source folder (overwrite would delete it)."""
    s, d = src.resolve(), dest.resolve()
    if s == d or d in s.parents:
        raise InputError(
            dest,
            f"the destination would replace the source folder {src}",
            "write the dataset to a folder outside the input folder",
        )


def manifest_of(ds: DatasetWriter) -> Manifest:
    """The manifest of a DatasetWriter after its ``with`` block; an error if it was not written."""
    if ds.manifest is None:
        raise RuntimeError(f"dataset {ds.dest} was not completed (no manifest written)")
    return ds.manifest


def source_info(fmt: str, src: Path, files: list[Path]) -> dict[str, object]:
    """The ``source`` entry of the manifest: format, input folder and file names."""
    return {"format": fmt, "path": str(src.resolve()), "files": [p.name for p in files]}
