"""Astec's module 2: each document's shortlist of labels and their ANN similarity.

Two faiss indexes over unit encodings (:class:`~xmc_core.families.astec.ann.AnnIndex`): one over the
label vectors (each label's unit mean of its training documents' unit encodings), giving each
document its ``shortlist_size`` nearest labels; one over the training documents themselves
(the instance kNN the reference merges in), whose ``n_neighbours`` nearest training documents
vote for their labels: a label's vote is the sum of the positive cosines of the neighbours
that have it over the sum of all of them, in [0, 1]; each document keeps its
``shortlist_size`` best-voted labels. The shortlist is the union of both; its "ANN
similarity" (the fusion's second term) is the vote, or with ``n_neighbours`` 0 (no document
index) the cosine to the label vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xmc_core.families.astec.ann import AnnIndex, faiss_threads
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.dense import unit_rows
from xmc_core.storage.artifacts import load_arrays, load_csr, save_arrays, save_csr

LABEL_INDEX_FILE = "label_index.npz"
DOC_INDEX_FILE = "doc_index.npz"
DOC_LABELS_FILE = "doc_labels.npz"


def label_vectors(U: np.ndarray, Y: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Each label's vector: the unit mean of the unit encodings ``U`` (n, D) of its documents
    (``Y`` csr (n, L)); (vectors float32 (L, D), whether the label has documents bool (L,))."""
    Yt = sp.csr_matrix(Y, dtype=np.float32).T.tocsr()
    Yt.data[:] = 1.0
    V = unit_rows(np.asarray(Yt @ U, dtype=np.float32))
    return V, np.diff(Yt.indptr) > 0


def drop_own(
    neighbours: np.ndarray, sims: np.ndarray, own: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours (n, m + 1) of indexed documents ``own`` (n,) without each one itself (the
    last neighbour instead when the search missed it): (ids (n, m), sims (n, m))."""
    n, m = neighbours.shape[0], neighbours.shape[1] - 1
    itself = neighbours == own[:, None]
    itself[~itself.any(axis=1), -1] = True
    return neighbours[~itself].reshape(n, m), sims[~itself].reshape(n, m)


def top_per_row(M: sp.csr_matrix, cap: int) -> sp.csr_matrix:
    """``M`` with each row's ``cap`` largest entries kept (ties: the lower column)."""
    M = sp.csr_matrix(M)
    M.sum_duplicates()
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    order = np.lexsort((M.indices, -M.data, rows))
    keep = order[np.arange(len(order)) - M.indptr[rows[order]] < cap]
    return sp.csr_matrix((M.data[keep], (rows[keep], M.indices[keep])), shape=M.shape)


def neighbour_votes(
    neighbours: np.ndarray, sims: np.ndarray, doc_labels: sp.csr_matrix, cap: int
) -> sp.csr_matrix:
    """Votes csr (n, L) float32: for each document with ``neighbours`` (n, m) (-1: none) of
    cosines ``sims`` (n, m), each label's sum of the positive cosines of the neighbours
    having it (``doc_labels`` csr (N, L)) over the sum of them all; the ``cap`` best kept."""
    n, m = neighbours.shape
    weights = np.where(neighbours >= 0, np.maximum(sims, 0.0), 0.0)
    weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-12)
    R = doc_labels[np.maximum(neighbours, 0).ravel()]
    counts = np.diff(R.indptr)
    rows = np.repeat(np.repeat(np.arange(n), m), counts)
    votes = sp.csr_matrix(
        (np.repeat(weights.ravel(), counts), (rows, R.indices)), shape=(n, doc_labels.shape[1])
    )  # duplicates summed
    votes = top_per_row(votes, cap)
    votes.eliminate_zeros()
    return sp.csr_matrix(votes, dtype=np.float32)


def merge(labels: np.ndarray, votes: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The union of each row's ``labels`` (n, k) (-1: none) and voted labels (``votes`` csr
    (n, L)), ascending, -1-padded: (labels int64 (n, S), their votes float32 (n, S), 0 for a
    label nobody voted for)."""
    n, L = votes.shape
    votes = sp.csr_matrix(votes)
    votes.sort_indices()
    rows = np.repeat(np.arange(n), labels.shape[1])
    voted = np.repeat(np.arange(n), np.diff(votes.indptr)) * L + votes.indices
    keys = np.union1d((rows * L + labels.ravel())[labels.ravel() >= 0], voted)
    at = np.minimum(np.searchsorted(voted, keys), max(len(voted) - 1, 0))
    values = np.where(voted[at] == keys, votes.data[at], 0.0) if len(voted) else 0.0
    key_rows = keys // L
    counts = np.bincount(key_rows, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cols = np.arange(len(keys)) - starts[key_rows]
    width = max(int(counts.max(initial=0)), 1)
    out = np.full((n, width), -1, np.int64)
    out_votes = np.zeros((n, width), np.float32)
    out[key_rows, cols] = keys % L
    out_votes[key_rows, cols] = values
    return out, out_votes


@dataclass
class Shortlister:
    """The label index and (``n_neighbours`` > 0) the document index with the labels of its
    documents (``doc_labels`` csr (N, L))."""

    cfg: AstecConfig
    labels: AnnIndex
    docs: AnnIndex | None = None
    doc_labels: sp.csr_matrix | None = None

    @classmethod
    def build(
        cls, U: np.ndarray, Y: sp.csr_matrix, cfg: AstecConfig
    ) -> tuple[Shortlister, np.ndarray, np.ndarray]:
        """Index the label vectors of training documents ``U`` (n, D) unit, ``Y`` csr (n, L)
        and (``n_neighbours`` > 0) the documents; also returns the label vectors (L, D) and
        which labels have documents (L,)."""
        V, has = label_vectors(U, Y)
        labels = AnnIndex.build(V[has], np.flatnonzero(has), cfg)
        if cfg.n_neighbours == 0:
            return cls(cfg, labels), V, has
        docs = AnnIndex.build(U, np.arange(len(U)), cfg)
        return cls(cfg, labels, docs, sp.csr_matrix(Y, dtype=np.float32)), V, has

    def shortlists(
        self, U: np.ndarray, own: np.ndarray | None = None, threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each unit encoding's shortlist (labels int64 (n, S), -1: none) and the ANN
        similarity of each (float32 (n, S)); ``own``: the rows in the document index of
        these documents (training documents: each one's own labels are not its neighbours');
        ``threads``: faiss's for the queries (None: as they are)."""
        cfg = self.cfg
        with faiss_threads(threads):
            sims, labels = self.labels.search(U, cfg.shortlist_size)
            if self.docs is None or self.doc_labels is None:
                return labels, sims
            m = cfg.n_neighbours + (own is not None)
            doc_sims, neighbours = self.docs.search(U, m)
        if own is not None:
            neighbours, doc_sims = drop_own(neighbours, doc_sims, own)
        votes = neighbour_votes(neighbours, doc_sims, self.doc_labels, cfg.shortlist_size)
        return merge(labels, votes)

    def save(self, folder: Path) -> dict[str, Any]:
        """The indexes (and document labels) into ``folder``; returns their sha256s for
        ``meta.json``."""
        arrays, label_sha = self.labels.arrays()
        save_arrays(folder / LABEL_INDEX_FILE, **arrays)
        if self.docs is None or self.doc_labels is None:
            return {"label_index_sha256": label_sha}
        arrays, doc_sha = self.docs.arrays()
        save_arrays(folder / DOC_INDEX_FILE, **arrays)
        save_csr(folder / DOC_LABELS_FILE, self.doc_labels)
        return {"label_index_sha256": label_sha, "doc_index_sha256": doc_sha}

    @classmethod
    def load(cls, folder: Path, meta: dict[str, Any], cfg: AstecConfig) -> Shortlister:
        """Read what :meth:`save` wrote (``meta``: its sha256s, checked before faiss reads)."""
        path = folder / LABEL_INDEX_FILE
        labels = AnnIndex.from_arrays(
            load_arrays(path), str(meta["label_index_sha256"]), cfg.ef_search, path
        )
        if "doc_index_sha256" not in meta:
            return cls(cfg, labels)
        path = folder / DOC_INDEX_FILE
        docs = AnnIndex.from_arrays(
            load_arrays(path), str(meta["doc_index_sha256"]), cfg.ef_search, path
        )
        return cls(cfg, labels, docs, load_csr(folder / DOC_LABELS_FILE))
