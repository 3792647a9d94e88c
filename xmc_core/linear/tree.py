"""Hierarchical label tree: recursive balanced spherical 2-means, like PECOS's HierarchicalKMeans.

Labels live in one ``order`` array in which every cluster of the current binary depth is a
contiguous segment ``order[ptr[k]:ptr[k + 1]]``. Each depth splits every segment of two or more
labels in place into halves of ``ceil(n / 2)`` and ``floor(n / 2)`` labels; numbering clusters
in segment order makes the children of a cluster a contiguous id range at every level.

The splits themselves are compiled kernels (:mod:`xmc_core.linear._tree_kernels`), parallel over
the clusters of a depth and deterministic for any number of threads.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.linear._tree_kernels import split_depth, split_jobs
from xmc_core.progress import RateLog
from xmc_core.storage.artifacts import load_csr, meta_fields, read_meta, save_csr, write_meta

log = logging.getLogger(__name__)


def binary_depth(n_labels: int, max_leaf_size: int) -> int:
    """Binary depths D: the smallest D >= 1 with ``max_leaf_size * 2**D >= n_labels``."""
    depth = 1
    while max_leaf_size << depth < n_labels:
        depth += 1
    return depth


def tree_depths(n_depths: int, branching: int) -> list[int]:
    """Binary depths kept as tree levels: D, D - log2(branching), ... down to >= 1 (as PECOS's
    ClusterChain): every level has ``branching`` children per parent except the top one, which
    takes the remainder, so beam search over the leaf clusters sees whole sibling groups."""
    step = branching.bit_length() - 1
    return list(range(n_depths, 0, -step))[::-1]


def planned_level_sizes(n_labels: int, cfg: TreeConfig) -> list[int]:
    """The ``level_sizes()`` of the tree :meth:`LabelTree.build` makes for ``n_labels`` labels,
    without building it: the halves of a split differ by at most one label, so binary depth d
    has ``min(2**d, n_labels)`` clusters."""
    depths = tree_depths(binary_depth(n_labels, cfg.max_leaf_size), cfg.branching)
    return [min(1 << d, n_labels) for d in depths] + [n_labels]


def _split_all(z: sp.csr_matrix, cfg: TreeConfig, n_depths: int) -> list[np.ndarray]:
    """Run the binary splits (a run longer than 30 s logs the depths done, the rate and the
    time left); returns ``ptr`` int64 (n_clusters + 1,) per depth 0..D, and the final
    ``order`` int64 (n_labels,) appended last."""
    indptr = z.indptr.astype(np.int64)
    indices = z.indices.astype(np.int32, copy=False)
    data = z.data.astype(np.float32, copy=False)
    squares = sp.csr_matrix((data * data, indices, indptr), shape=z.shape)
    sq_norms = np.asarray(squares.sum(axis=1, dtype=np.float64)).ravel()
    inv_norm = np.divide(1.0, np.sqrt(sq_norms), out=np.zeros(z.shape[0]), where=sq_norms > 0)
    csr = (indptr, indices, data, inv_norm)
    order = np.arange(z.shape[0], dtype=np.int64)
    ptrs = [np.array([0, z.shape[0]], dtype=np.int64)]
    n_chunks, n_dims = numba.get_num_threads(), z.shape[1]
    scratch = (
        np.zeros((n_chunks, n_dims, 2)),
        np.zeros((n_chunks, n_dims), dtype=np.float32),
        np.empty((n_chunks, n_dims), dtype=np.int64),
    )
    progress = RateLog(log, f"label tree of {z.shape[0]:,} labels", n_depths, "depths")
    for depth in range(1, n_depths + 1):
        ptr, sizes = ptrs[-1], np.diff(ptrs[-1])
        jobs = split_jobs(cfg.seed, depth, sizes, cfg.kmeans_restarts)
        split_depth(csr, order, ptr, jobs, cfg.kmeans_iter, scratch)
        mids = ptr[jobs[0]] + (sizes[jobs[0]] + 1) // 2
        ptrs.append(np.sort(np.concatenate([ptr, mids])))
        progress.update(1)
    return [*ptrs, order]


def _parents(ptr_child: np.ndarray, ptr_parent: np.ndarray) -> np.ndarray:
    """Parent id of each child cluster: int64 (n_child,); segments nest since depths refine."""
    return np.searchsorted(ptr_parent, ptr_child[:-1], side="right") - 1


def _assignment(rows_to_cols: np.ndarray, n_cols: int) -> sp.csr_matrix:
    """Binary csr (len(rows_to_cols), n_cols) float32 with one 1 per row."""
    n = rows_to_cols.shape[0]
    return sp.csr_matrix((np.ones(n, np.float32), rows_to_cols, np.arange(n + 1)), (n, n_cols))


def check_chain(C: list[sp.csr_matrix]) -> str | None:
    """Why ``C`` is not a cluster chain (PECOS convention, siblings contiguous), or None.

    ``C[0]``: (K_1, 1) all ones; ``C[t]``: (K_{t+1}, K_t) with one 1 per row, every parent
    with at least one child; in all but the last (label) matrix, parent ids are non-decreasing
    along the rows, i.e. the children of each cluster have a contiguous id range.
    """
    if not C:
        return "no levels"
    n_parents = 1
    for t, m in enumerate(C):
        if m.ndim != 2 or m.shape[1] != n_parents:
            return f"C[{t}] has shape {m.shape}, expected (*, {n_parents})"
        if m.nnz != m.shape[0] or np.any(np.diff(m.indptr) != 1) or np.any(m.data != 1):
            return f"C[{t}] does not have exactly one 1 per row"
        if t < len(C) - 1 and np.any(np.diff(m.indices) < 0):
            return f"C[{t}]: children of a parent are not contiguous"
        if np.any(np.bincount(m.indices, minlength=n_parents) == 0):
            return f"C[{t}] has a parent cluster without children"
        n_parents = m.shape[0]
    return None


class LabelTree:
    """Hierarchical label tree as a chain of child→parent assignment matrices.

    ``C[0]``: csr (K_1, 1) all ones; ``C[t]``: csr (K_{t+1}, K_t) binary with one 1 per row;
    ``C[-1]``: csr (n_labels, K_T) label → leaf cluster. At every level the children of one
    parent have a contiguous range of ids.
    """

    def __init__(self, C: list[sp.csr_matrix], config: TreeConfig | None = None) -> None:
        C = [sp.csr_matrix(m, dtype=np.float32) for m in C]
        for m in C:
            m.sort_indices()
        problem = check_chain(C)
        if problem is not None:
            raise ValueError(f"not a label tree: {problem}")
        self.C = C
        self.config = config

    @classmethod
    def build(cls, Z: sp.csr_matrix | sp.csr_array, cfg: TreeConfig) -> LabelTree:
        """Cluster the labels by their features ``Z``: csr (n_labels, n_dims).

        Rows are used L2-normalized; all-zero rows score 0 against every centroid. Tree levels
        are every log2(branching) of the D = ``binary_depth(n_labels, max_leaf_size)`` binary
        depths, plus depth D, so leaves hold at most ``max_leaf_size`` labels (single labels
        are not split: if ``2**D > n_labels`` the last levels have fewer than 2**depth nodes).
        """
        z = sp.csr_matrix(Z) if sp.issparse(Z) else None
        if z is None or z.shape[0] < 1 or not np.all(np.isfinite(z.data)):
            fix = "pass the label features, csr (n_labels, n_dims)"
            raise InputError(None, "Z must be a sparse matrix with >= 1 row, no NaN/inf", fix)
        if not z.has_canonical_format:  # duplicate entries would distort the row norms
            z = sp.csr_matrix(z, copy=True)
            z.sum_duplicates()
        n_depths = binary_depth(z.shape[0], cfg.max_leaf_size)
        *ptrs, order = _split_all(z, cfg, n_depths)
        kept = [0, *tree_depths(n_depths, cfg.branching)]
        C = [_assignment(_parents(ptrs[d], ptrs[p]), len(ptrs[p]) - 1) for p, d in pairwise(kept)]
        leaf_ptr = ptrs[n_depths]
        leaf_of = np.empty(z.shape[0], dtype=np.int64)
        leaf_of[order] = np.repeat(np.arange(len(leaf_ptr) - 1), np.diff(leaf_ptr))
        C.append(_assignment(leaf_of, len(leaf_ptr) - 1))
        return cls(C, cfg)

    @property
    def depth(self) -> int:
        """Number of C matrices (cluster levels + the label level)."""
        return len(self.C)

    @property
    def n_labels(self) -> int:
        """Number of labels (rows of the last C matrix)."""
        return self.C[-1].shape[0]

    def level_sizes(self) -> list[int]:
        """Nodes per level, root excluded: ``[K_1, ..., K_T, n_labels]``."""
        return [m.shape[0] for m in self.C]

    def label_to_cluster(self, level: int) -> np.ndarray:
        """Cluster id at ``level`` (index into ``level_sizes()``, negatives count from the end)
        of each label: int64 (n_labels,); the last level is the identity."""
        if not -self.depth <= level < self.depth:
            raise IndexError(f"level {level} out of range for a tree of depth {self.depth}")
        level %= self.depth
        ids = np.arange(self.n_labels, dtype=np.int64)
        for t in range(self.depth - 1, level, -1):
            ids = self.C[t].indices[ids].astype(np.int64)
        return ids

    def save(self, folder: str | Path) -> None:
        """Write ``C0.npz`` ... ``C{depth-1}.npz`` and ``meta.json`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("C*.npz"):
            stale.unlink()
        for t, m in enumerate(self.C):
            save_csr(folder / f"C{t}.npz", m)
        config = None if self.config is None else self.config.model_dump(mode="json")
        write_meta(folder, "LabelTree", {"level_sizes": self.level_sizes(), "config": config})

    @classmethod
    def load(cls, folder: str | Path) -> LabelTree:
        """Read a folder written by :meth:`save`; raises ArtifactError if it is not a valid tree."""
        folder = Path(folder)
        meta = read_meta(folder, "LabelTree")
        sizes = meta.get("level_sizes")
        if not isinstance(sizes, list) or not sizes:
            raise ArtifactError(folder / "meta.json", "level_sizes missing", "re-create it")
        C = [load_csr(folder / f"C{t}.npz") for t in range(len(sizes))]
        problem = check_chain(C)
        if problem is None and [m.shape[0] for m in C] != sizes:
            problem = f"level sizes {[m.shape[0] for m in C]} differ from meta.json {sizes}"
        if problem is not None:
            raise ArtifactError(folder, f"not a label tree: {problem}", "re-create it")
        config = meta.get("config")
        with meta_fields(folder):
            return cls(C, None if config is None else TreeConfig.model_validate(config))
