"""Format ``xc``: the Extreme Classification Repository sparse bag-of-words format.

The source folder holds ``train.txt`` and ``test.txt``::

    N D L                      header: rows, features, labels
    l1,l2 f:v f:v ...          one row per document: label ids, then 0-based feature:value pairs
     f:v f:v ...               a row without labels starts with a space

and optionally ``label_map.txt`` (id TAB name ...): label ids become names, else the id as a
string. Doc ids are ``"{split}-{row:08d}"`` (row = data row from 1, the header not counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xmc_core.corpus.importers.common import (
    manifest_of,
    optional_file,
    read_label_map,
    require_file,
    source_info,
)
from xmc_core.corpus.importers.textio import decode_line, iter_lines, strip_newline
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.corpus.split_writer import SplitWriter
from xmc_core.corpus.values import brief
from xmc_core.corpus.writer import DatasetWriter
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from xmc_core.corpus.importers.options import IngestOptions

MAX_FEATURES = 2**31
"""Feature indices are stored as int32, so D (the feature count) is at most 2**31."""
_ROW_FIX = "write each row as 'l1,l2 f:v f:v ...' (a row without labels starts with a space)"


@dataclass(frozen=True)
class Header:
    """The ``N D L`` header line."""

    n_rows: int
    n_features: int
    n_labels: int

    @classmethod
    def read(cls, path: Path) -> Header:
        """Parse line 1 of ``path``: three non-negative integers, D and L at least 1, D at most
        MAX_FEATURES."""
        with open(path, "rb") as fh:
            line = decode_line(path, 1, strip_newline(fh.readline()))
        parts = line.split()
        try:
            n, d, l_ = (int(p) for p in parts) if len(parts) == 3 else (-1, -1, -1)
        except ValueError:
            n, d, l_ = -1, -1, -1
        if n < 0 or d < 1 or l_ < 1:
            raise InputError(
                path,
                f"line 1 must be the header 'N D L' (rows, features, labels), found {line[:80]!r}",
                "add the header line, e.g. '4880 1836 159'",
                1,
            )
        if d > MAX_FEATURES:
            raise InputError(
                path,
                f"the header says D={d} features, more than {MAX_FEATURES}: feature indices are "
                "stored as 32-bit integers",
                f"renumber the features with indices below {MAX_FEATURES} and lower D",
                1,
            )
        return cls(n, d, l_)


@dataclass(frozen=True)
class RowParser:
    """Parses data rows of one file against its header and optional label names."""

    path: Path
    header: Header
    names: dict[int, str] | None

    def labels(self, lineno: int, field: str) -> list[str]:
        """Label names of the comma-separated label-id field (empty field: no labels)."""
        if not field:
            return []
        out = []
        for raw in field.split(","):
            try:
                label_id = int(raw)
            except ValueError:
                raise InputError(
                    self.path, f"label id {brief(raw)} is not an integer", _ROW_FIX, lineno
                ) from None
            if not 0 <= label_id < self.header.n_labels:
                raise InputError(
                    self.path,
                    f"label id {label_id} is outside [0, {self.header.n_labels}) (L in the header)",
                    "label ids are 0-based and below L: fix the row or the header",
                    lineno,
                )
            out.append(self._name(lineno, label_id))
        return out

    def _name(self, lineno: int, label_id: int) -> str:
        if self.names is None:
            return str(label_id)
        name = self.names.get(label_id)
        if name is None:
            raise InputError(
                self.path,
                f"label id {label_id} is not in label_map.txt",
                "add the label to label_map.txt, or remove label_map.txt to use ids as names",
                lineno,
            )
        return name

    def features(self, lineno: int, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids int32, values float32)`` of ``f:v`` tokens, validated."""
        ids = np.empty(len(tokens), dtype=np.int64)
        vals = np.empty(len(tokens), dtype=np.float64)
        for k, tok in enumerate(tokens):
            index, sep, value = tok.partition(":")
            try:
                if not sep:
                    raise ValueError(tok)
                ids[k] = int(index)
                vals[k] = float(value)
            except (ValueError, OverflowError):
                raise InputError(
                    self.path,
                    f"feature pair {k + 1} {brief(tok)} is not 'index:value' (integer:number)",
                    _ROW_FIX,
                    lineno,
                ) from None
        self._check_features(lineno, tokens, ids, vals)
        return ids.astype(np.int32), vals.astype(np.float32)

    def _check_features(
        self, lineno: int, tokens: list[str], ids: np.ndarray, vals: np.ndarray
    ) -> None:
        d = self.header.n_features
        bad = np.flatnonzero((ids < 0) | (ids >= d))
        if bad.size:
            raise InputError(
                self.path,
                f"feature index {ids[bad[0]]} ({brief(tokens[bad[0]])}) is outside [0, {d}) "
                "(D in the header)",
                "feature indices are 0-based and below D: fix the row or the header",
                lineno,
            )
        with np.errstate(over="ignore"):
            bad = np.flatnonzero(~np.isfinite(vals.astype(np.float32)))
        if bad.size:
            raise InputError(
                self.path,
                f"feature value in {brief(tokens[bad[0]])} is NaN, infinite or beyond float32 "
                "range",
                "replace it with a finite number",
                lineno,
            )
        order = np.sort(ids)
        dup = np.flatnonzero(order[1:] == order[:-1])
        if dup.size:
            raise InputError(
                self.path,
                f"feature index {order[dup[0]]} appears more than once in the row",
                "merge the duplicate pairs into one",
                lineno,
            )

    def row(self, lineno: int, line: str) -> tuple[list[str], tuple[np.ndarray, np.ndarray]]:
        """Labels and features of one data row."""
        field, _, rest = line.partition(" ")
        return self.labels(lineno, field.strip()), self.features(lineno, rest.split())


def import_xc(src: Path, dest: Path, options: IngestOptions) -> Manifest:
    """Ingest the ``xc`` format from folder ``src`` into dataset folder ``dest`` (kind "bow")."""
    paths = {split: require_file(src / f"{split}.txt", "xc") for split in SPLITS}
    headers = {split: Header.read(paths[split]) for split in SPLITS}
    _check_headers_agree(paths, headers)
    map_path = src / "label_map.txt"
    has_map = optional_file(map_path, "xc") is not None
    label_map = read_label_map(map_path, parse_ids=True) if has_map else None
    inputs = list(paths.values()) + ([map_path] if label_map else [])
    with DatasetWriter(
        dest,
        kind="bow",
        source=source_info("xc", src, inputs),
        policies=options.policies,
        n_features=headers["train"].n_features,
        rows_per_group=options.rows_per_group,
        overwrite=options.overwrite,
    ) as ds:
        for split in SPLITS:
            names = label_map.names if label_map else None
            parser = RowParser(paths[split], headers[split], names)
            _write_split(ds.split(split), split, parser)
            ds.close_split(split, paths[split].name)
        if label_map is not None and label_map.texts is not None:
            ds.set_label_texts(label_map.texts)
    return manifest_of(ds)


def _check_headers_agree(paths: dict[str, Path], headers: dict[str, Header]) -> None:
    train, test = headers["train"], headers["test"]
    if (train.n_features, train.n_labels) != (test.n_features, test.n_labels):
        raise InputError(
            paths["test"],
            f"header says D={test.n_features} features and L={test.n_labels} labels, but "
            f"{paths['train'].name} says D={train.n_features} and L={train.n_labels}",
            "both splits must use the same feature and label spaces: fix the test header",
            1,
        )


def _write_split(writer: SplitWriter, split: str, parser: RowParser) -> None:
    found = 0
    for lineno, line in iter_lines(parser.path):
        if lineno == 1:
            continue
        found += 1
        labels, features = parser.row(lineno, line)
        writer.add(f"{split}-{found:08d}", None, labels, parser.path, lineno, features=features)
    expected = parser.header.n_rows
    if found != expected:
        raise InputError(
            parser.path,
            f"the header announces N={expected} rows but the file has {found} data rows",
            "fix N in the header, or remove blank or extra lines (a trailing empty line counts)",
            found + 1,
        )
