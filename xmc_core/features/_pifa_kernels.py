"""Numba kernels of PIFA (used by :mod:`xmc_core.features.pifa`): the label sums of scaled
document rows and row normalization, in parallel over chunks of output rows."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

Array = np.ndarray
Csr = tuple[Array, Array, Array]  # (indptr, indices, data)


@njit(cache=True, parallel=True)
def label_sum_sizes(bounds: Array, yt: Csr, x: Csr, n_cols: int) -> Array:
    """Distinct columns of each output row ``sum_{i in row l of yt} x_i``: int64 (n_rows,).

    ``bounds``: int64 chunk bounds over the output rows (one chunk per parallel task).
    """
    yt_indptr, yt_indices = yt[0], yt[1]
    x_indptr, x_indices = x[0], x[1]
    sizes = np.zeros(yt_indptr.size - 1, dtype=np.int64)
    for q in prange(bounds.size - 1):
        marker = np.full(n_cols, -1, dtype=np.int64)
        for row in range(bounds[q], bounds[q + 1]):
            n = 0
            for t in range(yt_indptr[row], yt_indptr[row + 1]):
                i = yt_indices[t]
                for e in range(x_indptr[i], x_indptr[i + 1]):
                    f = x_indices[e]
                    if marker[f] != row:
                        marker[f] = row
                        n += 1
            sizes[row] = n
    return sizes


@njit(cache=True, parallel=True)
def label_sums(
    bounds: Array, yt: Csr, x: Csr, scale: Array, n_cols: int,
    indptr: Array, indices: Array, data: Array,
) -> None:  # fmt: skip
    """Row l of the output = ``sum_i yt[l, i] * scale[i] * x_i`` in float64, written from
    ``indptr[l]`` (sizes from :func:`label_sum_sizes`) with sorted column indices."""
    yt_indptr, yt_indices, yt_data = yt
    x_indptr, x_indices, x_data = x
    for q in prange(bounds.size - 1):
        marker = np.full(n_cols, -1, dtype=np.int64)
        acc = np.zeros(n_cols)
        for row in range(bounds[q], bounds[q + 1]):
            start, end = indptr[row], indptr[row + 1]
            pos = start
            for t in range(yt_indptr[row], yt_indptr[row + 1]):
                i = yt_indices[t]
                a = np.float64(yt_data[t]) * scale[i]
                for e in range(x_indptr[i], x_indptr[i + 1]):
                    f = x_indices[e]
                    if marker[f] != row:
                        marker[f] = row
                        acc[f] = 0.0
                        indices[pos] = f
                        pos += 1
                    acc[f] += a * np.float64(x_data[e])
            indices[start:end].sort()
            for p in range(start, end):
                data[p] = acc[indices[p]]


@njit(cache=True, parallel=True)
def normalized_rows(bounds: Array, indptr: Array, data: Array) -> Array:
    """float32 copy of ``data`` with every csr row scaled to unit L2 norm (norms in float64;
    all-zero rows stay zero)."""
    out = np.empty(data.size, dtype=np.float32)
    for q in prange(bounds.size - 1):
        for row in range(bounds[q], bounds[q + 1]):
            sq = 0.0
            for p in range(indptr[row], indptr[row + 1]):
                sq += np.float64(data[p]) * np.float64(data[p])
            inv = 1.0 / np.sqrt(sq) if sq > 0.0 else 1.0
            for p in range(indptr[row], indptr[row + 1]):
                out[p] = data[p] * inv
    return out
