"""PIFA (positive instance feature aggregation) label embeddings.

``Z = rownorm(Yᵀ · rownorm(X))``, computed as a sum of per-partition products so the corpus never
has to be in memory at once; and the weighted concatenation of several label feature blocks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from xmc_core.features import _pifa_kernels as kernels

CHUNKS = 64
"""Parallel tasks per kernel call (chunks of output rows of about equal work)."""


def pifa_partial(x: sp.csr_matrix, y: sp.csr_matrix) -> sp.csr_matrix:
    """One partition's term of PIFA: ``Yᵀ · rownorm(X)``, csr (n_labels, n_features) float64
    with sorted indices.

    ``x``: csr (n_docs, n_features); ``y``: csr (n_docs, n_labels) binary.
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"X has {x.shape[0]} rows but Y has {y.shape[0]}")
    x = sp.csr_matrix(x)
    x.sum_duplicates()
    yt = sp.csr_matrix(y.T)
    yt.sum_duplicates()
    lengths = np.diff(x.indptr)
    norms = np.sqrt(np.bincount(np.repeat(np.arange(x.shape[0]), lengths),
                                weights=np.asarray(x.data, dtype=np.float64) ** 2,
                                minlength=x.shape[0]))  # fmt: skip
    scale = 1.0 / np.where(norms > 0, norms, 1.0)
    bounds = _balanced_chunks(yt @ lengths.astype(np.float64))
    xs, yts = (x.indptr, x.indices, x.data), (yt.indptr, yt.indices, yt.data)
    sizes = kernels.label_sum_sizes(bounds, yts, xs, x.shape[1])
    indptr = np.zeros(yt.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    index_dtype = np.int32 if x.shape[1] < 2**31 else np.int64
    indices = np.empty(indptr[-1], dtype=index_dtype)
    data = np.empty(indptr[-1], dtype=np.float64)
    kernels.label_sums(bounds, yts, xs, scale, x.shape[1], indptr, indices, data)
    if indptr[-1] < 2**31:
        indptr = indptr.astype(np.int32)
    return sp.csr_matrix((data, indices, indptr), shape=(yt.shape[0], x.shape[1]))


def pifa(partials: Iterable[sp.csr_matrix]) -> sp.csr_matrix:
    """Sum per-partition terms and row-normalize: csr (n_labels, n_features) float32."""
    total: sp.csr_matrix | None = None
    for part in partials:
        total = part if total is None else total + part
    if total is None:
        raise ValueError("PIFA needs at least one partition")
    return normalize_rows_f32(total)


def concat_label_features(blocks: list[sp.csr_matrix], weights: list[float]) -> sp.csr_matrix:
    """Row-normalize each block, scale it by its weight, concatenate, row-normalize the whole
    (float32 csr; one block: just its normalized rows)."""
    if len(blocks) != len(weights):
        raise ValueError("one weight per block")
    if len(blocks) == 1:
        return normalize_rows_f32(blocks[0])
    scaled = [normalize_rows_f32(b) * w for b, w in zip(blocks, weights, strict=True)]
    return normalize_rows_f32(sp.hstack(scaled, format="csr"))


def normalize_rows_f32(m: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """Rows of ``m`` scaled to unit L2 norm (all-zero rows stay zero): a new float32 csr
    matrix sharing nothing with ``m``."""
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    bounds = _balanced_chunks(np.diff(m.indptr).astype(np.float64))
    data = kernels.normalized_rows(bounds, m.indptr, m.data)
    return sp.csr_matrix((data, m.indices.copy(), m.indptr.copy()), shape=m.shape)


def _balanced_chunks(work: np.ndarray) -> np.ndarray:
    """Bounds (int64) of at most ``CHUNKS`` contiguous row ranges of about equal ``work``."""
    n = work.size
    cumulative = np.cumsum(work)
    total = cumulative[-1] if n else 0.0
    if total <= 0:
        return np.array([0, n], dtype=np.int64)
    cuts = np.searchsorted(cumulative, total * np.arange(1, CHUNKS) / CHUNKS, side="right")
    return np.unique(np.r_[0, cuts, n]).astype(np.int64)
