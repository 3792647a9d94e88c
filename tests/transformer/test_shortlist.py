"""Shortlist M(t), importance weights R̂(t), training pairs and top-k clusters, by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import MatcherConfig
from xmc_core.linear.levels import level_targets
from xmc_core.linear.tree import LabelTree
from xmc_core.transformer.shortlist import (
    level_choices,
    level_problem,
    matcher_levels,
    shortlist,
    top_clusters,
)


def hand_tree() -> LabelTree:
    """2 clusters -> 4 clusters (0, 1 under 0; 2, 3 under 1) -> 6 labels [0, 0, 1, 2, 3, 3]."""
    C0 = sp.csr_matrix(np.ones((2, 1)))
    C1 = sp.csr_matrix(([1.0] * 4, ([0, 1, 2, 3], [0, 0, 1, 1])), shape=(4, 2))
    C2 = sp.csr_matrix(([1.0] * 6, (range(6), [0, 0, 1, 2, 3, 3])), shape=(6, 4))
    return LabelTree([C0, C1, C2])


def dense(m: sp.spmatrix | None) -> np.ndarray:
    return np.asarray(m.todense())


# doc 0: labels {0, 1} (cluster 0); doc 1: {3} (cluster 2); doc 2: {2, 4, 5} (clusters 1, 3, 3)
Y = sp.csr_matrix(
    np.array([[1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 0, 1, 1]], dtype=np.float32)
)
P0 = sp.csr_matrix(np.array([[0, 0.7], [0, 0.2], [0.9, 0]], dtype=np.float32))  # P(0)


def test_shortlist_is_matcher_children_plus_teacher_forcing():
    tree = hand_tree()
    targets = level_targets(Y, tree.C)
    assert dense(targets[1]).tolist() == [[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]]
    both = shortlist(targets, tree.C, 1, P0, MatcherConfig())
    # matcher: children of P(0) = {2,3}, {2,3}, {0,1}; teacher forcing: children of Y(0)
    assert dense(both).tolist() == [[1, 1, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1]]
    man = shortlist(targets, tree.C, 1, P0, MatcherConfig(teacher_forcing=False))
    assert dense(man).tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0]]
    tfn = shortlist(targets, tree.C, 1, P0, MatcherConfig(matcher_negatives=False))
    assert dense(tfn).tolist() == [[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]]
    assert shortlist(targets, tree.C, 1, None, MatcherConfig()) is None  # first level: all
    with pytest.raises(ValueError, match="teacher_forcing"):
        shortlist(
            targets, tree.C, 1, P0, MatcherConfig(teacher_forcing=False, matcher_negatives=False)
        )


def test_importance_weights_and_pairs():
    tree = hand_tree()
    problem = level_problem(Y, tree, 1, P0, MatcherConfig(negative_weight=0.5))
    # R(1) = Y C(2): doc 2 has 1 label under cluster 1 and 2 under cluster 3; its positive
    # weights are scaled to average 1: (1, 2) * 2 / 3
    assert np.allclose(dense(problem.positive_weight)[2], [0, 2 / 3, 0, 4 / 3])
    assert np.allclose(dense(problem.positive_weight)[0], [1, 0, 0, 0])
    r, c, y, w = problem.pairs(np.array([2, 1]))
    got = sorted(
        zip(r.tolist(), c.tolist(), y.tolist(), np.round(w.astype(float), 6).tolist(), strict=True)
    )
    assert got == [
        (0, 0, 0.0, 0.5), (0, 1, 1.0, round(2 / 3, 6)), (0, 2, 0.0, 0.5),
        (0, 3, 1.0, round(4 / 3, 6)), (1, 2, 1.0, 1.0), (1, 3, 0.0, 0.5),
    ]  # fmt: skip
    flat = level_problem(Y, tree, 1, None, MatcherConfig(importance_weights=False))
    r, c, y, w = flat.pairs(np.array([0]))
    assert c.tolist() == [0, 1, 2, 3] and y.tolist() == [1, 0, 0, 0] and w.tolist() == [1] * 4


def test_matcher_levels_selection():
    tree = hand_tree()  # levels of 2 and 4 clusters, then 6 labels
    assert matcher_levels(tree, MatcherConfig(min_clusters=2)) == [0, 1, 2]
    assert matcher_levels(tree, MatcherConfig(min_clusters=3, max_clusters=5)) == [1]
    assert matcher_levels(tree, MatcherConfig(min_clusters=3, max_clusters=3)) == [0]
    assert matcher_levels(tree, MatcherConfig(min_clusters=16, max_clusters=4096)) == [2]
    assert matcher_levels(tree, MatcherConfig(min_clusters=2, max_clusters=2)) == [0]


def test_each_level_not_trained_says_why():
    tree = hand_tree()  # levels of 2 and 4 clusters, then 6 labels
    assert level_choices(tree, MatcherConfig(min_clusters=3, max_clusters=5)) == [
        "matcher: level 0 (2 clusters) skipped: fewer than matcher.min_clusters=3",
        "matcher: level 2 (6 clusters) skipped: more than matcher.max_clusters=5",
    ]
    assert level_choices(tree, MatcherConfig(min_clusters=2, max_clusters=6)) == []
    assert level_choices(tree, MatcherConfig(min_clusters=16, max_clusters=4096)) == [
        "matcher: level 0 (2 clusters) skipped: fewer than matcher.min_clusters=16",
        "matcher: level 1 (4 clusters) skipped: fewer than matcher.min_clusters=16",
        "matcher: level 2 (6 clusters) trained although outside [16, 4,096]: no tree level has "
        "a cluster count in that range",
    ]


def test_top_clusters_matches_brute_force():
    rng = np.random.default_rng(0)
    E, W, b = rng.normal(size=(30, 5)), rng.normal(size=(7, 5)), rng.normal(size=7)
    scores = E @ W.T + b
    top = top_clusters(E.astype(np.float32), W, b, 3, chunk=8)
    for i in range(30):
        assert set(top[i].indices) == set(np.argsort(-scores[i])[:3])
        assert np.allclose(np.sort(top[i].data), np.sort(scores[i])[-3:], atol=1e-5)
    cand = sp.csr_matrix((rng.random((30, 7)) < 0.4).astype(np.float32))
    restricted = top_clusters(E.astype(np.float32), W, b, 2, candidates=cand)
    for i in range(30):
        allowed = cand[i].indices
        expect = allowed[np.argsort(-scores[i, allowed])[:2]]
        assert set(restricted[i].indices) == set(expect)


def test_matcher_predictions_become_the_ranker_parents_sharing_most_labels():
    from xmc_core.transformer.ranker import matcher_parent_shortlists

    matcher = hand_tree()  # matcher clusters at level 1: labels {0,1}, {2}, {3}, {4,5}
    C0 = sp.csr_matrix(np.ones((2, 1)))
    C1 = sp.csr_matrix(([1.0] * 6, (range(6), [0, 1, 1, 0, 1, 1])), shape=(6, 2))
    ranker = LabelTree([C0, C1])  # ranker parents of the labels: {0, 3}, {1, 2, 4, 5}
    P = sp.csr_matrix(np.array([[0.9, 0, 0, 0], [0, 0, 0.5, 0.1], [0, 0, 0.4, 0]]))
    extra = matcher_parent_shortlists(P, matcher, 1, ranker, beam_size=1)
    assert extra[0] is None
    # doc 0: cluster {0,1} shares 1 label with each parent -> tie -> parent 0
    # doc 1: clusters {3} and {4,5}: parent 0 shares 1 label, parent 1 shares 2 -> parent 1
    # doc 2: cluster {3} -> parent 0
    assert dense(extra[1]).tolist() == [[1, 0], [0, 1], [1, 0]]
    wide = matcher_parent_shortlists(P, matcher, 1, ranker, beam_size=2)
    assert dense(wide[1]).tolist() == [[1, 1], [1, 1], [1, 0]]
