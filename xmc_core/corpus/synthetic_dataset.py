"""Write the embedded synthetic corpus as a dataset folder."""

from __future__ import annotations

from pathlib import Path

from xmc_core.corpus.lineage import SYNTHETIC
from xmc_core.corpus.schema import Manifest
from xmc_core.corpus.synthetic import SyntheticSpec, generate_split, label_texts
from xmc_core.corpus.writer import DEFAULT_ROWS_PER_GROUP, DatasetWriter


def write_synthetic_dataset(
    dest: str | Path,
    spec: SyntheticSpec,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    overwrite: bool = False,
) -> Manifest:
    """Generate ``spec``'s train and test splits and label texts into ``dest`` (atomically)."""
    source = {"format": "synthetic", "spec": {k: v for k, v in vars(spec).items()}}
    with DatasetWriter(
        dest, kind="text", source=source, rows_per_group=rows_per_group, overwrite=overwrite,
        lineage=SYNTHETIC,
    ) as ds:  # fmt: skip
        for split in ("train", "test"):
            writer = ds.split(split)
            for row, doc in enumerate(generate_split(spec, split), 1):
                writer.add(doc.doc_id, doc.text, doc.labels, f"synthetic:{split}", row)
            ds.close_split(split, f"synthetic:{split}")
        ds.set_label_texts(dict(label_texts(spec)))
    assert ds.manifest is not None
    return ds.manifest
