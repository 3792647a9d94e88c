"""Beam search through the levels of a tree of linear rankers.

At level t each document keeps ``beam_size`` nodes; the children of those nodes are scored with
their linear rankers, the score is transformed (post-processor) and combined with the parent's
score, and the best ``beam_size`` (``topk`` at the last level) survive. :func:`beam_search` is
the one loop over the levels (prediction, matcher negatives and diagnostics all run it).

Scoring follows the document's features, not the rankers' weights (as PECOS does): ``W`` is
regrouped per parent into a feature-major chunk holding the weights of that parent's children,
and each of the document's nonzero features is looked up in the chunk of each beam parent: in a
dense table of the chunk's features when many documents visit the parent, else by binary search
(:mod:`xmc_core.linear._beam_kernels`; the same scores bit for bit either way). The cost per
(document, parent) is ``nnz(x)`` lookups plus the matching weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from xmc_core.linear import _beam_kernels
from xmc_core.linear import _chunk_kernels as _kernels
from xmc_core.linear._batch import offsets
from xmc_core.linear.level_batches import Pieces

POST_PROCESSORS = {"noop": 0, "sigmoid": 1, "l3-hinge": 2}
BLOCK_CANDIDATES = 1 << 24
"""Candidates (document, child) scored per kernel call: 64 MB of float32 scores."""
TABLE_COST = 2.0
"""A parent's chunk goes into a feature table (written, then cleared: 2 steps a feature) when
its documents' binary searches would take more steps; the scores are the same either way."""

LevelHook = Callable[[int, np.ndarray, np.ndarray], None]
"""Called as ``hook(t, ids, scores)`` with the beam kept at level t (see :func:`beam_search`)."""


@dataclass(frozen=True)
class ChunkedLevel:
    """One level's rankers regrouped per parent.

    Parent ``p``'s children are ``children[child_ptr[p]:child_ptr[p+1]]`` (global ids); its chunk
    holds the features ``feat[feat_ptr[p]:feat_ptr[p+1]]`` (sorted), and feature slot ``k`` has
    the weights ``val[entry_ptr[k]:entry_ptr[k+1]]`` of the children at local positions
    ``local[...]``. Feature ``n_features`` is the bias.
    """

    child_ptr: np.ndarray
    children: np.ndarray
    feat_ptr: np.ndarray
    feat: np.ndarray
    entry_ptr: np.ndarray
    local: np.ndarray
    val: np.ndarray
    n_features: int
    n_nodes: int

    @classmethod
    def build(cls, W: sp.spmatrix, C: sp.spmatrix) -> ChunkedLevel:
        """From ``W``: (n_features + 1, K) weights (last row bias) and ``C``: csr (K, P)."""
        W = sp.csc_matrix(W)
        if W.shape[1] != C.shape[0]:
            raise ValueError(f"W has {W.shape[1]} columns, C has {C.shape[0]} children")
        nodes = np.arange(W.shape[1], dtype=np.int64)
        return cls.from_pieces([(nodes, np.diff(W.indptr), W.indices, W.data)], C, W.shape[0])

    @classmethod
    def from_pieces(cls, pieces: list[Pieces], C: sp.spmatrix, n_rows: int) -> ChunkedLevel:
        """From weights in pieces, as the solver's batches return them (each (nodes, counts,
        rows, values): :meth:`~xmc_core.linear.solver.LevelJob.train`) and ``C``: csr (K, P),
        without ever holding the (n_rows, K) matrix they form: the list is emptied, each piece
        dropped as soon as it is laid out (at 1M labels the matrix and its copies were 2 GB)."""
        C = sp.csr_matrix(C)
        n_nodes, n_parents = C.shape
        if n_rows > 2**31 - 1:
            raise ValueError(f"W has {n_rows} rows: at most 2**31 - 1 features")
        if not np.array_equal(np.diff(C.indptr), np.ones(n_nodes, dtype=C.indptr.dtype)):
            raise ValueError("every child needs exactly one parent in C")
        parent = C.indices.astype(np.int64)
        children = np.argsort(parent, kind="stable").astype(np.int64)  # grouped by parent
        child_ptr = offsets(np.bincount(parent, minlength=n_parents))
        rank = np.empty(n_nodes, dtype=np.int64)  # a child's place among its siblings
        rank[children] = np.arange(n_nodes) - np.repeat(child_ptr[:-1], np.diff(child_ptr))
        pieces[:] = [_checked(piece, n_nodes, n_rows) for piece in _whole(pieces, parent)]
        per_node, n_feat = np.zeros(n_nodes, dtype=np.int64), np.zeros(n_parents, dtype=np.int64)
        for nodes, counts, rows, _ in pieces:  # a node is in one piece: _whole and _checked
            per_node[nodes] = counts
            order, _ = _by_parent(nodes, parent)
            _kernels.count_features(order, nodes, offsets(counts), counts, rows, parent, n_rows,
                                    n_feat)  # fmt: skip
        per_parent = np.bincount(parent, weights=per_node, minlength=n_parents)
        ent_ptr, feat_ptr = offsets(per_parent.astype(np.int64)), offsets(n_feat)
        total, siblings = int(ent_ptr[-1]), int(np.diff(child_ptr).max(initial=0))
        # 2 + 4 bytes per weight, 4 + 4 per (parent, feature): the largest part of a model
        local = np.empty(total, dtype=np.uint16 if siblings <= 2**16 else np.int32)
        val = np.empty(total, dtype=np.float32)
        feat = np.empty(feat_ptr[-1], dtype=np.int32)  # features < 2**31, checked above
        entry_ptr = np.full(feat_ptr[-1] + 1, total, dtype=np.int32 if total < 2**31 else np.int64)
        while pieces:
            nodes, counts, rows, values = pieces.pop()
            order, group_ptr = _by_parent(nodes, parent)
            _kernels.fill_chunks(
                group_ptr, order, nodes, offsets(counts)[:-1], counts, rows, values, parent,
                rank, child_ptr, ent_ptr, feat_ptr, feat, entry_ptr, local, val,
            )  # fmt: skip
            del nodes, counts, rows, values
        return cls(
            child_ptr=child_ptr, children=children, feat_ptr=feat_ptr, feat=feat,
            entry_ptr=entry_ptr, local=local, val=val, n_features=n_rows - 1, n_nodes=n_nodes,
        )  # fmt: skip

    def to_csr(self) -> sp.csr_matrix:
        """The weights this level was built from, entry for entry: csr (n_features + 1, n_nodes)
        float32 with sorted indices (the model keeps only the chunks; warm starts rebuild this,
        saving writes it a range of rows at a time: :meth:`csr_rows`)."""
        indptr = self.csr_indptr()
        indices, data = self.csr_rows(indptr, 0, self.n_features + 1)
        W = sp.csr_matrix((data, indices, indptr), shape=(self.n_features + 1, self.n_nodes))
        W.sort_indices()  # sorted already: a check
        return W

    def csr_indptr(self) -> np.ndarray:
        """The row pointers of :meth:`to_csr`'s matrix: int32, or int64 past 2**31 - 1."""
        indptr = offsets(_kernels.row_counts(self.feat, self.entry_ptr, self.n_features + 1))
        index = np.int32 if max(int(indptr[-1]), self.n_nodes) < 2**31 else np.int64
        return indptr.astype(index, copy=False)

    def csr_rows(self, indptr: np.ndarray, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, data) of rows ``first..stop - 1`` of :meth:`to_csr`'s matrix, each row
        sorted by column; ``indptr``: :meth:`csr_indptr`."""
        part_ptr = indptr[first : stop + 1] - indptr[first]
        indices = np.empty(part_ptr[-1], dtype=indptr.dtype)
        data = np.empty(part_ptr[-1], dtype=np.float32)
        _kernels.fill_rows(
            self.child_ptr, self.children, self.feat_ptr, self.feat, self.entry_ptr, self.local,
            self.val, first, stop, part_ptr, indices, data,
        )  # fmt: skip
        part = sp.csr_matrix((data, indices, part_ptr), shape=(stop - first, self.n_nodes))
        part.sort_indices()
        return part.indices, part.data


def _whole(pieces: list[Pieces], parent: np.ndarray) -> list[Pieces]:
    """``pieces``, joined into one where a parent's children lie in several (a mapper's chunks
    of one large parent's children, :func:`~xmc_core.linear.level_batches.split_batches`)."""
    if len(pieces) < 2:
        return pieces
    held = np.zeros(int(parent.max(initial=-1)) + 1, dtype=np.int64)
    for nodes, *_ in pieces:  # ids outside the level: left to the check that follows
        held[np.unique(parent[nodes[(nodes >= 0) & (nodes < parent.size)]])] += 1
    if held.max(initial=0) <= 1:
        return pieces
    return [tuple(np.concatenate(parts) for parts in zip(*pieces, strict=True))]  # type: ignore[list-item]


def _by_parent(nodes: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the positions of ``nodes`` grouped by parent; where each parent's group starts, and the
    end)."""
    order = np.argsort(parent[nodes], kind="stable")
    by_parent = parent[nodes[order]]
    return order, np.flatnonzero(
        np.diff(by_parent, prepend=-1, append=by_parent.max(initial=0) + 1)
    )


def _checked(piece: Pieces, n_nodes: int, n_rows: int) -> Pieces:
    """A piece in the kernels' types (nodes and counts int64, rows int32, values float32),
    after checking that its nodes are distinct ids, its counts add up and its rows fit."""
    nodes, counts, rows, values = piece
    nodes, counts = nodes.astype(np.int64, copy=False), counts.astype(np.int64, copy=False)
    if nodes.shape != counts.shape or rows.shape != values.shape or counts.sum() != rows.size:
        raise ValueError("a piece's counts do not add up to its weights")
    if nodes.size and (nodes.min() < 0 or nodes.max() >= n_nodes or counts.min() < 0):
        raise ValueError(f"a piece names nodes outside 0..{n_nodes - 1}")
    if np.unique(nodes).size != nodes.size:
        raise ValueError("a node's weights are in more than one piece")
    if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
        raise ValueError(f"a piece has weights outside rows 0..{n_rows - 1}")
    return nodes, counts, rows.astype(np.int32, copy=False), values.astype(np.float32, copy=False)


def score_level(
    X: sp.csr_matrix,
    level: ChunkedLevel,
    beam_ids: np.ndarray,
    beam_scores: np.ndarray,
    width: int,
    post_processor: str,
    bias: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``width`` children of each document's beam.

    ``X``: csr (n, d) with sorted indices; ``beam_ids``/``beam_scores``: (n, b) parents in the
    beam (-1 = empty). Returns ``(ids (n, width) int64, -1 for empty slots; scores float32)``.
    """
    if X.shape[1] != level.n_features:
        raise ValueError(f"X has {X.shape[1]} features, the rankers {level.n_features}")
    X = sp.csr_matrix(X, dtype=np.float32)
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    beam_ids = np.ascontiguousarray(beam_ids, dtype=np.int64)
    beam_scores = np.ascontiguousarray(beam_scores, dtype=np.float32)
    kids = np.diff(level.child_ptr)
    per_doc = np.where(beam_ids >= 0, kids[np.maximum(beam_ids, 0)], 0).sum(axis=1)
    ids, scores = [], []
    for a, b in cost_ranges(per_doc, BLOCK_CANDIDATES) or [(0, 0)]:
        i, s = _beam_kernels.score_level(
            X.indptr[a : b + 1], X.indices, X.data, np.float32(bias),
            level.child_ptr, level.children, level.feat_ptr, level.feat, level.entry_ptr,
            level.local, level.val, beam_ids[a:b], beam_scores[a:b],
            width, POST_PROCESSORS[post_processor], level.n_features,
            4 * numba.get_num_threads(), TABLE_COST,
        )  # fmt: skip
        ids.append(i)
        scores.append(s)
    if len(ids) == 1:
        return ids[0], scores[0]
    return np.concatenate(ids), np.concatenate(scores)


def cost_ranges(cost: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive row ranges ``(start, stop)`` whose ``cost`` sums to at most ``budget``
    (a row costing more is a range of its own); none for no rows."""
    ends = np.cumsum(cost)
    ranges, a = [], 0
    while a < cost.size:
        base = ends[a - 1] if a else 0
        b = max(int(np.searchsorted(ends, base + budget, side="right")), a + 1)
        ranges.append((a, b))
        a = b
    return ranges


def child_scores(
    X: sp.csr_matrix, level: ChunkedLevel, parents: sp.csr_matrix, bias: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw scores (no post-processing) of every child of every document's ``parents`` (csr
    (n_docs, P), its stored entries the parents): :func:`score_level` with those parents as the
    beam, keeping every child. Returns (rows, node ids, scores float64), one entry per pair."""
    parents = sp.csr_matrix(parents)
    widths = np.diff(parents.indptr)
    beam = np.full((X.shape[0], max(int(widths.max(initial=0)), 1)), -1, dtype=np.int64)
    ranks = np.arange(parents.indptr[-1]) - np.repeat(parents.indptr[:-1], widths)
    beam[np.repeat(np.arange(X.shape[0]), widths), ranks] = parents.indices
    kids = np.diff(level.child_ptr).astype(np.int64)
    width = int((sp.csr_matrix((np.ones(parents.nnz), parents.indices, parents.indptr),
                               parents.shape) @ kids).max(initial=0))  # fmt: skip
    ones = np.ones(beam.shape, dtype=np.float32)
    ids, scores = score_level(X, level, beam, ones, max(width, 1), "noop", bias)
    kept = ids >= 0
    rows = np.repeat(np.arange(X.shape[0]), kept.sum(axis=1))
    return rows, ids[kept], scores[kept].astype(np.float64)


def labelled_child_scores(
    X: sp.csr_matrix, level: ChunkedLevel, parents: sp.csr_matrix, relevant: sp.csr_matrix,
    bias: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`child_scores`' (node ids, scores) and each pair's label: +1 where ``relevant``
    (csr (n_docs, K)) holds the pair, else -1."""
    rows, ids, scores = child_scores(X, level, parents, bias)
    return ids, scores, pair_labels(relevant, rows, ids)


def pair_labels(relevant: sp.csr_matrix, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """+1 for each (row, node id) pair that ``relevant`` (csr (n_docs, K)) holds, else -1."""
    hit = np.asarray(sp.csr_matrix(relevant, dtype=np.float32)[rows, ids]).ravel() > 0
    return 2.0 * hit - 1.0


def root_beam(n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """The beam before the first level: every document at the single root with score 1."""
    return np.zeros((n_docs, 1), dtype=np.int64), np.ones((n_docs, 1), dtype=np.float32)


def beam_to_csr(ids: np.ndarray, scores: np.ndarray, n_cols: int) -> sp.csr_matrix:
    """(n, b) ids/scores with -1 for empty slots -> csr (n, n_cols), rows sorted by column."""
    valid = ids >= 0
    rows = np.repeat(np.arange(ids.shape[0]), valid.sum(axis=1))
    out = sp.csr_matrix(
        (scores[valid].astype(np.float32), (rows, ids[valid])), shape=(ids.shape[0], n_cols)
    )
    out.sort_indices()
    return out


def beam_search(
    X: sp.csr_matrix,
    levels: Iterable[ChunkedLevel],
    widths: Sequence[int],
    post_processor: str,
    bias: float,
    on_level: LevelHook | None = None,
) -> sp.csr_matrix:
    """Beam search from the root through ``levels`` (coarse to fine), keeping ``widths[t]``
    nodes per document at level t.

    ``X``: csr (n_docs, n_features); ``levels`` is read once, in order, so a generator can
    build each level when it is reached. After level t, ``on_level(t, ids, scores)`` sees its
    beam: ``ids`` int64 (n_docs, widths[t]), -1 for empty slots, and ``scores`` float32, best
    first. Returns csr (n_docs, K) float32, the scores of the nodes kept at the last level (K:
    its node count).
    """
    ids, scores = root_beam(X.shape[0])
    level = None
    for t, (level, width) in enumerate(zip(levels, widths, strict=True)):
        ids, scores = score_level(X, level, ids, scores, width, post_processor, bias)
        if on_level is not None:
            on_level(t, ids, scores)
    if level is None:
        raise ValueError("beam search needs at least one level")
    return beam_to_csr(ids, scores, level.n_nodes)
