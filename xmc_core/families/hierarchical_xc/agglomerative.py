"""Complete-link agglomerative clustering of labels on their co-occurrence, into a binary tree
of bounded depth.

Complete link on co-occurrence distances ties a lot: most label pairs never co-occur, so many
merges happen at one distance, and the order in which scipy happens to make them can chain
(delicious-bow's 983 labels: a tree 164 deep). A run of merges at one distance h joins clusters
that are all exactly h apart (each pair's complete-link distance is <= h, the diameter of
their union, and >= h, or they would have merged below h), so *any* binary tree over them is a
complete-link outcome. Each run is collapsed and rebuilt as the shallowest binary tree over its
parts: merging the two shallowest parts first gives depth ``ceil(log2(sum 2**d_i))`` over parts
of depths d_i, the least possible (Golumbic 1976). Should the tree still be deeper than the
budget, the deepest nodes under the root are flattened (their parts joined as ties) until that
bound fits.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.cluster.hierarchy import linkage

DISTANCES = ("count", "iou")


def kraft_depth(depths: list[int]) -> int:
    """Depth of the shallowest binary tree over parts of depths ``depths``:
    ``ceil(log2(sum 2**d))`` (exact, in integers)."""
    return (sum(1 << d for d in depths) - 1).bit_length()


def condensed_distances(Y: sp.csc_matrix, distance: str) -> np.ndarray:
    """Co-occurrence distances of the labels (columns) of ``Y``: csc (n_docs, n) binary, as
    scipy's condensed float64 vector of the n (n - 1) / 2 pairs i < j.

    ``count``: ``max_count - |i and j|`` (max_count the largest count of any pair, so the
    distances are >= 0 and merge like ``-|i and j|``); ``iou``: ``1 - |i and j| / |i or j|``
    (1 for labels without documents)."""
    if distance not in DISTANCES:
        raise ValueError(f"distance {distance!r} is not one of {DISTANCES}")
    n = Y.shape[1]
    co = sp.triu(sp.csr_matrix(Y.T @ Y), k=1).tocoo()
    i, j = co.row.astype(np.int64), co.col.astype(np.int64)
    counts = co.data.astype(np.float64)
    at = n * i - i * (i + 1) // 2 + (j - i - 1)
    if distance == "count":
        top = float(counts.max()) if counts.size else 0.0
        out = np.full(n * (n - 1) // 2, top)
        out[at] = top - counts
        return out
    docs = np.asarray(Y.sum(axis=0), dtype=np.float64).ravel()
    out = np.ones(n * (n - 1) // 2)
    out[at] = 1.0 - counts / (docs[i] + docs[j] - counts)
    return out


@dataclass
class _Local:
    """The nodes of one group's tree: 0..n-1 its labels (positions in the group), n + k the
    k-th merge, ``kids[k]`` its two children; ``depth``/``size`` cover every node."""

    n: int
    kids: list[tuple[int, int]] = field(default_factory=list)
    depth: list[int] = field(init=False)
    size: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.depth, self.size = [0] * self.n, [1] * self.n

    def merge(self, a: int, b: int) -> int:
        self.kids.append((a, b))
        self.depth.append(max(self.depth[a], self.depth[b]) + 1)
        self.size.append(self.size[a] + self.size[b])
        return self.n + len(self.kids) - 1

    def shallowest_tree(self, parts: list[int]) -> int:
        """Join ``parts`` two shallowest first (then smallest, then lowest id): a tree of depth
        :func:`kraft_depth` of theirs; returns its root."""
        heap = [(self.depth[p], self.size[p], p) for p in parts]
        heapq.heapify(heap)
        while len(heap) > 1:
            a, b = heapq.heappop(heap)[2], heapq.heappop(heap)[2]
            new = self.merge(a, b)
            heapq.heappush(heap, (self.depth[new], self.size[new], new))
        return heap[0][2]


def _tied_parts(Z: np.ndarray, n: int) -> list[list[int] | None]:
    """Per scipy merge k: the parts it joins once runs of merges at one height are collapsed
    (scipy ids: < n labels, n + k' merges), or None for a merge absorbed into its parent."""
    parts: list[list[int] | None] = [None] * len(Z)
    for k, (a, b, height, _) in enumerate(Z):
        joined: list[int] = []
        for child in (int(a), int(b)):
            inner = child - n
            below = parts[inner] if inner >= 0 and Z[inner, 2] == height else None
            if below is not None:  # a tie: its parts join this merge's
                joined.extend(below)
                parts[inner] = None
            else:
                joined.append(child)
        parts[k] = joined
    return parts


def _bounded(tree: _Local, root: int, budget: int) -> tuple[int, int]:
    """``root``'s tree cut to depth <= ``budget`` (>= ceil(log2 labels)): the deepest node
    under the root is replaced by its children until the parts fit; returns (root, nodes
    flattened)."""
    if tree.depth[root] <= budget:
        return root, 0
    heap = [(-tree.depth[root], -tree.size[root], root)]
    leaves: list[int] = []
    total, flattened = 1 << tree.depth[root], 0
    while (total - 1).bit_length() > budget:
        node = heapq.heappop(heap)[2]
        total -= 1 << tree.depth[node]
        flattened += 1
        for child in tree.kids[node - tree.n]:
            total += 1 << tree.depth[child]
            if child < tree.n:
                leaves.append(child)
            else:
                heapq.heappush(heap, (-tree.depth[child], -tree.size[child], child))
    return tree.shallowest_tree(leaves + [entry[2] for entry in heap]), flattened


@dataclass(frozen=True)
class GroupTree:
    """One group's binary tree: ``kids`` (m, 2) int64, merge k joins ``kids[k]`` (ids < n:
    the group's labels by position, n + k': merge k'), the root last (no merges: one label);
    ``natural_depth``: its depth before the depth bound, ``flattened``: merges the bound
    removed."""

    n: int
    kids: np.ndarray
    depth: int
    natural_depth: int
    flattened: int


def agglomerate(Y: sp.csc_matrix, distance: str, budget: int) -> GroupTree:
    """Complete-link tree of the labels (columns) of ``Y``: csc (n_docs, n) binary, with tied
    merges rebuilt shallowest and at most ``budget`` levels (needs ``2**budget >= n``)."""
    n = Y.shape[1]
    if n < 1 or (n - 1).bit_length() > budget:
        raise ValueError(f"{n} labels do not fit a binary tree of depth {budget}")
    tree = _Local(n)
    if n == 1:
        return GroupTree(1, np.zeros((0, 2), np.int64), 0, 0, 0)
    Z = linkage(condensed_distances(Y, distance), method="complete")
    built: dict[int, int] = {}
    for k, parts in enumerate(_tied_parts(Z, n)):
        if parts is not None:
            built[n + k] = tree.shallowest_tree([built[p] if p >= n else p for p in parts])
    root = built[2 * n - 2]
    natural = tree.depth[root]
    root, flattened = _bounded(tree, root, budget)
    return GroupTree(n, _reachable(tree, root), tree.depth[root], natural, flattened)


def _reachable(tree: _Local, root: int) -> np.ndarray:
    """The merges under ``root``, renumbered children first: (m, 2) int64."""
    order: list[int] = []
    stack = [root]
    while stack:  # pre-order; reversed, every merge comes after its children
        node = stack.pop()
        if node >= tree.n:
            order.append(node)
            stack.extend(tree.kids[node - tree.n])
    order.reverse()
    new_id = {old: tree.n + k for k, old in enumerate(order)}
    kids = [[new_id.get(c, c) for c in tree.kids[old - tree.n]] for old in order]
    return np.array(kids, dtype=np.int64).reshape(-1, 2)
