"""Calibration error, reliability bins and thresholded F1, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.calibration.metrics import (
    ece,
    ece_at_k,
    reliability,
    threshold_scores,
    top_k_pairs,
)

# doc 0: label 0 at 0.9 (relevant), 1 at 0.2, 2 at 0.1; doc 1: label 1 at 0.6, 2 at 0.3 (relevant)
P = sp.csr_matrix(np.array([[0.9, 0.2, 0.1], [0.0, 0.6, 0.3]]))
Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1]]))


def test_reliability_bins_and_their_weighted_gap() -> None:
    r = reliability(np.array([0.05, 0.15, 0.95, 0.9, 1.0]), np.array([0, 0, 1, 0, 1]))
    assert r.counts.tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 3]  # 1.0 falls in the last bin
    assert r.confidence[9] == pytest.approx(2.85 / 3) and r.accuracy[9] == pytest.approx(2 / 3)
    # (0.05 + 0.15 + 3 * |2/3 - 0.95|) / 5
    assert r.ece == pytest.approx((0.05 + 0.15 + 3 * (0.95 - 2 / 3)) / 5)
    assert ece(np.array([]), np.array([], dtype=bool)) == 0.0


def test_ece_at_k_over_each_documents_top_k() -> None:
    pairs = top_k_pairs(P, Y, 2)
    assert pairs.values.tolist() == [0.9, 0.2, 0.6, 0.3]
    assert pairs.relevant.tolist() == [True, False, False, True]
    assert pairs.ranks.tolist() == [0, 1, 0, 1] and pairs.docs.tolist() == [0, 0, 1, 1]
    assert pairs.labels.tolist() == [0, 1, 1, 2]
    assert ece_at_k(P, Y, 1) == pytest.approx((0.1 + 0.6) / 2)
    assert ece_at_k(P, Y, 2) == pytest.approx((0.1 + 0.2 + 0.6 + 0.7) / 4)


def test_a_global_threshold_gives_precision_recall_and_both_f1() -> None:
    got = threshold_scores(P, Y, 0.25)  # predicted: (0, 0), (1, 1), (1, 2)
    assert got["precision"] == pytest.approx(2 / 3) and got["recall"] == 1.0
    assert got["micro_f1"] == pytest.approx(4 / 5)
    assert got["macro_f1"] == pytest.approx((1 + 0 + 1) / 3)


def test_per_label_thresholds_and_labels_with_nothing_count_zero() -> None:
    got = threshold_scores(P, Y, np.array([0.95, 0.1, 0.1]))  # label 0 cut, labels 1 and 2 kept
    assert got["precision"] == pytest.approx(1 / 4) and got["recall"] == pytest.approx(1 / 2)
    assert got["micro_f1"] == pytest.approx(2 / 6)
    assert got["macro_f1"] == pytest.approx((0 + 0 + 2 / 3) / 3)
    none = threshold_scores(P, Y, 1.0)
    assert none == {"precision": 0.0, "recall": 0.0, "micro_f1": 0.0, "macro_f1": 0.0}


def test_mismatched_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="one shape"):
        ece_at_k(P, Y[:, :2], 1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reliability(np.array([1.5]), np.array([True]))
