"""Format ``lines``: one document per line, in parallel files.

For each split (train, test) the source folder holds::

    {split}_texts.txt    document text (the line without its line ending, otherwise unchanged)
    {split}_labels.txt   label names separated by IngestOptions.label_sep (default ",")
    {split}_ids.txt      (optional) doc id in the first tab-separated column [TAB its group]
    label_map.txt        (optional) id TAB name TAB train-frequency [TAB label text]

Without an ids file the doc ids are ``"{split}-{line:08d}"``. When the first line of
``train_ids.txt`` has a second column, the corpus is grouped (:mod:`xmc_core.corpus.schema`):
that column is each document's group, a document without one a group of its own. Label texts
come from column 4 of ``label_map.txt`` (keyed by the name in column 2) when any line has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xmc_core.corpus.importers.common import (
    SeparatorCheck,
    manifest_of,
    optional_file,
    read_label_map,
    require_file,
    source_info,
    split_labels,
)
from xmc_core.corpus.importers.textio import iter_parallel
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.corpus.writer import DatasetWriter

if TYPE_CHECKING:
    from xmc_core.corpus.importers.options import IngestOptions


@dataclass(frozen=True)
class SplitFiles:
    """The input files of one split."""

    texts: Path
    labels: Path
    ids: Path | None

    @classmethod
    def find(cls, src: Path, split: str) -> SplitFiles:
        """The files of ``split`` in ``src``; texts and labels are required."""
        return cls(
            require_file(src / f"{split}_texts.txt", "lines"),
            require_file(src / f"{split}_labels.txt", "lines"),
            optional_file(src / f"{split}_ids.txt", "lines"),
        )

    def all(self) -> list[Path]:
        """Texts, labels and (if present) ids, in that order."""
        return [self.texts, self.labels] + ([self.ids] if self.ids else [])

    def blame(self, text: str, labels: list[str], keep_unlabeled: bool) -> Path:
        """The file that a writer error about this document points to (checks in writer order)."""
        if not text or text.isspace():
            return self.texts
        if any(not label.strip() for label in labels) or not (labels or keep_unlabeled):
            return self.labels
        return self.ids or self.texts


def import_lines(src: Path, dest: Path, options: IngestOptions) -> Manifest:
    """Ingest the ``lines`` format from folder ``src`` into dataset folder ``dest``."""
    files = {split: SplitFiles.find(src, split) for split in SPLITS}
    map_path = src / "label_map.txt"
    has_map = optional_file(map_path, "lines") is not None
    label_map = read_label_map(map_path, parse_ids=False) if has_map else None
    inputs = [p for split in SPLITS for p in files[split].all()]
    if label_map is not None:
        inputs.append(map_path)
    with DatasetWriter(
        dest,
        kind="text",
        source=source_info("lines", src, inputs),
        policies=options.policies,
        rows_per_group=options.rows_per_group,
        overwrite=options.overwrite,
        grouped=_grouped(files["train"].ids),
    ) as ds:
        for split in SPLITS:
            _write_split(ds, split, files[split], options)
        if label_map is not None and label_map.texts is not None:
            ds.set_label_texts(label_map.texts)
    return manifest_of(ds)


def _grouped(ids: Path | None) -> bool:
    """Whether the first line of the training split's ids file has a second column."""
    if ids is None:
        return False
    with ids.open(encoding="utf-8", errors="replace") as f:
        first = f.readline().rstrip("\r\n").split("\t")
    return len(first) > 1 and bool(first[1].strip())


def _write_split(ds: DatasetWriter, split: str, files: SplitFiles, options: IngestOptions) -> None:
    writer = ds.split(split)
    keep_unlabeled = options.policies.on_unlabeled == "keep"
    separators = SeparatorCheck(files.labels, options.label_sep)
    for lineno, cols in iter_parallel(files.all()):
        text = cols[0]
        separators.see(cols[1])
        labels = split_labels(cols[1], options.label_sep)
        ids = cols[2].split("\t", 2) if files.ids else [f"{split}-{lineno:08d}"]
        group = (ids[1].strip() or None) if len(ids) > 1 else None
        blame = files.blame(text, labels, keep_unlabeled)
        writer.add(ids[0].strip(), text, labels, blame, lineno, group=group)
    stats = ds.close_split(split, files.texts)
    stats.files = [p.name for p in files.all()]
    separators.warn()
