"""Hierarchical label tree: recursive balanced spherical 2-means, like PECOS's HierarchicalKMeans.

Labels live in one ``order`` array in which every cluster of the current binary depth is a
contiguous segment ``order[ptr[k]:ptr[k + 1]]``. Each depth splits every segment of two or more
labels in place into halves of ``ceil(n / 2)`` and ``floor(n / 2)`` labels; numbering clusters
in segment order makes the children of a cluster a contiguous id range at every level.

The compiled kernel works per cluster with dense scratch vectors of length ``n_dims`` of which
only the touched entries are ever written or cleared, so one k-means iteration over a whole depth
costs ``O(nnz(Z))``. Clusters of a depth are split in parallel; each cluster's result depends
only on its members and its two seed members, drawn in cluster order from a generator seeded
with ``(seed, depth)``, so the tree is the same for any number of threads.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from xmc_core.artifacts import load_csr, read_meta, save_csr, write_meta
from xmc_core.config import TreeConfig
from xmc_core.errors import ArtifactError, InputError

# ``csr`` below is the tuple (indptr int64, indices int32, data float32, inv_norm float64) of Z.
Csr = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# ``scratch``: (sums float64 (n_dims, 2): centroid sums of child b (column 0) and a (column 1),
# w float32 (n_dims,): c_a - c_b, touched int64 (n_dims,)); sums and w are zero between clusters.
Scratch = tuple[np.ndarray, np.ndarray, np.ndarray]


@njit(cache=True)
def _columns(csr: Csr, seg: np.ndarray, scratch: Scratch) -> int:
    """List the columns used by the rows ``seg`` (int64 (n,)) in ``touched``; returns how many.

    Marks them with ``w = 1`` (``w`` is overwritten on exactly these columns before any use).
    """
    indptr, indices = csr[0], csr[1]
    w, touched = scratch[1], scratch[2]
    n_touched = 0
    for r in seg:
        for p in range(indptr[r], indptr[r + 1]):
            j = indices[p]
            if w[j] == 0.0:
                w[j] = 1.0
                touched[n_touched] = j
                n_touched += 1
    return n_touched


@njit(cache=True)
def _add_row(csr: Csr, r: int, scale: float, sums: np.ndarray, col: int) -> None:
    """``sums[:, col] += scale * z_r / |z_r|``."""
    indptr, indices, data, inv_norm = csr
    f = scale * inv_norm[r]
    for p in range(indptr[r], indptr[r + 1]):
        sums[indices[p], col] += data[p] * f


@njit(cache=True)
def _move(csr: Csr, seg: np.ndarray, old: np.ndarray, new: np.ndarray, sums: np.ndarray) -> None:
    """Update the centroid sums for the members whose side changed from ``old`` to ``new``.

    ``old``, ``new``: int8 (n,), 1 = child a, 0 = child b, -1 = neither.
    """
    for i in range(seg.shape[0]):
        if old[i] != new[i] and old[i] >= 0:
            _add_row(csr, seg[i], -1.0, sums, old[i])
        if old[i] != new[i] and new[i] >= 0:
            _add_row(csr, seg[i], 1.0, sums, new[i])


@njit(cache=True)
def _direction(scratch: Scratch, n_touched: int) -> None:
    """Set ``w = c_a - c_b`` on the touched columns, ``c`` being the normalized sums."""
    sums, w, touched = scratch
    sq_a, sq_b = 0.0, 0.0
    for j in touched[:n_touched]:
        sq_a += sums[j, 1] * sums[j, 1]
        sq_b += sums[j, 0] * sums[j, 0]
    inv_a = 1.0 / np.sqrt(sq_a) if sq_a > 0.0 else 0.0
    inv_b = 1.0 / np.sqrt(sq_b) if sq_b > 0.0 else 0.0
    for j in touched[:n_touched]:
        w[j] = sums[j, 1] * inv_a - sums[j, 0] * inv_b


@njit(cache=True)
def _scores(csr: Csr, seg: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = cos(z_seg[i], c_a) - cos(z_seg[i], c_b)`` given ``w = c_a - c_b``.

    ``w``: float32 (n_dims,); ``out``: float64 (n,).
    """
    indptr, indices, data, inv_norm = csr
    for i in range(seg.shape[0]):
        r = seg[i]
        s = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            s += data[p] * w[indices[p]]
        out[i] = s * inv_norm[r]


@njit(cache=True)
def _kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest (0-based) of ``values`` (float64 (n,), reordered in place).

    Quickselect with three-way partitioning, so runs of equal values cost O(n).
    """
    lo, hi = 0, values.shape[0] - 1
    while lo < hi:
        a, b, c = values[lo], values[(lo + hi) // 2], values[hi]
        pivot = max(min(a, b), min(max(a, b), c))
        lt, i, gt = lo, lo, hi  # [lo, lt) > pivot, [lt, i) == pivot, (gt, hi] < pivot
        while i <= gt:
            v = values[i]
            if v > pivot:
                values[i], values[lt] = values[lt], v
                lt += 1
                i += 1
            elif v < pivot:
                values[i], values[gt] = values[gt], v
                gt -= 1
            else:
                i += 1
        if k < lt:
            hi = lt - 1
        elif k > gt:
            lo = gt + 1
        else:
            return pivot
    return values[lo]


@njit(cache=True)
def _top_half(scores: np.ndarray, n_a: int, side: np.ndarray) -> bool:
    """Set ``side`` (int8 (n,)) to 1 for the ``n_a`` highest scores, ties to lower positions,
    0 elsewhere. Returns whether ``side`` changed."""
    threshold = _kth_largest(scores.copy(), n_a - 1)
    n_ties = n_a  # members scoring ``threshold`` that go to child a
    for s in scores:
        n_ties -= s > threshold
    changed = False
    for i in range(scores.shape[0]):
        tie = scores[i] == threshold and n_ties > 0
        n_ties -= tie
        new = 1 if scores[i] > threshold or tie else 0
        changed |= new != side[i]
        side[i] = new
    return changed


@njit(cache=True)
def _objective(scratch: Scratch, n_touched: int) -> float:
    """Spherical 2-means objective ``|S_a| + |S_b|`` (= sum of member cosines to their centroid)."""
    sums, touched = scratch[0], scratch[2]
    sq_a, sq_b = 0.0, 0.0
    for j in touched[:n_touched]:
        sq_a += sums[j, 1] * sums[j, 1]
        sq_b += sums[j, 0] * sums[j, 0]
    return np.sqrt(sq_a) + np.sqrt(sq_b)


@njit(cache=True)
def _two_means(
    csr: Csr,
    seg: np.ndarray,
    first_a: int,
    first_b: int,
    n_iter: int,
    scratch: Scratch,
    n_touched: int,
    side: np.ndarray,
) -> float:
    """Balanced 2-means of ``seg`` from two seed members; ``side`` (int8 (n,)) gets 1 for the
    ``ceil(n / 2)`` members of child a, 0 for child b. Returns the objective; leaves the centroid
    sums of ``scratch`` zero again."""
    n = seg.shape[0]
    n_a = (n + 1) // 2
    side[:] = -1
    side[first_a], side[first_b] = 1, 0
    _move(csr, seg, np.full(n, -1, dtype=np.int8), side, scratch[0])
    scores = np.empty(n)
    for _ in range(n_iter):
        _direction(scratch, n_touched)
        _scores(csr, seg, scratch[1], scores)
        new_side = side.copy()
        if not _top_half(scores, n_a, new_side):
            break
        _move(csr, seg, side, new_side, scratch[0])
        side[:] = new_side
    objective = _objective(scratch, n_touched)
    for j in scratch[2][:n_touched]:
        scratch[0][j, 0], scratch[0][j, 1] = 0.0, 0.0
    return objective


@njit(cache=True)
def _split_segment(
    csr: Csr, seg: np.ndarray, seeds: np.ndarray, n_iter: int, scratch: Scratch
) -> None:
    """Split ``seg`` (int64 (n,) label ids, n >= 2, sorted) in place into 2-means halves.

    ``seeds``: int64 (2 * restarts,), pairs of distinct positions of seed members; the split of
    the pair with the highest objective is kept (the first on ties). Afterwards ``seg`` holds
    the ``ceil(n / 2)`` labels of child a, then those of child b, each half still sorted by
    label id. Score ties go to the lower label id.
    """
    n = seg.shape[0]
    n_a = (n + 1) // 2
    n_touched = _columns(csr, seg, scratch)
    side = np.empty(n, dtype=np.int8)
    best = np.empty(n, dtype=np.int8)
    best_objective = -1.0
    for r in range(seeds.shape[0] // 2):
        objective = _two_means(
            csr, seg, seeds[2 * r], seeds[2 * r + 1], n_iter, scratch, n_touched, side
        )
        if objective > best_objective:
            best_objective = objective
            best[:] = side
    members = seg.copy()
    pos_a, pos_b = 0, n_a
    for i in range(n):
        if best[i] == 1:
            seg[pos_a] = members[i]
            pos_a += 1
        else:
            seg[pos_b] = members[i]
            pos_b += 1
    for j in scratch[2][:n_touched]:
        scratch[1][j] = 0.0


@njit(cache=True, parallel=True)
def _split_depth(
    csr: Csr, order: np.ndarray, ptr: np.ndarray, jobs: np.ndarray, n_iter: int, scratch: Scratch
) -> None:
    """Split the clusters of one binary depth in parallel, ``order`` (int64 (n_labels,)) in place.

    ``ptr``: int64 (n_clusters + 1,); ``jobs``: int64 (1 + 2 * restarts, m), per cluster to split
    its id, then the positions of its seed member pairs. ``scratch``: per-chunk scratch stacked
    on a first axis of length n_chunks; chunk ``c`` splits jobs ``c``, ``c + n_chunks``, ...
    """
    n_chunks = min(scratch[0].shape[0], jobs.shape[1])
    for c in prange(n_chunks):
        mine = (scratch[0][c], scratch[1][c], scratch[2][c])
        for j in range(c, jobs.shape[1], n_chunks):
            seg = order[ptr[jobs[0, j]] : ptr[jobs[0, j] + 1]]
            _split_segment(csr, seg, jobs[1:, j], n_iter, mine)


def _split_jobs(seed: int, depth: int, sizes: np.ndarray, restarts: int = 1) -> np.ndarray:
    """Clusters of a depth to split and, per restart, two distinct random seed members.

    ``sizes``: int64 (n_clusters,). Returns int64 (1 + 2 * restarts, m): cluster id (size >= 2),
    then pairs of positions in the cluster, drawn from a generator seeded with ``(seed, depth)``.
    """
    ids = np.flatnonzero(sizes >= 2)
    rng = np.random.default_rng([seed % 2**64, depth])
    rows = [ids]
    for _ in range(restarts):
        first = rng.integers(0, sizes[ids])
        second = rng.integers(0, sizes[ids] - 1)
        second += second >= first
        rows += [first, second]
    return np.stack(rows).astype(np.int64)


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


def _split_all(z: sp.csr_matrix, cfg: TreeConfig, n_depths: int) -> list[np.ndarray]:
    """Run the binary splits; returns ``ptr`` int64 (n_clusters + 1,) per depth 0..D, and the
    final ``order`` int64 (n_labels,) appended last."""
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
    for depth in range(1, n_depths + 1):
        ptr, sizes = ptrs[-1], np.diff(ptrs[-1])
        jobs = _split_jobs(cfg.seed, depth, sizes, cfg.kmeans_restarts)
        _split_depth(csr, order, ptr, jobs, cfg.kmeans_iter, scratch)
        mids = ptr[jobs[0]] + (sizes[jobs[0]] + 1) // 2
        ptrs.append(np.sort(np.concatenate([ptr, mids])))
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
        return cls(C, None if config is None else TreeConfig.model_validate(config))
