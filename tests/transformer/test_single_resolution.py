"""X-Transformer's parts: the cluster tree and the matcher's single level, the matcher head as
ranker level 0, the label level's negatives, and the step budget matched to XR-Transformer."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import MatcherConfig, RankerConfig, TreeConfig
from xmc_core.errors import InputError
from xmc_core.families.x_transformer.single_resolution import (
    cluster_tree,
    head_as_level,
    label_matching,
    neural_pifa,
    single_level_matcher,
    training_pairs,
    xr_transformer_steps,
)
from xmc_core.linear.beam import ChunkedLevel, beam_search
from xmc_core.linear.tree import LabelTree, planned_level_sizes
from xmc_core.transformer.ranker import concat_features
from xmc_core.transformer.shortlist import level_choices, matcher_levels, top_clusters


def random_z(n_labels: int, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.random((n_labels, 6)).astype(np.float32))


@pytest.mark.parametrize(("n_labels", "leaf"), [(2, 1), (3, 2), (7, 2), (48, 4), (300, 8)])
def test_planned_level_sizes_are_those_of_the_built_tree(n_labels: int, leaf: int) -> None:
    cfg = TreeConfig(branching=4, max_leaf_size=leaf)
    built = LabelTree.build(random_z(n_labels), cfg).level_sizes()
    assert planned_level_sizes(n_labels, cfg) == built


def test_the_tree_is_cut_at_its_finest_clusters() -> None:
    cfg = TreeConfig(branching=4, max_leaf_size=4)
    tree = LabelTree.build(random_z(48), cfg)
    assert tree.level_sizes() == [4, 16, 48]  # 48 labels / 4 per leaf: binary depth 4
    cut = cluster_tree(tree)
    assert cut.level_sizes() == [16, 48]
    assert (cut.C[1] != tree.C[-1]).nnz == 0  # the same clusters as the finest level
    assert np.bincount(cut.C[1].indices).max() <= 4


def test_the_matcher_trains_one_level_the_clusters() -> None:
    tree = cluster_tree(LabelTree.build(random_z(48), TreeConfig(branching=4, max_leaf_size=4)))
    user = MatcherConfig(min_clusters=4, max_clusters=64, steps_per_level=7)
    assert matcher_levels(tree, user) == [0, 1]  # XR-Transformer's choice would train both
    single = single_level_matcher(tree, user)
    assert matcher_levels(tree, single) == [0]
    assert (single.bootstrap, single.importance_weights, single.steps_per_level) == (
        False,
        False,
        7,
    )
    assert level_choices(tree, single) == [
        "matcher: level 1 (48 clusters) skipped: more than matcher.max_clusters=16"
    ]


def test_clusters_of_one_label_are_refused() -> None:
    tree = cluster_tree(LabelTree.build(random_z(8), TreeConfig(branching=2, max_leaf_size=1)))
    with pytest.raises(InputError, match=r"(?s)8 clusters for 8 labels.*raise tree.max_leaf_size"):
        single_level_matcher(tree, MatcherConfig())


def head_case(seed: int = 0) -> tuple[np.ndarray, ...]:
    """A head (K=6, h=5), 30 unit embeddings, 4 TF-IDF columns."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(6, 5)).astype(np.float32)
    b = rng.normal(size=6).astype(np.float32)
    E = rng.normal(size=(30, 5)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    X = sp.random(30, 4, density=0.5, format="csr", dtype=np.float32, random_state=seed)
    return W, b, E, X


@pytest.mark.parametrize(("weight", "bias"), [(1.0, 1.0), (0.5, 2.0)])
def test_level_zero_scores_are_the_matchers(weight: float, bias: float) -> None:
    W, b, E, X = head_case()
    W0 = head_as_level(W, b, 4, weight, bias)
    assert W0.shape == (4 + 5 + 1, 6) and W0[:4].nnz == 0  # nothing on TF-IDF
    Xc = concat_features(X, E, weight)
    with_bias = sp.hstack([Xc, np.full((30, 1), bias, np.float32)], format="csr")
    np.testing.assert_allclose((with_bias @ W0).toarray(), E @ W.T + b, rtol=1e-5, atol=1e-5)
    # beam search (the model's prediction path) keeps the matcher's own top 3, same scores
    C0 = sp.csr_matrix(np.ones((6, 1), np.float32))
    kept = beam_search(Xc, [ChunkedLevel.build(W0, C0)], [3], "noop", bias)
    want = top_clusters(E, W, b, 3)
    assert np.array_equal(kept.indptr, want.indptr) and np.array_equal(kept.indices, want.indices)
    np.testing.assert_allclose(kept.data, want.data, rtol=1e-5, atol=1e-5)
    # sigmoid is increasing: the same clusters kept
    kept = beam_search(Xc, [ChunkedLevel.build(W0, C0)], [3], "sigmoid", bias)
    assert np.array_equal(kept.indices, want.indices)


def test_a_bias_of_zero_is_refused() -> None:
    W, b, _, _ = head_case()
    with pytest.raises(InputError, match=r"ranker\.bias > 0"):
        head_as_level(W, b, 4, 1.0, 0.0)


def hand_made() -> tuple[sp.csr_matrix, LabelTree, sp.csr_matrix]:
    """6 labels in 3 clusters ({0,1}, {2,3}, {4,5}); 4 documents; the matcher's top clusters."""
    C1 = sp.csr_matrix((np.ones(6, np.float32), [0, 0, 1, 1, 2, 2], np.arange(7)), (6, 3))
    tree = LabelTree([sp.csr_matrix(np.ones((3, 1), np.float32)), C1])
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0],
                                [0, 1, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]], np.float32))  # fmt: skip
    matched = sp.csr_matrix(np.array([[0, 0.7, 0], [0, 0.4, -0.2], [0.9, 0, 0], [0.1, 0, 0]],
                                     np.float32))  # fmt: skip
    return Y, tree, matched


@pytest.mark.parametrize(
    ("negatives", "pairs"),
    [
        ("tfn", [{0, 1}, {2, 3}, {0, 1, 4, 5}, {4, 5}]),
        ("man", [{2, 3}, {2, 3, 4, 5}, {0, 1}, {0, 1}]),
        ("tfn+man", [{0, 1, 2, 3}, {2, 3, 4, 5}, {0, 1, 4, 5}, {0, 1, 4, 5}]),
    ],
)
def test_negatives_give_the_expected_pairs(negatives: str, pairs: list[set[int]]) -> None:
    Y, tree, matched = hand_made()
    M = label_matching(Y, tree, matched, RankerConfig(negatives=negatives))
    got = training_pairs(M, tree)
    assert [set(got[i].indices) for i in range(4)] == pairs


def test_neural_pifa_averages_a_labels_documents() -> None:
    E = np.array([[1, 0], [0, 1], [0.6, 0.8]], np.float32)
    Y = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1]], np.float32))
    Z = neural_pifa(E, Y).toarray()
    np.testing.assert_allclose(Z, [[0.70710677, 0.70710677], [0.6, 0.8]], rtol=1e-6)


def test_step_budget_matches_xr_transformer_on_debian_deps() -> None:
    """42,850 labels, leaves of 100: binary depth 9, levels of 2, 32 and 512 clusters; the CPU
    preset's matcher (16..512 clusters, 150 steps) trains 32 and 512: 300 steps."""
    xr = MatcherConfig(max_clusters=512, steps_per_level=150)
    assert planned_level_sizes(42_850, TreeConfig()) == [2, 32, 512, 42_850]
    assert xr_transformer_steps(42_850, TreeConfig(), xr) == 300
    assert xr_transformer_steps(3_000, TreeConfig(), xr) == 150  # [2, 32, 3000]: one level
