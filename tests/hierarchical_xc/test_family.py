"""The hierarchical_xc family end to end: it learns, the 2-means groups path trains, limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import InputError
from xmc_core.evaluation.diagnostics import training_loss_per_level
from xmc_core.families.hierarchical_xc.ranker import (
    HierarchicalXcRanker,
    only_children,
    with_certain_nodes,
)
from xmc_core.families.train import train_in_process


def test_loss_falls_and_p1_beats_the_frequency_baseline(trained: dict) -> None:
    ranker, train, test = trained["model"].ranker, trained["model_train"], trained["model_test"]
    # the solver starts at w = 0 (every decision 0.5, loss log 2); only children are certain
    start = HierarchicalXcRanker(ranker.ranker, ranker.predict_cfg)
    zero = []
    for C, W in zip(ranker.tree_.C, ranker.weights_, strict=True):
        decided = np.flatnonzero(~only_children(C))
        bias_row = np.full(decided.size, W.shape[0] - 1)  # ~0 stored: beam search needs entries
        tiny = (np.full(decided.size, 1e-30), (bias_row, np.arange(decided.size)))
        untrained = sp.csc_matrix(tiny, shape=(W.shape[0], decided.size), dtype=np.float32)
        zero.append(with_certain_nodes(untrained, decided, W.shape[1], ranker.ranker.bias))
    start.set_levels(ranker.tree_, zero, ranker.n_features_)
    before = training_loss_per_level(start, train.X, train.Y)
    after = training_loss_per_level(ranker, train.X, train.Y)
    assert all(a < 0.6 * b for a, b in zip(after, before, strict=True)), (before, after)
    counts = np.bincount(train.Y.indices, minlength=train.Y.shape[1])
    top = int(np.argmax(counts))  # every document gets the most frequent training label
    baseline = float((test.Y[:, top].toarray() > 0).mean())
    p1 = trained["evaluation"].values["P@1"]
    assert p1 > baseline + 0.15, (p1, baseline)  # 0.61 vs 0.41; XR-Linear: 0.61 too


def test_the_tree_is_binary_and_shallow(trained: dict) -> None:
    tree = trained["tree"]
    n_labels = tree.n_labels
    assert tree.depth <= 2 * (n_labels - 1).bit_length()  # not a chain
    for C in tree.C:
        assert set(np.bincount(C.indices).tolist()) <= {1, 2}  # one or two children


def test_2_means_groups_train_end_to_end(
    hxc_dataset: Path, hxc_config: XmcConfig, trained: dict, tmp_path: Path
) -> None:
    sections = {"max_agglomerate": 16, "max_depth": 10, "distance": "iou"}
    cfg = hxc_config.model_copy(
        update={"hierarchical_xc": hxc_config.hierarchical_xc.model_copy(update=sections),
                "work_dir": tmp_path}
    )  # fmt: skip
    out = train_in_process(Corpus(hxc_dataset), cfg)
    tree = out["tree"]
    assert tree.n_labels == 111  # 2-means to 8 groups of at most 14, 3 levels above them
    assert tree.level_sizes()[:3] == [2, 4, 8] and tree.depth <= 10
    group = tree.label_to_cluster(2)
    assert np.bincount(group).tolist() == [14, 14, 14, 14, 14, 14, 14, 13]
    assert out["evaluation"].values["P@1"] >= trained["evaluation"].values["P@1"] - 0.15


def test_a_max_depth_below_the_label_count_is_refused(
    hxc_dataset: Path, hxc_config: XmcConfig, tmp_path: Path
) -> None:
    cfg = hxc_config.model_copy(
        update={"hierarchical_xc": hxc_config.hierarchical_xc.model_copy(update={"max_depth": 5}),
                "work_dir": tmp_path}
    )  # fmt: skip
    with pytest.raises(InputError, match="max_depth=5 cannot hold 111 labels"):
        train_in_process(Corpus(hxc_dataset), cfg)
