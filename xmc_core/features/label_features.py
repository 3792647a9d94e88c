"""Label features for clustering: PIFA, label-text TF-IDF, and their concatenation.

PIFA itself lives in :mod:`xmc_core.features.pifa` (re-exported here).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.features.labels import LabelIndex
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.storage.artifacts import load_csr, meta_fields, read_meta, save_csr, write_meta

__all__ = ["LabelFeatures", "concat_label_features", "pifa", "pifa_partial"]


class LabelFeatures:
    """Label feature matrix ``Z``: csr (n_labels, n_dims), rows L2-normalized."""

    def __init__(self, z: sp.csr_matrix, kind: str) -> None:
        self.z = sp.csr_matrix(z)
        self.kind = kind

    def save(self, folder: str | Path) -> None:
        """Write ``Z.npz`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_csr(folder / "Z.npz", self.z)
        write_meta(folder, "LabelFeatures", {"kind": self.kind, "shape": list(self.z.shape)})

    @classmethod
    def load(cls, folder: str | Path) -> LabelFeatures:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "LabelFeatures")
        with meta_fields(folder):
            kind = str(meta["kind"])
        return cls(load_csr(folder / "Z.npz"), kind)


def label_text_matrix(
    vectorizer: TfidfVectorizer, index: LabelIndex, texts: pa.Table
) -> sp.csr_matrix:
    """TF-IDF of each label's text, csr (n_labels, n_features); labels without text are zero rows.

    ``texts``: table with columns ``label`` and ``text`` (nullable), any order.
    """
    pos = pc.index_in(index.names, value_set=texts.column("label").cast(pa.large_string()))
    aligned = texts.column("text").combine_chunks().take(pos)
    return vectorizer.transform(aligned)
