"""PIFA (positive instance feature aggregation) label embeddings.

``Z = rownorm(rownorm(Y)ᵀ · rownorm(X))``, as PECOS defines it (``normalized_Y``): a document's
labels share its weight, 1/sqrt(its label count) each, so a document tagged with many labels pulls
each of their centroids less than a document with one (on validation carves of the shared
datasets, medians of 3 seeds, XR-Linear's P@1 +0.72 on bibtex-bow, +0.31 on delicious-bow, even
on reuters and debian-deps: ``benchmarks/xr_linear_causes.py``). Computed as a sum of
per-partition products so the corpus never has to be in memory at once; and the weighted
concatenation of several label feature blocks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from xmc_core.features import _pifa_kernels as kernels

CHUNKS = 64
"""Parallel tasks per kernel call (chunks of output rows of about equal work)."""


def pifa_partial(x: sp.csr_matrix, y: sp.csr_matrix) -> sp.csr_matrix:
    """One partition's term of PIFA: ``rownorm(Y)ᵀ · rownorm(X)``, csr (n_labels, n_features)
    float64 with sorted indices (each document's row of ``y`` scaled to unit L2 norm).

    ``x``: csr (n_docs, n_features); ``y``: csr (n_docs, n_labels) binary.
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"X has {x.shape[0]} rows but Y has {y.shape[0]}")
    x, y = sp.csr_matrix(x), sp.csr_matrix(y)
    x.sum_duplicates()
    if not y.has_canonical_format:  # the caller's labels stay as they are
        y = y.copy()
        y.sum_duplicates()
    yt = sp.csr_matrix(y.T)
    lengths = np.diff(x.indptr)
    scale = 1.0 / (_row_norms(x) * _row_norms(y))
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


def _row_norms(m: sp.csr_matrix) -> np.ndarray:
    """L2 norm of each row of ``m`` (csr without duplicates), float64; 1 for an all-zero row."""
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    squares = np.bincount(rows, weights=np.asarray(m.data, np.float64) ** 2, minlength=m.shape[0])
    return np.where(squares > 0, np.sqrt(squares), 1.0)


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
