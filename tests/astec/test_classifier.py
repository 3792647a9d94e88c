"""Modules 3-4 by hand: the training pairs (ANN shortlist + positives + random
labels, each once), the choice of beta."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xmc_core.families.astec.classifier import candidate_pairs, choose_beta, initial_bias


def test_training_pairs_are_the_shortlist_the_positives_and_random_labels() -> None:
    shortlist = np.array([[3, 1, -1], [0, 2, 4]], np.int64)  # -1: the index had no more
    positives = sp.csr_matrix(np.array([[0, 1, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1, 0]]))
    rows, labels, targets = candidate_pairs(shortlist, positives, 2, np.random.default_rng(7))
    drawn = np.random.default_rng(7).integers(0, 8, size=4).reshape(2, 2)  # the same draws
    want = [{3, 1, 5, *drawn[0]}, {0, 2, 4, 6, *drawn[1]}]
    got = [set(labels[rows == r].tolist()) for r in (0, 1)]
    assert got == want
    assert len(labels) == sum(len(w) for w in want)  # each pair once
    assert {(int(r), int(c)) for r, c, t in zip(rows, labels, targets, strict=True) if t} == {
        (0, 1),
        (0, 5),
        (1, 6),
    }  # the targets are exactly the positives
    assert np.all(np.diff(rows * 8 + labels) > 0)  # sorted by row, then label


def test_beta_is_the_grid_value_with_the_best_validation_precision() -> None:
    # two documents, shortlists of 3; the ANN similarity prefers a wrong label (0, then 2)
    labels = np.array([[0, 1, 2], [2, 0, 1]], np.int64)
    sims = np.array([[0.9, 0.2, 0.0], [0.9, 0.0, 0.0]], np.float32)
    logits = np.array([[-2.0, 2.0, -3.0], [0.0, 0.1, -3.0]], np.float32)
    Y = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0]], np.float32))  # right: 1, then 0
    s = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    # document 1, right vs wrong: beta 0.5: .5125 < .6055 (miss); beta 0.9: .5225 > .5211
    assert 0.5 * s(0.1) + 0.5 * s(0.0) < 0.5 * s(0.0) + 0.5 * s(0.9)
    assert 0.9 * s(0.1) + 0.1 * s(0.0) > 0.9 * s(0.0) + 0.1 * s(0.9)
    beta, scores = choose_beta(logits, sims, labels, Y, [0.0, 0.5, 0.9, 1.0])
    assert {b: p1 for b, (p1, _) in scores.items()} == {0.0: 0.0, 0.5: 0.5, 0.9: 1.0, 1.0: 1.0}
    assert scores[1.0][1] == 0.2  # P@5: one right label among 5 ranks, both documents
    assert beta == 0.9  # the best P@1 and P@5, the first of the tied in grid order


def test_initial_bias_is_the_logit_of_the_share_of_positives() -> None:
    assert np.isclose(initial_bias(5, 105), np.log(5 / 100))
