"""Ranking the rows of a score matrix: every row's entries best first, optionally cut to k.

One rule for every caller (saved and served predictions, ``XmcModel.top_labels``, the metrics,
the transformer ranker's shortlists, the matcher's top clusters, the dense outputs of XML-CNN
and NeuralXC, Astec's shortlists): score descending, ties broken by the lower column (or label)
id, NaN scores last (among themselves by column). :func:`top_k` ranks a sparse matrix,
:func:`top_k_dense` the rows of a dense one. The matrix is ranked in canonical form:
duplicate entries of a (row, column) are summed, as scipy does, and every stored entry counts,
an explicit zero included.

Rows are sorted in padded dense blocks of rows of similar length (lengths within a factor of
2, all rows up to 64 together), so padding at most doubles the work of a row-wise sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class RankedRows:
    """The rows of a score matrix, each best first.

    Row ``i`` holds the columns ``cols[offsets[i]:offsets[i + 1]]`` with the scores
    ``vals[offsets[i]:offsets[i + 1]]``. ``offsets``: int64 (n_rows + 1,); ``cols``: int64
    (n_kept,); ``vals``: (n_kept,), the dtype of the scores; ``shape``: the score matrix's
    (n_rows, n_cols).
    """

    offsets: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    shape: tuple[int, int]

    def padded(self, k: int) -> np.ndarray:
        """The first ``k`` columns of every row: int64 (n_rows, k), -1 past a row's end."""
        lengths = np.minimum(np.diff(self.offsets), k)
        out = np.full((self.shape[0], k), -1, dtype=np.int64)
        filled = np.arange(k) < lengths[:, None]
        out[filled] = self.cols[(self.offsets[:-1, None] + np.arange(k))[filled]]
        return out

    def indicator(self) -> sp.csr_matrix:
        """csr (n_rows, n_cols) float32 with 1 at every ranked entry, columns sorted."""
        ones = np.ones(len(self.cols), dtype=np.float32)
        out = sp.csr_matrix((ones, self.cols, self.offsets), shape=self.shape)
        out.sort_indices()
        return out


def top_k(scores: sp.spmatrix | sp.sparray, k: int | None = None) -> RankedRows:
    """Every row of ``scores`` csr (n_rows, n_cols) best first, cut to its ``k`` best entries
    (None: all of them). A row with fewer than ``k`` entries keeps them all."""
    if k is not None and k < 1:
        raise ValueError(f"k={k} must be >= 1")
    S = _canonical(scores)
    lengths = np.diff(S.indptr).astype(np.int64)
    kept = lengths if k is None else np.minimum(lengths, k)
    offsets = np.zeros(S.shape[0] + 1, dtype=np.int64)
    np.cumsum(kept, out=offsets[1:])
    positions = np.empty(offsets[-1], dtype=np.int64)  # into S.data, ranked
    length_class = np.ceil(np.log2(np.maximum(lengths, 64))).astype(np.int64)
    classes = np.unique(length_class)
    for c in classes:
        rows = np.arange(S.shape[0]) if len(classes) == 1 else np.flatnonzero(length_class == c)
        _rank_block(S, rows, kept[rows], offsets, positions)
    cols = S.indices[positions].astype(np.int64)
    return RankedRows(offsets, cols, S.data[positions], (S.shape[0], S.shape[1]))


def _rank_block(
    S: sp.csr_matrix, rows: np.ndarray, kept: np.ndarray, offsets: np.ndarray, out: np.ndarray
) -> None:
    """Rank ``rows`` of canonical ``S`` in one (len(rows), longest row) block; write the data
    positions of each row's ``kept`` best entries to ``out`` from ``offsets[row]``."""
    starts = S.indptr[rows].astype(np.int64)
    lengths = S.indptr[rows + 1] - starts
    slot = np.arange(max(int(lengths.max(initial=0)), 1), dtype=np.int64)
    position = starts[:, None] + slot  # past a row's end: padding
    real = slot < lengths[:, None]
    # Padding is NaN: a stable sort puts NaN last in slot order, so a row's NaN scores stay
    # ahead of its padding, and columns (sorted in canonical csr) break every tie.
    negated = np.full(position.shape, np.nan)
    negated[real] = -np.asarray(S.data[position[real]], dtype=np.float64)
    width = int(kept.max(initial=0))
    order = np.argsort(negated, axis=1, kind="stable")[:, :width]
    take = slot[:width] < kept[:, None]
    destination = offsets[rows][:, None] + slot[:width]
    out[destination[take]] = np.take_along_axis(position, order, axis=1)[take]


def _canonical(scores: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """``scores`` as csr with sorted indices and no duplicates (copied only when needed)."""
    S = sp.csr_matrix(scores)
    if not S.has_canonical_format:
        S = S.copy()
        S.sum_duplicates()
    return S


def top_k_dense(
    S: np.ndarray, k: int, ids: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best entries of every row of dense scores ``S`` (m, w), best first, ties to
    the lower id: (ids int64 (m, min(k, w)), their scores, the dtype of ``S``).

    ``ids``: int64 (m, w), the label of each entry, -1 for an empty one, which ranks after
    every label and stays -1 (None: the column numbers, the rule of :func:`top_k`).
    """
    if ids is not None:
        keyed = np.where(ids >= 0, S, -np.inf)
        last = np.iinfo(np.int64).max
        order = np.lexsort((np.where(ids >= 0, ids, last), -keyed), axis=-1)[:, :k]
        return np.take_along_axis(ids, order, 1), np.take_along_axis(S, order, 1)
    m, L = S.shape
    k = min(k, L)
    if m == 0 or k == 0:
        return np.zeros((m, k), np.int64), np.zeros((m, k), S.dtype)
    kth = np.take_along_axis(S, np.argpartition(-S, k - 1, axis=1)[:, k - 1 : k], axis=1)
    above = kth < S
    tied = kth == S
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
    cols = np.nonzero(keep)[1].reshape(m, k)
    vals = np.take_along_axis(S, cols, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")  # columns ascending among ties
    cols = np.take_along_axis(cols, order, axis=1)
    return cols.astype(np.int64), np.take_along_axis(vals, order, axis=1)
