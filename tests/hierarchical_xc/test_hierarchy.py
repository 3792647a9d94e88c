"""The whole label tree: its level chain, the 2-means groups of a large label set, the limits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import InputError
from xmc_core.families.hierarchical_xc.config import HierarchicalXcConfig
from xmc_core.families.hierarchical_xc.hierarchy import (
    Hierarchy,
    build_hierarchy,
    label_groups,
    required_depth,
)
from xmc_core.families.hierarchical_xc.ranker import only_children
from xmc_core.linear.tree import check_chain


def test_the_chain_continues_shallow_labels_as_only_children() -> None:
    h = Hierarchy(3, [(0, 1), (3, 2)])  # root 4 = {{0, 1}, 2}
    assert h.check() is None and h.root == 4
    assert h.label_depths().tolist() == [2, 2, 1]
    tree = h.to_label_tree()
    assert tree.level_sizes() == [2, 3]
    assert tree.C[0].toarray().tolist() == [[1], [1]]  # level 1: node 3, label 2's stand-in
    assert tree.C[1].toarray().tolist() == [[1, 0], [1, 0], [0, 1]]  # labels 0, 1 under 3
    assert only_children(tree.C[0]).tolist() == [False, False]
    assert only_children(tree.C[1]).tolist() == [False, False, True]


def test_a_single_label_is_a_one_level_chain() -> None:
    tree = Hierarchy(1, []).to_label_tree()
    assert tree.level_sizes() == [1] and only_children(tree.C[0]).tolist() == [True]


def test_broken_hierarchies_are_named() -> None:
    assert "node 3 has children (0,)" in Hierarchy(3, [(0,), (3, 1, 2)]).check()
    missing = Hierarchy(3, [(0, 2), (3, 2)])
    assert "node 1 is not reached exactly once" in missing.check()
    with pytest.raises(ValueError, match="not a label hierarchy: node 1"):
        missing.to_label_tree()


def blocks(n_blocks: int, size: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Labels in ``n_blocks`` blocks: each doc holds two labels of one block; the label
    features are one-hot on the block. Returns (Y (docs, L), Z (L, n_blocks))."""
    rows, cols = [], []
    for b in range(n_blocks):
        for i in range(size):
            for j in range(i + 1, size):
                rows += [len(rows) // 2] * 2
                cols += [b * size + i, b * size + j]
    n = n_blocks * size
    Y = sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(cols) // 2, n))
    block_of = np.repeat(np.arange(n_blocks), size)
    Z = sp.csr_matrix((np.ones(n), (np.arange(n), block_of)), shape=(n, n_blocks))
    return Y, Z


def subtree_labels(h: Hierarchy) -> list[frozenset[int]]:
    under: dict[int, frozenset[int]] = {i: frozenset([i]) for i in range(h.n_labels)}
    for k, kids in enumerate(h.children):
        under[h.n_labels + k] = frozenset().union(*(under[c] for c in kids))
    return [under[h.n_labels + k] for k in range(len(h.children))]


def test_large_label_sets_are_agglomerated_inside_2_means_groups() -> None:
    Y, Z = blocks(4, 3)  # 12 labels, max_agglomerate 3: 2-means to 4 groups of 3
    cfg = HierarchicalXcConfig(max_agglomerate=3, max_depth=4)
    groups, top = label_groups(Z, cfg, TreeConfig())
    assert top is not None and top.level_sizes() == [2, 4, 12]
    assert sorted(g.tolist() for g in groups) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    h = build_hierarchy(Y, Z, cfg, TreeConfig())
    assert h.check() is None
    found = set(subtree_labels(h))
    assert all(frozenset(g.tolist()) in found for g in groups)  # each group is a subtree
    assert h.label_depths().max() == 4  # 2 levels of 2-means + ceil(log2 3)
    tree = h.to_label_tree()
    assert check_chain(tree.C) is None and tree.level_sizes() == [2, 4, 8, 12]
    assert sorted(tree.label_to_cluster(0).tolist()) == [0] * 6 + [1] * 6


def test_one_group_needs_no_label_features() -> None:
    Y, _ = blocks(2, 3)
    h = build_hierarchy(Y, sp.csr_matrix((6, 0)), HierarchicalXcConfig(), TreeConfig())
    assert h.check() is None and h.label_depths().max() == 3
    blocks_found = set(subtree_labels(h))
    assert {frozenset({0, 1, 2}), frozenset({3, 4, 5})} <= blocks_found


def test_a_depth_too_small_for_the_labels_is_refused_before_clustering() -> None:
    cfg = HierarchicalXcConfig(max_agglomerate=3, max_depth=3)
    assert required_depth(12, cfg) == 4 and required_depth(3, cfg) == 2
    assert required_depth(42_850, HierarchicalXcConfig()) == 4 + 12
    Y, Z = blocks(4, 3)
    with pytest.raises(InputError, match="max_depth=3 cannot hold 12 labels") as err:
        build_hierarchy(Y, Z, cfg, TreeConfig())
    assert "at least 4" in err.value.fix
