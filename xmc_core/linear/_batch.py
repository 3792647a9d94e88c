"""One batch of parents of a tree level: local blocks, sibling groups, the solve, kept weights.

:func:`train_batch` copies the batch's parents' rows into local blocks with renumbered features
(:func:`gather`), splits each parent's children into groups of up to ``LANES`` siblings solved
in lockstep (:func:`sibling_groups`, :mod:`xmc_core.linear._dual_cd`), solves the groups in parallel
chunks of bounded memory and keeps the weights above the threshold (:func:`kept`);
:func:`assemble` joins the batches' pieces into one level's W. :mod:`xmc_core.linear.solver`
plans the batches and holds the public API.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from xmc_core.linear import _solver_kernels as kernels
from xmc_core.progress import RateLog

CHUNK_SLOTS = 1 << 22
"""Soft cap on the weight slots (8 bytes each, before pruning) of the nodes solved at once."""


@dataclass(frozen=True)
class Level:
    """The validated inputs of one level, in the layouts the kernels read."""

    X: sp.csr_matrix  # (n_docs, n_features) float32, int32 indices, int64 indptr
    Y: sp.csc_matrix  # (n_docs, K) binary, sorted int64 indices
    R: sp.csc_matrix  # (n_docs, K) weights (empty when not given)
    M: sp.csc_matrix  # (n_docs, P) binary, sorted int64 indices
    parent: np.ndarray  # (K,) int64


def parent_entries(level: Level) -> np.ndarray:
    """Nonzeros of X over the documents of each parent: int64 (P,), the size of its block."""
    cumulative = offsets(np.diff(level.X.indptr)[level.M.indices])
    return cumulative[level.M.indptr[1:]] - cumulative[level.M.indptr[:-1]]


def segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[k], starts[k] + lengths[k])`` over k, as int64."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(np.asarray(starts, dtype=np.int64) - offsets, lengths) + np.arange(
        lengths.sum(), dtype=np.int64
    )


def offsets(counts: np.ndarray) -> np.ndarray:
    """(len(counts) + 1,) int64 prefix sums starting at 0."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def gather(level: Level, parents: np.ndarray) -> tuple[np.ndarray, ...]:
    """Local blocks of ``parents`` (n_b,): the ``local`` tuple of ``kernels.solve_jobs``."""
    X, M = level.X, level.M
    n_rows = np.diff(M.indptr)[parents]
    row_start = offsets(n_rows)
    docs = M.indices[segments(M.indptr[parents], n_rows)]
    indptr = offsets(np.diff(X.indptr)[docs])
    nnz = indptr[row_start[1:]] - indptr[row_start[:-1]]
    feat_start = offsets(np.minimum(nnz, X.shape[1]))
    marker = np.full(X.shape[1], -1, dtype=np.int32)
    idx = np.empty(indptr[-1], dtype=np.uint32)  # unsigned: no negative-index checks
    val = np.empty(indptr[-1], dtype=np.float32)
    sqnorm = np.empty(docs.size, dtype=np.float64)
    feat_map = np.empty(feat_start[-1], dtype=np.int32)
    n_local = np.zeros(parents.size, dtype=np.int64)
    kernels.gather_parents(
        row_start, docs, indptr, X.indptr, X.indices, X.data, feat_start, marker,
        idx, val, sqnorm, feat_map, n_local,
    )  # fmt: skip
    return row_start, docs, indptr, idx, val, sqnorm, feat_start, n_local, feat_map


def sibling_groups(level: Level, slot_of_parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sibling groups of a batch: (slot int64 (G,), nodes int64 (G, LANES), -1 padded).

    The children of each parent (in node order) are split evenly into groups of at most
    ``LANES``; a level with a single parent (the root) splits its children into at least two
    groups, so two threads share it. The split depends on the tree only, not on the batches
    or the thread count.
    """
    nodes = np.flatnonzero(slot_of_parent[level.parent] >= 0)
    slots = slot_of_parent[level.parent[nodes]]
    order = np.argsort(slots, kind="stable")
    nodes, slots = nodes[order], slots[order]
    single_parent = level.M.shape[1] == 1
    slot_list, rows = [], []
    for part in np.split(np.arange(nodes.size), np.flatnonzero(np.diff(slots)) + 1):
        if part.size == 0:
            continue
        n_groups = -(-part.size // kernels.LANES)
        if single_parent:
            n_groups = max(n_groups, min(part.size, 2))
        for members in np.array_split(part, n_groups):
            row = np.full(kernels.LANES, -1, dtype=np.int64)
            row[: members.size] = nodes[members]
            rows.append(row)
            slot_list.append(slots[members[0]])
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, kernels.LANES), dtype=np.int64)
    return np.array(slot_list, dtype=np.int64), np.stack(rows)


def train_batch(
    level: Level, parents: np.ndarray, params: tuple, progress: RateLog
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train the children of ``parents``; returns (nodes, counts, rows, values) in job order.
    Counts the nodes solved into ``progress``."""
    local = gather(level, parents)
    row_start, indptr, n_local = local[0], local[2], local[7]
    slot_of_parent = np.full(level.M.shape[1], -1, dtype=np.int64)
    slot_of_parent[parents] = np.arange(parents.size)
    slots, nodes = sibling_groups(level, slot_of_parent)
    lanes = np.count_nonzero(nodes >= 0, axis=1)
    # Largest problems first, so the dynamic schedule balances the threads.
    work = (indptr[row_start[1:]] - indptr[row_start[:-1]])[slots] * lanes
    order = np.argsort(-work, kind="stable")
    slots, nodes, lanes, work = slots[order], nodes[order], lanes[order], work[order]
    labels = (level.Y.indptr, level.Y.indices, level.R.indptr, level.R.indices, level.R.data)
    # Each group's weights are (n_local + 1) x width float32 before pruning: solve the groups in
    # chunks of about CHUNK_SLOTS of them, so a parent with many children and a large feature
    # set does not need them all at once; the kept weights are copied out after every chunk.
    width = np.where(lanes <= 8, lanes, kernels.LANES)
    size = (n_local[slots] + 1) * width
    chunk_id = offsets(size)[:-1] // CHUNK_SLOTS
    results = []
    for chunk in np.split(np.arange(slots.size), np.flatnonzero(np.diff(chunk_id)) + 1):
        w_start = offsets(size[chunk])
        weights = np.zeros(w_start[-1], dtype=np.float32)
        groups = (slots[chunk], parents[slots[chunk]], nodes[chunk], w_start[:-1])
        with numba.parallel_chunksize(1):
            kernels.solve_groups(groups, local, labels, params, weights)
        results.append(kept(groups, local, params, weights))
        progress.update(int(lanes[chunk].sum()), work=int(work[chunk].sum()))
    joined = [np.concatenate(parts) for parts in zip(*results, strict=True)]
    return joined[0], joined[1], joined[2], joined[3]


def kept(
    groups: tuple[np.ndarray, ...],
    local: tuple[np.ndarray, ...],
    params: tuple,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(nodes, counts, rows, values) of the weights the solved ``groups`` keep."""
    nodes = groups[2]
    member = nodes >= 0
    counts = np.zeros(nodes.shape, dtype=np.int64)
    none = np.zeros(0, dtype=np.int32)
    kernels.kept_weights(
        groups, local, params, weights, counts, none, none.view(np.float32), counts
    )
    start = offsets(counts.ravel())
    out_idx = np.empty(start[-1], dtype=np.int32)
    out_val = np.empty(start[-1], dtype=np.float32)
    out_start = start[:-1].reshape(counts.shape)
    kernels.kept_weights(groups, local, params, weights, out_start, out_idx, out_val, counts)
    return nodes[member], counts[member], out_idx, out_val


def assemble(pieces: list[tuple[np.ndarray, ...]], n_rows: int, n_nodes: int) -> sp.csc_matrix:
    """Stack the batches' (nodes, counts, rows, values) into W: csc (n_rows, n_nodes)."""
    if not pieces:
        return sp.csc_matrix((n_rows, n_nodes), dtype=np.float32)
    nodes, counts, rows, values = (np.concatenate(parts) for parts in zip(*pieces, strict=True))
    order = np.argsort(nodes, kind="stable")
    take = segments((np.cumsum(counts) - counts)[order], counts[order])
    per_node = np.zeros(n_nodes, dtype=np.int64)
    per_node[nodes] = counts
    indptr = offsets(per_node)
    index_dtype = np.int32 if indptr[-1] < 2**31 else np.int64
    W = sp.csc_matrix(
        (values[take], rows[take].astype(index_dtype), indptr.astype(index_dtype)),
        shape=(n_rows, n_nodes),
    )
    W.sort_indices()  # local features are numbered in order of first appearance
    return W
