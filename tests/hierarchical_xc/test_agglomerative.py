"""Complete-link trees on label co-occurrence: distances, merges checked by hand, the tie rebuild
and the depth bound."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.families.hierarchical_xc.agglomerative import (
    GroupTree,
    _Local,
    agglomerate,
    condensed_distances,
    kraft_depth,
)

# Labels A, B, C, D: 3 docs {A, B}, 2 docs {A, C}, 5 docs {A}, 7 docs {B}, 1 doc {D}.
DOCS = [[0, 1]] * 3 + [[0, 2]] * 2 + [[0]] * 5 + [[1]] * 7 + [[3]]


def labels(docs: list[list[int]], n_labels: int) -> sp.csc_matrix:
    rows = [i for i, d in enumerate(docs) for _ in d]
    cols = [c for d in docs for c in d]
    return sp.csc_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(docs), n_labels))


def clusters(tree: GroupTree) -> set[frozenset[int]]:
    """The label set under every merge of ``tree``."""
    under: dict[int, frozenset[int]] = {i: frozenset([i]) for i in range(tree.n)}
    for k, (a, b) in enumerate(tree.kids.tolist()):
        under[tree.n + k] = under[a] | under[b]
    return {under[tree.n + k] for k in range(len(tree.kids))}


def test_distances_of_the_hand_example() -> None:
    Y = labels(DOCS, 4)  # pairs AB AC AD BC BD CD: counts 3 2 0 0 0 0
    assert condensed_distances(Y, "count").tolist() == [0, 1, 3, 3, 3, 3]
    # A: 10 docs, B: 10, C: 2; IoU(A, B) = 3 / 17, IoU(A, C) = 2 / 10
    iou = condensed_distances(Y, "iou")
    assert np.allclose(iou, [1 - 3 / 17, 0.8, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="distance 'cosine'"):
        condensed_distances(Y, "cosine")


def test_count_merges_the_most_frequent_pair_first() -> None:
    # count: AB at 0; then AB-C, AB-D and C-D are all 3 apart (complete link): one tied run
    # of parts {AB, C, D}, rebuilt shallowest: C and D first, then with AB.
    tree = agglomerate(labels(DOCS, 4), "count", budget=8)
    assert clusters(tree) == {frozenset({0, 1}), frozenset({2, 3}), frozenset({0, 1, 2, 3})}
    assert (tree.depth, tree.natural_depth, tree.flattened) == (2, 2, 0)


def test_iou_merges_the_most_overlapping_pair_first() -> None:
    # iou: AC at 0.8 (before AB at 14/17); AC-B, AC-D, B-D are all 1 apart: parts {AC, B, D}.
    tree = agglomerate(labels(DOCS, 4), "iou", budget=8)
    assert clusters(tree) == {frozenset({0, 2}), frozenset({1, 3}), frozenset({0, 1, 2, 3})}


def test_labels_that_never_co_occur_make_a_balanced_tree() -> None:
    tree = agglomerate(labels([[i] for i in range(8)], 8), "count", budget=8)
    assert (tree.depth, tree.natural_depth) == (3, 3)  # all tied: log2(8), not a chain
    assert len(tree.kids) == 7 and len(clusters(tree)) == 7


def nested(n: int) -> sp.csc_matrix:
    """Docs {0..k} for k = 1..n-1: |i and j| = n - max(i, j), so complete link chains
    {0, 1}, {0, 1, 2}, ... at distinct distances (no ties)."""
    return labels([list(range(k + 1)) for k in range(1, n)], n)


def test_a_chain_is_kept_within_the_budget() -> None:
    tree = agglomerate(nested(8), "count", budget=8)
    assert (tree.depth, tree.natural_depth, tree.flattened) == (7, 7, 0)
    assert clusters(tree) == {frozenset(range(k + 1)) for k in range(1, 8)}


def test_the_depth_bound_flattens_the_deepest_merges_under_the_root() -> None:
    # root (7 deep) -> {0..6} + 7 -> {0..5} + 6 + 7 -> {0..4} (4 deep) + 5 + 6 + 7: 2**4 + 3
    # = 19 <= 2**5 fits; the parts joined shallowest: {5, 6}, then 7, then {0..4}.
    tree = agglomerate(nested(8), "count", budget=5)
    assert (tree.depth, tree.natural_depth, tree.flattened) == (5, 7, 3)
    kept = {frozenset(range(k + 1)) for k in range(1, 5)}
    assert clusters(tree) == kept | {frozenset({5, 6}), frozenset({5, 6, 7}), frozenset(range(8))}
    balanced = agglomerate(nested(8), "count", budget=3)
    assert balanced.depth == 3 and len(clusters(balanced)) == 7
    with pytest.raises(ValueError, match="8 labels do not fit a binary tree of depth 2"):
        agglomerate(nested(8), "count", budget=2)


def test_one_label_is_its_own_tree() -> None:
    tree = agglomerate(labels([[0]], 1), "iou", budget=1)
    assert tree.kids.shape == (0, 2) and tree.depth == 0


def test_kraft_depth_is_what_joining_the_shallowest_first_reaches() -> None:
    assert kraft_depth([0, 0, 0]) == 2 and kraft_depth([1, 0]) == 2
    assert kraft_depth([2, 0, 0, 0, 0]) == 3 and kraft_depth([5]) == 5
    rng = np.random.default_rng(0)
    for _ in range(50):
        depths = rng.integers(0, 6, size=rng.integers(2, 12)).tolist()
        tree = _Local(0)
        parts = []
        for d in depths:  # a part of depth d: a chain of d merges above a fresh leaf
            tree.depth.append(d)
            tree.size.append(1)
            parts.append(len(tree.depth) - 1)
        tree.n = len(tree.depth)
        root = tree.shallowest_tree(parts)
        assert tree.depth[root] == kraft_depth(depths), depths
