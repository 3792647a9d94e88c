"""Per-level problems on hand-built matrices: targets, negatives, importance weights."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.levels import (
    importance_weights,
    level_targets,
    matching_matrix,
    relevance_counts,
)

# 2 clusters -> 4 labels: labels 0,1 under cluster 0; labels 2,3 under cluster 1
C = [
    sp.csr_matrix(np.ones((2, 1))),
    sp.csr_matrix((np.ones(4), (np.arange(4), [0, 0, 1, 1])), shape=(4, 2)),
]
# doc 0: labels 0, 1; doc 1: label 3; doc 2: labels 1, 2
Y = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 0, 1], [0, 1, 1, 0]], dtype=np.float32))


def test_level_targets_aggregate_labels_to_clusters() -> None:
    top, labels = level_targets(Y, C)
    assert top.toarray().tolist() == [[1, 0], [0, 1], [1, 1]]
    assert (labels != Y).nnz == 0


def test_teacher_forcing_negatives_are_the_true_parents() -> None:
    targets = level_targets(Y, C)
    M = matching_matrix(targets, 1, RankerConfig(negatives="tfn"))
    assert M.toarray().tolist() == [[1, 0], [0, 1], [1, 1]]
    assert matching_matrix(targets, 0, RankerConfig()).toarray().tolist() == [[1], [1], [1]]


def test_matcher_aware_and_combined_negatives() -> None:
    targets = level_targets(Y, C)
    matched = sp.csr_matrix(np.array([[0, 0.9], [0.8, 0.1], [0, 0]], dtype=np.float32))
    man = matching_matrix(targets, 1, RankerConfig(negatives="man"), matched)
    assert man.toarray().tolist() == [[0, 1], [1, 1], [0, 0]]
    both = matching_matrix(targets, 1, RankerConfig(negatives="tfn+man"), matched)
    assert both.toarray().tolist() == [[1, 1], [1, 1], [1, 1]]
    with pytest.raises(ValueError, match="matcher"):
        matching_matrix(targets, 1, RankerConfig(negatives="man"))


def test_importance_weights_follow_relevance_counts() -> None:
    # R(1) = Y C(1): doc 0 has 2 labels under cluster 0; doc 2 one under each cluster
    assert relevance_counts(Y, C, 0).toarray().tolist() == [[2, 0], [0, 1], [1, 1]]
    R = importance_weights(Y, C, 0).toarray()
    # each document's positive weights average 1
    np.testing.assert_allclose(R, [[1, 0], [0, 1], [1, 1]])
    Y2 = sp.csr_matrix(np.array([[1, 1, 1, 0]], dtype=np.float32))  # 2 under c0, 1 under c1
    np.testing.assert_allclose(importance_weights(Y2, C, 0).toarray(), [[4 / 3, 2 / 3]])
    np.testing.assert_allclose(importance_weights(Y2, C, 1).toarray(), [[1, 1, 1, 0]])
