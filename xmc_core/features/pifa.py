"""PIFA (positive instance feature aggregation) label embeddings, in numpy/scipy only.

``Z = rownorm(Yᵀ · rownorm(X))``, computed as a sum of per-partition products so the corpus never
has to be in memory at once; and the weighted concatenation of several label feature blocks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from xmc_core.features.normalize import l2_normalize_rows


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
