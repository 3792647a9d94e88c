"""Numba kernels of the beam search (:mod:`xmc_core.linear.beam`): one level's scores.

Every (document, beam parent) pair scores the parent's children: ``w . x`` summed over the
document's features found in the parent's chunk (its sorted features). The pairs are grouped by
parent. A parent that many pairs visit writes its chunk's features into a dense table
(feature -> slot) once and finds each document feature in one read. A parent that few pairs
visit is searched per document (binary search from the last slot found). Both find the same
slots and add the same float32 products in the same order: the document's features in
increasing order, the bias last. So a score is the same bit for bit whichever way its parent
goes, and whichever documents share the call (the split of a batch never changes a result).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

Array = np.ndarray


@njit(cache=True, inline="always")
def _transform(score: float, kind: int) -> float:
    if kind == 1:
        return 1.0 / (1.0 + np.exp(-score))
    if kind == 2:
        v = 1.0 - score
        v = v if v > 0.0 else 0.0
        return np.exp(-v * v * v)
    return score


@njit(cache=True)
def _slot_offsets(par_ids: Array, child_ptr: Array) -> Array:
    """(n * b + 1,) int64: where the children of beam slot (i, b) start among the raw scores."""
    n, b_in = par_ids.shape
    out = np.zeros(n * b_in + 1, dtype=np.int64)
    for i in range(n):
        for b in range(b_in):
            p = par_ids[i, b]
            kids = 0 if p < 0 else child_ptr[p + 1] - child_ptr[p]
            out[i * b_in + b + 1] = out[i * b_in + b] + kids
    return out


@njit(cache=True)
def _pairs_by_parent(par_ids: Array, n_parents: int) -> tuple[Array, Array]:
    """(pair_ptr (P + 1,), slots): the beam slots ``i * b + b'`` of each parent, in slot order."""
    n, b_in = par_ids.shape
    pair_ptr = np.zeros(n_parents + 1, dtype=np.int64)
    for i in range(n):
        for b in range(b_in):
            if par_ids[i, b] >= 0:
                pair_ptr[par_ids[i, b] + 1] += 1
    for p in range(n_parents):
        pair_ptr[p + 1] += pair_ptr[p]
    fill = pair_ptr[:-1].copy()
    slots = np.empty(pair_ptr[-1], dtype=np.int64)
    for i in range(n):
        for b in range(b_in):
            p = par_ids[i, b]
            if p >= 0:
                slots[fill[p]] = i * b_in + b
                fill[p] += 1
    return pair_ptr, slots


@njit(cache=True, inline="always")
def _searched(xi, xv, lo, hi, acc, feat, entry_ptr, local, val):  # type: ignore[no-untyped-def]
    """acc[local child] += w . x over the features of x found in feat[lo:hi] (binary search)."""
    for k in range(xi.shape[0]):
        if lo >= hi:
            break
        pos = lo + np.searchsorted(feat[lo:hi], xi[k])
        if pos < hi and feat[pos] == xi[k]:
            for e in range(entry_ptr[pos], entry_ptr[pos + 1]):
                acc[local[e]] += val[e] * xv[k]
            lo = pos + 1


@njit(cache=True, inline="always")
def _looked_up(xi, xv, table, acc, entry_ptr, local, val):  # type: ignore[no-untyped-def]
    """acc[local child] += w . x over the features of x that ``table`` maps to a slot."""
    for k in range(xi.shape[0]):
        pos = table[xi[k]]
        if pos >= 0:
            for e in range(entry_ptr[pos], entry_ptr[pos + 1]):
                acc[local[e]] += val[e] * xv[k]


@njit(cache=True)
def _one_parent(
    p, first, stop, slots, b_in, slot_off, raw, table, x_ptr, x_idx, x_val, bias,
    child_ptr, feat_ptr, feat, entry_ptr, local, val, n_features, table_cost,
):  # type: ignore[no-untyped-def]  # fmt: skip
    """The raw scores of parent ``p``'s children for its pairs ``slots[first:stop]``."""
    lo, hi = feat_ptr[p], feat_ptr[p + 1]
    n_child = child_ptr[p + 1] - child_ptr[p]
    entries = 0
    for s in range(first, stop):
        i = slots[s] // b_in
        entries += x_ptr[i + 1] - x_ptr[i]
    use_table = entries * np.log2(hi - lo + 1.0) > table_cost * (hi - lo)
    if use_table:
        for j in range(lo, hi):
            table[feat[j]] = j
    has_bias = hi > lo and feat[hi - 1] == n_features
    for s in range(first, stop):
        i = slots[s] // b_in
        acc = raw[slot_off[slots[s]] : slot_off[slots[s]] + n_child]
        xi, xv = x_idx[x_ptr[i] : x_ptr[i + 1]], x_val[x_ptr[i] : x_ptr[i + 1]]
        if use_table:
            _looked_up(xi, xv, table, acc, entry_ptr, local, val)
        else:
            _searched(xi, xv, lo, hi, acc, feat, entry_ptr, local, val)
        if has_bias:
            for e in range(entry_ptr[hi - 1], entry_ptr[hi]):
                acc[local[e]] += val[e] * bias
    if use_table:
        for j in range(lo, hi):
            table[feat[j]] = -1


@njit(cache=True, parallel=True)
def score_level(
    x_ptr, x_idx, x_val, bias, child_ptr, children, feat_ptr, feat, entry_ptr, local, val,
    par_ids, par_scores, width, kind, n_features, blocks, table_cost,
):  # type: ignore[no-untyped-def]  # fmt: skip
    """For each doc: score the children of its beam parents, keep the best ``width``.

    par_ids/par_scores: (n, b_in) beam of the previous level (-1 = empty slot).
    ``blocks``: how many parallel tasks share the parents (each holds one feature table); a
    parent's pairs use the table when their binary searches would cost more steps (entries
    times log2 of the chunk's features) than ``table_cost`` times the chunk's features.
    Returns ids (n, width) int64 (-1 = empty) and scores (n, width) float32.
    """
    n, b_in = par_ids.shape
    slot_off = _slot_offsets(par_ids, child_ptr)
    raw = np.zeros(slot_off[-1], dtype=np.float32)
    pair_ptr, slots = _pairs_by_parent(par_ids, child_ptr.shape[0] - 1)
    n_par = pair_ptr.shape[0] - 1
    n_blocks = min(n_par, blocks)
    for blk in prange(n_blocks):
        table = np.empty(0, dtype=np.int32)
        for p in range(blk, n_par, n_blocks):
            if pair_ptr[p + 1] > pair_ptr[p]:
                if table.shape[0] == 0:
                    table = np.full(n_features + 1, -1, dtype=np.int32)
                _one_parent(
                    p, pair_ptr[p], pair_ptr[p + 1], slots, b_in, slot_off, raw, table,
                    x_ptr, x_idx, x_val, bias, child_ptr, feat_ptr, feat, entry_ptr, local,
                    val, n_features, table_cost,
                )  # fmt: skip
    out_ids = np.full((n, width), -1, dtype=np.int64)
    out_scores = np.zeros((n, width), dtype=np.float32)
    for i in prange(n):
        n_cand = slot_off[(i + 1) * b_in] - slot_off[i * b_in]
        cand_ids = np.empty(n_cand, dtype=np.int64)
        cand_scores = np.empty(n_cand, dtype=np.float32)
        c = 0
        for b in range(b_in):
            p = par_ids[i, b]
            if p < 0:
                continue
            at = slot_off[i * b_in + b]
            for q in range(child_ptr[p + 1] - child_ptr[p]):
                t = _transform(raw[at + q], kind)
                cand_ids[c] = children[child_ptr[p] + q]
                cand_scores[c] = t if kind == 0 else t * par_scores[i, b]
                c += 1
        order = np.argsort(-cand_scores, kind="mergesort")
        for r in range(min(width, n_cand)):
            out_ids[i, r] = cand_ids[order[r]]
            out_scores[i, r] = cand_scores[order[r]]
    return out_ids, out_scores
