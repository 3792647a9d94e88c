"""A warm start's label tree: the base keeps its clusters, new labels join the closest leaf."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import InputError
from xmc_core.linear.tree import LabelTree, check_chain
from xmc_core.linear.tree_growth import grow_tree, leaf_centroids, place_new_labels


def assign(rows_to_cols: list[int], n_cols: int) -> sp.csr_matrix:
    n = len(rows_to_cols)
    return sp.csr_matrix((np.ones(n), rows_to_cols, np.arange(n + 1)), (n, n_cols))


# 2 parents, 4 leaves of 2 labels; label 2k and 2k+1 sit in leaf k with feature e_k
BASE = LabelTree([assign([0, 0], 1), assign([0, 0, 1, 1], 2), assign([0, 0, 1, 1, 2, 2, 3, 3], 4)])
KNOWN = [[1, 0, 0, 0]] * 2 + [[0, 1, 0, 0]] * 2 + [[0, 0, 1, 0]] * 2 + [[0, 0, 0, 1]] * 2


def features(*new: list[float]) -> sp.csr_matrix:
    return sp.csr_matrix(np.array([*KNOWN, *new], dtype=np.float32))


def test_new_labels_join_the_closest_leaf_ties_low_and_featureless_the_smallest() -> None:
    Z = features([0, 0, 3, 0], [0, 0, 0, 0], [0, 1, 1, 0], [0.2, 0, 0, 0.9])
    assert leaf_centroids(BASE, Z).toarray().tolist() == np.eye(4).tolist()
    # e_2 -> leaf 2; no features -> the smallest leaf once label 8 is in (leaf 0, the lowest of
    # the three of size 2); a tie between leaves 1 and 2 -> leaf 1; mostly e_3 -> leaf 3
    assert place_new_labels(BASE, Z).tolist() == [2, 0, 1, 3]
    grown, growth = grow_tree(BASE, Z, TreeConfig(max_leaf_size=3))
    assert grown.level_sizes() == [2, 4, 12] and check_chain(grown.C) is None
    assert growth.new_label_leaves.tolist() == [2, 0, 1, 3] and growth.split_leaves == []
    assert growth.kept_leaves == {}  # every leaf got a new label
    assert grown.label_to_cluster(-2)[:8].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_leaf_past_its_bound_is_split_in_place_and_the_others_are_kept() -> None:
    Z = features([0, 0, 1, 0.1])
    grown, growth = grow_tree(BASE, Z, TreeConfig(max_leaf_size=2))
    assert check_chain(grown.C) is None and grown.level_sizes() == [2, 5, 9]
    assert growth.split_leaves == [2] and growth.kept_leaves == {0: 0, 1: 1, 4: 3}
    leaves = grown.label_to_cluster(-2)
    assert leaves[[0, 1, 2, 3, 6, 7]].tolist() == [0, 0, 1, 1, 4, 4]
    assert sorted(leaves[[4, 5, 8]].tolist()) in ([2, 2, 3], [2, 3, 3])  # leaf 2 in two pieces
    assert grown.C[1].indices.tolist() == [0, 0, 1, 1, 1]  # the pieces stay under parent 1
    assert np.bincount(leaves).max() <= 2


def test_guests_split_no_leaf_and_join_the_closest_piece_of_one_that_splits() -> None:
    cfg = TreeConfig(max_leaf_size=2)
    grown, growth = grow_tree(BASE, features([0, 0, 1, 0.1]), cfg, np.array([8]))
    assert grown.level_sizes() == [2, 4, 9] and growth.split_leaves == []
    assert grown.label_to_cluster(-2)[8] == 2  # leaf 2 holds 3 labels: a guest counts for none
    # label 8 (a host) splits leaf 2; guest 9, exactly e_2, joins a piece whose centroid is e_2
    Z = features([0, 0, 1, 0.1], [0, 0, 1, 0])
    grown, growth = grow_tree(BASE, Z, cfg, np.array([9]))
    leaves = grown.label_to_cluster(-2)
    assert grown.level_sizes() == [2, 5, 10] and growth.split_leaves == [2]
    assert check_chain(grown.C) is None and np.bincount(leaves[:9]).max() <= 2
    assert leaves[9] != leaves[8] and leaves[9] in (leaves[4], leaves[5])


def test_no_new_label_gives_the_base_tree_back() -> None:
    grown, growth = grow_tree(BASE, features(), TreeConfig(max_leaf_size=2))
    assert grown.level_sizes() == BASE.level_sizes()
    assert all((a != b).nnz == 0 for a, b in zip(grown.C, BASE.C, strict=True))
    assert growth.kept_leaves == {0: 0, 1: 1, 2: 2, 3: 3} and len(growth.new_label_leaves) == 0


def test_a_flat_base_stays_flat_until_it_outgrows_a_leaf() -> None:
    flat = LabelTree([assign([0, 0, 0], 1)])
    Z = sp.csr_matrix(np.eye(5, dtype=np.float32))
    grown, growth = grow_tree(flat, Z, TreeConfig(max_leaf_size=5))
    assert grown.level_sizes() == [5] and growth.new_label_leaves.tolist() == [0, 0]
    grown, growth = grow_tree(flat, Z, TreeConfig(max_leaf_size=2, branching=2))
    assert grown.depth > 1 and growth.split_leaves == [0] and check_chain(grown.C) is None


def test_fewer_feature_rows_than_base_labels_is_refused() -> None:
    with pytest.raises(InputError, match="label feature rows"):
        grow_tree(BASE, sp.csr_matrix(np.ones((3, 4), np.float32)), TreeConfig())


def test_placement_is_the_same_scored_a_label_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import xmc_core.linear.tree_growth as growth

    Z = features([0, 0, 3, 0], [0, 0, 0, 0], [0, 1, 1, 0], [0.2, 0, 0, 0.9])
    monkeypatch.setattr(growth, "CHUNK_ROWS", 1)
    assert place_new_labels(BASE, Z).tolist() == [2, 0, 1, 3]
