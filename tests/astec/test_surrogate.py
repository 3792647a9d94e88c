"""Module 1 by hand: how many meta-labels, which documents they hold, the validation rows."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.surrogate import meta_label_count, meta_labels, meta_targets
from xmc_core.features.label_features import LabelFeatures


def test_meta_label_count_is_the_nearest_power_of_two_within_limits() -> None:
    cfg = AstecConfig()
    assert meta_label_count(3993, cfg) == 1024  # EURLex-4K: Astec's reference
    assert meta_label_count(159, cfg) == 32  # 39.75 -> 2**5.3
    assert meta_label_count(42850, cfg) == 8192  # 10,712 -> 2**13.4
    assert meta_label_count(42850, cfg.model_copy(update={"max_meta_labels": 4096})) == 4096
    assert meta_label_count(3, cfg) == 2 and meta_label_count(1, cfg) == 1
    one_each = cfg.model_copy(update={"labels_per_meta_label": 1})
    assert meta_label_count(100, one_each) == 100  # 128, at most one per label


def test_meta_labels_are_balanced_clusters_of_similar_labels() -> None:
    # 8 labels in two groups of 4 on orthogonal features: 2 meta-labels, one per group
    z = sp.csr_matrix(np.repeat(np.eye(2, dtype=np.float32), 4, axis=0) + 0.01)
    tree = meta_labels(LabelFeatures(z, "pifa"), TreeConfig(), AstecConfig(labels_per_meta_label=4))
    leaf = tree.C[-1].indices
    assert tree.C[-1].shape == (8, 2)
    assert len(set(leaf[:4])) == 1 and len(set(leaf[4:])) == 1 and leaf[0] != leaf[4]
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 1, 0, 0, 0]]))
    Yc = meta_targets(Y, tree).toarray()
    assert Yc[0, leaf[0]] == 1 and Yc[0].sum() == 1  # label 0 -> its group's meta-label
    assert Yc[1].tolist() == [1.0, 1.0]  # labels 1 and 4: both meta-labels, each once
