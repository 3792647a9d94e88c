"""Compiled kernels of the label tree: balanced spherical 2-means splits of whole depths.

Each cluster is split with dense scratch vectors of length ``n_dims`` of which only the touched
entries are ever written or cleared, so one k-means iteration over a whole depth costs
``O(nnz(Z))``. Clusters of a depth are split in parallel; a cluster's result depends only on its
members and its seed members, drawn in cluster order from a generator seeded with
``(seed, depth)``, so the tree is the same for any number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

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
def split_depth(
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


def split_jobs(seed: int, depth: int, sizes: np.ndarray, restarts: int = 1) -> np.ndarray:
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
