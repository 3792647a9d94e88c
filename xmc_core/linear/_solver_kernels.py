"""Numba kernels of the per-level linear rankers (used by :mod:`xmc_core.linear.solver`).

Two kernels work on one *batch* of parents:

- :func:`gather_parents` copies the rows of each parent into a local CSR block whose features
  are renumbered 0..d_p-1 (in order of first appearance), with the rows' squared norms;
- :func:`solve_groups` trains the child nodes, a *group* of siblings at a time (in parallel
  over groups): each group's binary problems are solved together on their parent's block by
  :mod:`xmc_core.linear._dual_cd` (liblinear's dual coordinate descent, one lane per node),
  then the kept weights of every node are written as (global row, value) pairs.

The rows of a parent are visited in an order drawn from (seed, parent), the same for every
child, and each lane's arithmetic is its own: a node's weights depend neither on the number of
threads, nor on how parents are batched, nor on which siblings share its group.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from xmc_core.linear import _dual_cd

Array = np.ndarray

SQUARED_HINGE = 0
LOGISTIC = 1
LANES = 16
"""Most sibling nodes solved together (one lane each)."""


@njit(cache=True)
def gather_parents(
    row_start: Array,
    docs: Array,
    indptr: Array,
    x_indptr: Array,
    x_indices: Array,
    x_data: Array,
    feat_start: Array,
    marker: Array,
    idx: Array,
    val: Array,
    sqnorm: Array,
    feat_map: Array,
    n_local: Array,
) -> None:
    """Fill the local CSR blocks of a batch of parents (one pass over their entries).

    Parent slot b owns rows ``row_start[b]:row_start[b+1]`` (documents ``docs``, entries
    ``indptr[r]:indptr[r+1]`` of ``idx``/``val``) and the feature map
    ``feat_map[feat_start[b]:feat_start[b] + n_local[b]]`` (local -> global, in order of
    first appearance). ``marker``: int32 (n_features,), all -1 on entry and on exit.
    """
    for b in range(row_start.size - 1):
        fs = feat_start[b]
        nd = 0
        for r in range(row_start[b], row_start[b + 1]):
            i = docs[r]
            pos = indptr[r]
            sq = 0.0
            for e in range(x_indptr[i], x_indptr[i + 1]):
                f = x_indices[e]
                if marker[f] < 0:
                    marker[f] = nd
                    feat_map[fs + nd] = f
                    nd += 1
                idx[pos] = marker[f]
                v = np.float64(x_data[e])
                val[pos] = x_data[e]
                sq += v * v
                pos += 1
            sqnorm[r] = sq
        for k in range(nd):
            marker[feat_map[fs + k]] = -1
        n_local[b] = nd


@njit(cache=True, error_model="numpy")
def _group_examples(
    docs: Array, r0: int, r1: int, nodes: Array, labels: tuple[Array, ...],
    cp: float, cn: float, width: int,
) -> tuple[Array, Array]:  # fmt: skip
    """Labels and costs of a group's lanes on rows ``r0:r1`` (``docs`` sorted within them).

    ``nodes``: the group's node ids (lane c trains node ``nodes[c]``); ``labels`` = csc
    arrays of Y then R (y_indptr, y_indices, r_indptr, r_indices, r_data). Returns
    y: int8 (n, width) +-1 and cost: float32 (n, width), Cp or Cn times the pair's importance
    weight; lanes past ``nodes.size`` (padding) cost 0.
    """
    y_indptr, y_indices, r_indptr, r_indices, r_data = labels
    n = r1 - r0
    y = np.full((n, width), -1, dtype=np.int8)
    cost = np.zeros((n, width), dtype=np.float32)
    for c in range(nodes.size):
        j = nodes[c]
        cost[:, c] = cn
        k = 0
        for t in range(y_indptr[j], y_indptr[j + 1]):
            while k < n and docs[r0 + k] < y_indices[t]:
                k += 1
            if k < n and docs[r0 + k] == y_indices[t]:
                y[k, c] = 1
                cost[k, c] = cp
        k = 0
        for t in range(r_indptr[j], r_indptr[j + 1]):
            while k < n and docs[r0 + k] < r_indices[t]:
                k += 1
            if k < n and docs[r0 + k] == r_indices[t]:
                cost[k, c] *= r_data[t]
    return y, cost


@njit(cache=True)
def group_width(size: int) -> int:
    """Lanes of a group of ``size`` nodes: groups of more than 8 are padded to ``LANES`` (the
    lane loops vectorize best at a full width)."""
    return size if size <= 8 else LANES


@njit(cache=True)
def _group_weights(weights: Array, start: int, n_rows: int, size: int) -> Array:
    """The (n_rows, width) float32 weight matrix of a group, a view into ``weights``."""
    width = group_width(size)
    return weights[start : start + n_rows * width].reshape((n_rows, width))


@njit(cache=True, parallel=True)
def solve_groups(
    groups: tuple[Array, Array, Array, Array],
    local: tuple[Array, ...],
    labels: tuple[Array, ...],
    params: tuple[int, int, int, int, float, float, float, float, float],
    weights: Array,
) -> None:
    """Train groups of sibling nodes of a batch of parents, in parallel over groups.

    ``groups`` = (slot, parent, nodes, w_start): slot int64 (G,) the parent slot of each
    group, parent int64 (G,) the parent's id (it seeds the rows' visiting order, so every
    child of a parent sees the same order whatever its group); nodes int64 (G, LANES) its
    node ids, -1 past its size; w_start int64 (G,) where its weights start in ``weights``
    (float32, zeros on entry): (n_local + 1) x :func:`group_width` of them, a row per local
    feature and the bias row last. ``local`` = (row_start, docs, indptr, idx, val, sqnorm,
    feat_start, n_local, feat_map) from :func:`gather_parents`; ``labels`` = csc arrays of Y
    then R; ``params`` = (loss, max_iter, seed, n_features, cp, cn, eps, bias, threshold).
    """
    slot, parent, nodes, w_start = groups
    row_start, docs, indptr, idx, val, sqnorm, _, n_local, _ = local
    loss, max_iter, seed, _, cp, cn, eps, bias, _ = params
    data = (indptr, idx, val, sqnorm)
    for g in prange(slot.size):
        b = slot[g]
        size = np.count_nonzero(nodes[g] >= 0)
        W = _group_weights(weights, w_start[g], n_local[b] + 1, size)
        r0, r1 = row_start[b], row_start[b + 1]
        y, cost = _group_examples(docs, r0, r1, nodes[g, :size], labels, cp, cn, W.shape[1])
        state = _dual_cd.seed_state(seed, parent[g])
        if loss == LOGISTIC:
            _dual_cd.logistic(data, r0, y, cost, bias, W, max_iter, eps, state)
        else:
            _dual_cd.l2_svm(data, r0, y, cost, bias, W, max_iter, eps, state)


@njit(cache=True, parallel=True)
def kept_weights(
    groups: tuple[Array, Array, Array, Array],
    local: tuple[Array, ...],
    params: tuple[int, int, int, int, float, float, float, float, float],
    weights: Array,
    out_start: Array,
    out_idx: Array,
    out_val: Array,
    out_count: Array,
) -> None:
    """The weights each node keeps (|w| >= threshold, w != 0), after :func:`solve_groups`.

    With ``out_idx`` empty, only counts them: ``out_count`` int64 (G, LANES). Otherwise
    writes lane c of group g from ``out_start[g, c]``: global rows (local feature k is
    ``feat_map[feat_start + k]``, the bias row ``n_features``) and values.
    """
    slot, _, nodes, w_start = groups
    feat_start, n_local, feat_map = local[6], local[7], local[8]
    n_features, bias, threshold = params[3], params[7], params[8]
    write = out_idx.size > 0
    for g in prange(slot.size):
        b = slot[g]
        size = np.count_nonzero(nodes[g] >= 0)
        W = _group_weights(weights, w_start[g], n_local[b] + 1, size)
        d = W.shape[0] - 1
        for c in range(size):
            pos = out_start[g, c] if write else 0
            for k in range(d + 1):
                v = W[k, c]
                if v == 0.0 or abs(v) < threshold or (k == d and bias <= 0.0):
                    continue
                if write:
                    out_idx[pos] = feat_map[feat_start[b] + k] if k < d else n_features
                    out_val[pos] = v
                pos += 1
            if not write:
                out_count[g, c] = pos
