"""The whole label tree of HierarchicalXC: agglomerative trees of label groups (one group up to
``max_agglomerate`` labels, else balanced 2-means groups joined by the 2-means tree above
them), and its form as a :class:`~xmc_core.linear.tree.LabelTree` level chain.

A :class:`LabelTree` needs every label at the same level; labels of a binary tree sit at
different depths. A label above the deepest level is continued down by *only children*: one
node per level with the label as its only descendant, so the chain has the binary tree's
decisions and, below a shallow label, nodes whose probability given their parent is 1 (see
:mod:`xmc_core.families.hierarchical_xc.ranker`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import InputError
from xmc_core.families.hierarchical_xc.agglomerative import GroupTree, agglomerate
from xmc_core.families.hierarchical_xc.config import HierarchicalXcConfig
from xmc_core.linear.tree import LabelTree, binary_depth
from xmc_core.progress import RateLog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hierarchy:
    """A rooted tree over ``n_labels`` labels: node ids below ``n_labels`` are the labels (the
    leaves), node ``n_labels + k`` is internal with children ``children[k]`` (two or more);
    the root is the last internal node (label 0 when there is a single label)."""

    n_labels: int
    children: list[tuple[int, ...]]

    @property
    def root(self) -> int:
        return self.n_labels + len(self.children) - 1 if self.children else 0

    def check(self) -> str | None:
        """Why this is not a tree holding every label once, or None."""
        seen = np.zeros(self.n_labels + len(self.children), dtype=np.int64)
        for k, kids in enumerate(self.children):
            if len(kids) < 2 or min(kids) < 0 or max(kids) >= self.n_labels + k:
                return f"node {self.n_labels + k} has children {kids}"
            seen[list(kids)] += 1
        seen[self.root] += 1
        if np.any(seen != 1):
            return f"node {int(np.flatnonzero(seen != 1)[0])} is not reached exactly once"
        return None

    def label_depths(self) -> np.ndarray:
        """Depth of each label below the root: int64 (n_labels,)."""
        depth = np.zeros(self.n_labels + len(self.children), dtype=np.int64)
        for k in range(len(self.children) - 1, -1, -1):  # parents come after their children
            depth[list(self.children[k])] = depth[self.n_labels + k] + 1
        return depth[: self.n_labels]

    def to_label_tree(self) -> LabelTree:
        """The level chain: level t + 1 lists the children of level t's nodes in order (a label
        above the last level is its own only child), so siblings are contiguous; the labels'
        level is last. Depth: the deepest label's (at least 1)."""
        problem = self.check()
        if problem is not None:
            raise ValueError(f"not a label hierarchy: {problem}")
        levels = max(1, int(self.label_depths().max()))
        nodes, C = [self.root], []
        for t in range(levels):
            below: list[int] = []
            parent: list[int] = []
            for p, node in enumerate(nodes):
                kids = self.children[node - self.n_labels] if node >= self.n_labels else (node,)
                below.extend(kids)
                parent.extend([p] * len(kids))
            of = np.asarray(parent, dtype=np.int64)
            if t == levels - 1:  # the labels' level: one row per label, in label order
                of = np.empty(self.n_labels, dtype=np.int64)
                of[below] = parent
            C.append(_assignment(of, len(nodes)))
            nodes = below
        return LabelTree(C)


def _assignment(parent: np.ndarray, n_parents: int) -> sp.csr_matrix:
    n = len(parent)
    return sp.csr_matrix((np.ones(n, np.float32), parent, np.arange(n + 1)), (n, n_parents))


def required_depth(n_labels: int, cfg: HierarchicalXcConfig) -> int:
    """The least ``max_depth`` that holds ``n_labels`` labels: ceil(log2 n) for one group, else
    the 2-means levels above the groups plus ceil(log2 max_agglomerate)."""
    if n_labels <= cfg.max_agglomerate:
        return (n_labels - 1).bit_length()
    return binary_depth(n_labels, cfg.max_agglomerate) + (cfg.max_agglomerate - 1).bit_length()


def label_groups(
    Z: sp.csr_matrix, cfg: HierarchicalXcConfig, tree: TreeConfig
) -> tuple[list[np.ndarray], LabelTree | None]:
    """The labels agglomerated together, and the 2-means tree above them (None: one group).

    ``Z``: csr (n_labels, d) label features. Above ``max_agglomerate`` labels, balanced
    2-means (``tree``'s iterations, restarts and seed) splits them to leaves of at most
    ``max_agglomerate``; group k is leaf cluster k's labels."""
    n = Z.shape[0]
    if n <= cfg.max_agglomerate:
        return [np.arange(n, dtype=np.int64)], None
    kmeans = TreeConfig(
        branching=2, max_leaf_size=cfg.max_agglomerate, kmeans_iter=tree.kmeans_iter,
        kmeans_restarts=tree.kmeans_restarts, seed=tree.seed,
    )  # fmt: skip
    top = LabelTree.build(Z, kmeans)
    leaf_of = top.C[-1].indices.astype(np.int64)
    order = np.argsort(leaf_of, kind="stable")
    bounds = np.searchsorted(leaf_of[order], np.arange(1, top.level_sizes()[-2]))
    return np.split(order, bounds), top


def build_hierarchy(
    Y: sp.csr_matrix, Z: sp.csr_matrix, cfg: HierarchicalXcConfig, tree: TreeConfig
) -> Hierarchy:
    """The family's label tree. ``Y``: csr (n_docs, n_labels) training labels; ``Z``: csr
    (n_labels, d) label features (used above ``max_agglomerate`` labels only)."""
    n = Y.shape[1]
    if Z.shape[0] != n:
        raise ValueError(f"Z has {Z.shape[0]} rows for {n} labels")
    need = required_depth(n, cfg)
    if need > cfg.max_depth:
        raise InputError(
            None,
            f"hierarchical_xc.max_depth={cfg.max_depth} cannot hold {n:,} labels "
            f"(max_agglomerate={cfg.max_agglomerate:,}): a binary tree needs {need} levels",
            f"set hierarchical_xc.max_depth to at least {need}",
        )
    groups, top = label_groups(Z, cfg, tree)
    budget = cfg.max_depth - (0 if top is None else top.depth - 1)
    Yc = sp.csc_matrix(Y, dtype=np.float32)
    Yc.data[:] = 1.0
    children: list[tuple[int, ...]] = []
    roots: list[int] = []
    progress = RateLog(log, f"agglomerating {n:,} labels", len(groups), "groups")
    trees: list[GroupTree] = []
    for members in groups:
        trees.append(agglomerate(Yc[:, members], cfg.distance, budget))
        roots.append(_place(trees[-1], members, n, children))
        progress.update(1)
    log.info(
        "agglomerative tree: %d group(s) of at most %s labels, %d levels deep (%d before "
        "the depth bound; %d merges flattened) below %d level(s) of 2-means",
        len(groups), f"{max(len(g) for g in groups):,}", max(t.depth for t in trees),
        max(t.natural_depth for t in trees), sum(t.flattened for t in trees),
        0 if top is None else top.depth - 1,
    )  # fmt: skip
    if top is not None:
        _join_groups(top, roots, n, children)
    return Hierarchy(n, children)


def _place(group: GroupTree, members: np.ndarray, n: int, children: list[tuple[int, ...]]) -> int:
    """Append a group's merges to ``children`` with global ids; returns its root's id."""
    base = n + len(children)
    for a, b in group.kids.tolist():
        children.append(
            tuple(int(members[c]) if c < group.n else base + c - group.n for c in (a, b))
        )
    return int(members[0]) if group.n == 1 else n + len(children) - 1


def _join_groups(top: LabelTree, roots: list[int], n: int, children: list[tuple[int, ...]]) -> None:
    """The 2-means tree above the groups' roots (a cluster with one child is that child)."""
    nodes = roots
    for t in range(top.depth - 2, -1, -1):
        parent = top.C[t].indices.astype(np.int64)  # sorted: siblings are contiguous
        bounds = np.flatnonzero(np.diff(parent)) + 1
        joined = []
        for kids in np.split(np.asarray(nodes, dtype=np.int64), bounds):
            if len(kids) > 1:
                children.append(tuple(int(k) for k in kids))
                joined.append(n + len(children) - 1)
            else:
                joined.append(int(kids[0]))
        nodes = joined
