"""The corpus format: Parquet schemas and the dataset manifest.

A dataset is a folder::

    train.parquet   doc_id: string, text: string (null for bag-of-words corpora),
    test.parquet    labels: list<string>[, feature_ids: list<int32>, feature_values: list<float32>]
                    [, group: string]
    labels.parquet  (optional) label: string, text: string (nullable): label texts
    manifest.json   row counts, label counts, content fingerprint, source, created-at

``train.parquet`` may also be a folder of Parquet files with that schema; any number of row
groups. Every row group is one partition of the featurization stage.

``group`` (optional, in every file of a corpus or in none): documents that belong together, e.g.
the packages built from one source, the pages of one site. A corpus whose test split holds whole
groups apart from its training split should carry them: the calibration carve then holds out
whole groups too (``calibration.by_group``), so that it is as far from the training documents
as the test split is.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = 1
SPLITS = ("train", "test")

TEXT_FIELDS = [
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=True),
    pa.field("labels", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False),
]
GROUP_FIELD = pa.field("group", pa.string(), nullable=False)
BOW_FIELDS = [
    pa.field("feature_ids", pa.list_(pa.field("item", pa.int32(), nullable=False))),
    pa.field("feature_values", pa.list_(pa.field("item", pa.float32(), nullable=False))),
]
LABELS_SCHEMA = pa.schema(
    [pa.field("label", pa.string(), nullable=False), pa.field("text", pa.string(), nullable=True)]
)


def corpus_schema(kind: Literal["text", "bow"], grouped: bool = False) -> pa.Schema:
    """The Parquet schema of a split: text corpora carry text, bag-of-words corpora features;
    a ``grouped`` corpus each document's group."""
    bow = BOW_FIELDS if kind == "bow" else []
    return pa.schema(TEXT_FIELDS + bow + ([GROUP_FIELD] if grouped else []))


class Policies(BaseModel):
    """What an importer does with documents that are empty or carry no label."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_empty: Literal["error", "drop"] = "error"
    on_unlabeled: Literal["error", "drop", "keep"] = "error"


class SplitStats(BaseModel):
    """What went into one split."""

    model_config = ConfigDict(extra="forbid")

    rows: int = 0
    label_assignments: int = 0
    distinct_labels: int = 0
    dropped_empty: int = 0
    dropped_unlabeled: int = 0
    kept_unlabeled: int = 0
    duplicate_labels_removed: int = 0
    files: list[str] = Field(default_factory=list)


class Lineage(BaseModel):
    """Which corpus a dataset descends from (see :mod:`xmc_core.corpus.lineage`).

    ``name``: the dataset it started as (``reuters``, ``synthetic``; names the registered
    model); ``root``: that corpus's fingerprint; ``drops``: landing drops taken in since. Two
    corpora of one lineage (same ``name`` and ``root``) share a label space a gate may compare.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    root: str = Field(pattern=r"^[0-9a-f]{16,64}$")
    drops: int = Field(0, ge=0)


class Manifest(BaseModel):
    """``manifest.json`` of a dataset folder."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    kind: Literal["text", "bow"]
    n_features: int | None = None
    splits: dict[str, SplitStats]
    n_labels: int
    n_labels_total: int
    unseen_test_labels: int
    unseen_test_assignments: int
    unseen_test_examples: list[str] = Field(default_factory=list)
    has_label_texts: bool = False
    fingerprint: str
    source: dict[str, object]
    policies: Policies
    created_at: str
    lineage: Lineage | None = None
    """None in manifests written before lineages were recorded (derived on read)."""
