"""Numba kernels that lay a level's weights out as beam chunks, and back
(:class:`xmc_core.linear.beam.ChunkedLevel`).

The weights come as *pieces*: (nodes, counts, rows, values), node after node, as the solver's
batches return them (a csc matrix is one piece). Building a level takes two passes, so that
nothing of the size of the weights exists besides the pieces and the chunks themselves: the
first counts each parent's distinct features (its chunk's size), the second sorts each
parent's weights by (feature, child) straight into the chunk arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def count_features(order, nodes, start, counts, rows, parent, n_rows, n_feat):
    """``n_feat[p]`` += the distinct rows among the weights of the piece's nodes under parent
    ``p`` (a parent's children all lie in this piece). The piece: ``nodes``/``counts`` int64,
    its nodes and their weights, whose rows are ``rows`` (int32) from ``start`` on;
    ``order``: the nodes grouped by parent."""
    mark = np.full(n_rows, -1, dtype=np.int64)
    for i in range(order.shape[0]):
        k = order[i]
        p = parent[nodes[k]]
        for w in range(start[k], start[k] + counts[k]):
            r = rows[w]
            if mark[r] != p:
                mark[r] = p
                n_feat[p] += 1


@njit(cache=True, parallel=True)
def fill_chunks(
    group_ptr, order, nodes, start, counts, rows, values, parent, rank, child_ptr, ent_ptr,
    feat_ptr, feat, entry_ptr, local, val,
):  # fmt: skip
    """Per parent of the piece (group g: the piece's nodes ``order[group_ptr[g]:group_ptr[g +
    1]]``, all the parent's children with weights): its weights sorted by (row, place among
    its siblings ``rank``) into ``local``/``val`` from ``ent_ptr[p]`` on, and each run of one
    row into ``feat``/``entry_ptr`` from ``feat_ptr[p]`` on. ``start``: each piece node's first
    weight in ``rows``/``values``."""
    for g in prange(group_ptr.shape[0] - 1):
        p = parent[nodes[order[group_ptr[g]]]]
        n_c = child_ptr[p + 1] - child_ptr[p]
        lo = ent_ptr[p]
        keys = np.empty(ent_ptr[p + 1] - lo, dtype=np.int64)
        vals = np.empty(keys.shape[0], dtype=np.float32)
        e = 0
        for i in range(group_ptr[g], group_ptr[g + 1]):
            k = order[i]
            j = rank[nodes[k]]
            for w in range(start[k], start[k] + counts[k]):
                keys[e], vals[e] = np.int64(rows[w]) * n_c + j, values[w]
                e += 1
        sort = np.argsort(keys)
        s = feat_ptr[p]
        for i in range(keys.shape[0]):
            key = keys[sort[i]]
            f = key // n_c
            local[lo + i], val[lo + i] = key % n_c, vals[sort[i]]
            if i == 0 or f != keys[sort[i - 1]] // n_c:
                feat[s], entry_ptr[s] = f, lo + i
                s += 1


@njit(cache=True)
def row_counts(feat, entry_ptr, n_rows):
    """Weights per feature (row of W) over every parent's chunk."""
    counts = np.zeros(n_rows, dtype=np.int64)
    for k in range(feat.shape[0]):
        counts[feat[k]] += entry_ptr[k + 1] - entry_ptr[k]
    return counts


@njit(cache=True)
def fill_rows(
    child_ptr, children, feat_ptr, feat, entry_ptr, local, val, first, stop, indptr, indices, data
):  # fmt: skip
    """Rows ``first..stop - 1`` of the chunks' weights into csr ``indptr`` (those rows', from
    0) / ``indices`` / ``data`` (unsorted within a row)."""
    pos = indptr[:-1].copy()
    for p in range(child_ptr.shape[0] - 1):
        lo, hi = feat_ptr[p], feat_ptr[p + 1]
        k = lo + np.searchsorted(feat[lo:hi], first)
        while k < hi and feat[k] < stop:
            r = feat[k] - first
            for e in range(entry_ptr[k], entry_ptr[k + 1]):
                indices[pos[r]] = children[child_ptr[p] + local[e]]
                data[pos[r]] = val[e]
                pos[r] += 1
            k += 1
