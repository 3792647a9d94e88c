"""The featurized form of one split: TF-IDF rows, label matrix and document ids."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.storage.artifacts import (
    load_csr,
    load_strings,
    meta_fields,
    read_meta,
    save_csr,
    save_strings,
    write_meta,
)


@dataclass(frozen=True)
class SplitFeatures:
    """``X``: csr (n_docs, n_features) float32; ``Y``: csr (n_docs, n_labels) binary float32;
    ``doc_ids``: string (n_docs,); ``unknown_labels``: label assignments outside the label index.
    """

    X: sp.csr_matrix
    Y: sp.csr_matrix
    doc_ids: pa.Array
    unknown_labels: int = 0

    def __post_init__(self) -> None:
        n = self.X.shape[0]
        if self.Y.shape[0] != n or len(self.doc_ids) != n:
            raise ValueError(
                f"row counts differ: X {n}, Y {self.Y.shape[0]}, ids {len(self.doc_ids)}"
            )

    def with_X(self, X: sp.csr_matrix) -> SplitFeatures:
        """The same documents and labels with other features ``X`` (n_docs, d')."""
        return dataclasses.replace(self, X=X)

    def take(self, rows: np.ndarray) -> SplitFeatures:
        """The documents ``rows`` (int, in that order); unknown labels are not counted."""
        ids = self.doc_ids.take(pa.array(rows, type=pa.int64()))
        return SplitFeatures(self.X[rows], self.Y[rows], ids)

    @staticmethod
    def concat(parts: list[SplitFeatures]) -> SplitFeatures:
        """Stack partitions in order."""
        return SplitFeatures(
            sp.vstack([p.X for p in parts], format="csr"),
            sp.vstack([p.Y for p in parts], format="csr"),
            pa.concat_arrays([p.doc_ids.cast(pa.large_string()) for p in parts]),
            sum(p.unknown_labels for p in parts),
        )

    def save(self, folder: str | Path) -> None:
        """Write ``X.npz``, ``Y.npz``, ``doc_ids.parquet`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_csr(folder / "X.npz", self.X)
        save_csr(folder / "Y.npz", self.Y)
        save_strings(folder / "doc_ids.parquet", self.doc_ids)
        write_meta(
            folder,
            "SplitFeatures",
            {
                "n_docs": self.X.shape[0],
                "n_features": self.X.shape[1],
                "n_labels": self.Y.shape[1],
                "nnz": int(self.X.nnz),
                "unknown_labels": self.unknown_labels,
            },
        )

    @classmethod
    def load(cls, folder: str | Path) -> SplitFeatures:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "SplitFeatures")
        with meta_fields(folder):
            unknown = int(meta["unknown_labels"])
        return cls(
            load_csr(folder / "X.npz"),
            load_csr(folder / "Y.npz"),
            load_strings(folder / "doc_ids.parquet"),
            unknown,
        )
