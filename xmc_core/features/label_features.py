"""Label features for clustering: PIFA, label-text TF-IDF, and their concatenation.

PIFA (positive instance feature aggregation): ``Z = rownorm(Yᵀ · rownorm(X))``, computed as a
sum of per-partition products so the corpus never has to be in memory at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.artifacts import load_csr, read_meta, save_csr, write_meta
from xmc_core.features.labels import LabelIndex
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.features.tfidf import TfidfVectorizer


def pifa_partial(x: sp.csr_matrix, y: sp.csr_matrix) -> sp.csr_matrix:
    """One partition's term of PIFA: ``Yᵀ · rownorm(X)``, csr (n_labels, n_features) float64.

    ``x``: csr (n_docs, n_features); ``y``: csr (n_docs, n_labels) binary.
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"X has {x.shape[0]} rows but Y has {y.shape[0]}")
    return sp.csr_matrix(y.T.astype(np.float64) @ l2_normalize_rows(x))


def pifa(partials: Iterable[sp.csr_matrix]) -> sp.csr_matrix:
    """Sum per-partition terms and row-normalize: csr (n_labels, n_features) float32."""
    total: sp.csr_matrix | None = None
    for part in partials:
        total = part if total is None else total + part
    if total is None:
        raise ValueError("PIFA needs at least one partition")
    return l2_normalize_rows(total).astype(np.float32)


def concat_label_features(blocks: list[sp.csr_matrix], weights: list[float]) -> sp.csr_matrix:
    """Row-normalize each block, scale it by its weight, concatenate, row-normalize the whole."""
    if len(blocks) != len(weights):
        raise ValueError("one weight per block")
    scaled = [l2_normalize_rows(b) * w for b, w in zip(blocks, weights, strict=True)]
    return l2_normalize_rows(sp.hstack(scaled, format="csr")).astype(np.float32)


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
        return cls(load_csr(folder / "Z.npz"), meta["kind"])


def label_text_matrix(
    vectorizer: TfidfVectorizer, index: LabelIndex, texts: pa.Table
) -> sp.csr_matrix:
    """TF-IDF of each label's text, csr (n_labels, n_features); labels without text are zero rows.

    ``texts``: table with columns ``label`` and ``text`` (nullable), any order.
    """
    pos = pc.index_in(index.names, value_set=texts.column("label").cast(pa.large_string()))
    aligned = texts.column("text").combine_chunks().take(pos)
    return vectorizer.transform(aligned)
