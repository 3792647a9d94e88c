"""The node classifiers: only children certain, scores are node probabilities multiplied down
the tree, ``fit`` reproduces the family's levels, save/load."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import PredictConfig, RankerConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.families.hierarchical_xc.ranker import (
    CERTAIN_LOGIT,
    HierarchicalXcRanker,
    node_settings,
    only_children,
    with_certain_nodes,
)
from xmc_core.linear.beam import beam_search
from xmc_core.linear.model import XRLinearModel


def test_only_children_get_a_bias_that_is_certain() -> None:
    W = sp.csc_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [0.5, -0.5]], dtype=np.float32))
    out = with_certain_nodes(W, np.array([0, 3]), 4, bias=2.0).toarray()
    assert out[:, 0].tolist() == [1.0, 0.0, 0.5] and out[:, 3].tolist() == [0.0, 2.0, -0.5]
    assert out[:, 1].tolist() == out[:, 2].tolist() == [0.0, 0.0, CERTAIN_LOGIT / 2]
    assert np.float32(1) / (1 + np.exp(np.float32(-CERTAIN_LOGIT))) == np.float32(1)
    C = sp.csr_matrix(np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]))
    assert only_children(C).tolist() == [False, False, True, True]


def test_the_trained_levels_certain_only_children_and_train_the_rest(trained: dict) -> None:
    ranker = trained["model"].ranker
    assert isinstance(ranker, HierarchicalXcRanker)
    assert ranker.ranker.loss == "logistic" and ranker.predict_cfg.post_processor == "sigmoid"
    bias_row = ranker.n_features_
    for C, W in zip(ranker.tree_.C, ranker.weights_, strict=True):
        only = only_children(C)
        certain = W[:, np.flatnonzero(only)]
        assert certain.nnz == only.sum() and set(certain.indices) <= {bias_row}
        assert np.all(certain.data == CERTAIN_LOGIT / ranker.ranker.bias)
        trained_nodes = W[:, np.flatnonzero(~only)]
        assert np.all(np.diff(trained_nodes.indptr) > 0)  # every decision has weights


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def test_scores_are_node_probabilities_multiplied_down_the_tree(trained: dict) -> None:
    model, test = trained["model"], trained["model_test"]
    ranker = model.ranker
    X = test.X[:20]
    scores = ranker.predict(X, topk=5)
    assert scores.nnz == 20 * 5 and np.all((scores.data > 0) & (scores.data <= 1))
    tree, bias = ranker.tree_, ranker.ranker.bias
    for i in range(X.shape[0]):
        row = scores[i]
        for label, score in zip(row.indices, row.data, strict=True):
            expected = 1.0
            for t, W in enumerate(ranker.weights_):
                node = tree.label_to_cluster(t)[label]
                logit = (X[i] @ W[:-1, node]).toarray().item() + bias * W[-1, node]
                expected *= sigmoid(logit)
            assert score == pytest.approx(expected, rel=1e-4)


def test_a_node_never_scores_above_its_parent_in_the_beam(trained: dict) -> None:
    ranker = trained["model"].ranker
    X = trained["model_test"].X[:20]
    beams: list[tuple[np.ndarray, np.ndarray]] = []
    widths = [10] * ranker.tree_.depth
    beam_search(X, ranker.chunks_, widths, "sigmoid", ranker.ranker.bias,
                on_level=lambda t, ids, s: beams.append((ids.copy(), s.copy())))  # fmt: skip
    for t in range(1, ranker.tree_.depth):
        parent_of = ranker.tree_.C[t].indices
        (up_ids, up_scores), (ids, s) = beams[t - 1], beams[t]
        for i in range(X.shape[0]):
            above = dict(zip(up_ids[i].tolist(), up_scores[i].tolist(), strict=True))
            for node, score in zip(ids[i], s[i], strict=True):
                if node >= 0:
                    assert 0 < score <= above[parent_of[node]] + 1e-7


def test_fit_trains_the_levels_the_family_trained(trained: dict) -> None:
    ranker, train = trained["model"].ranker, trained["model_train"]
    again = HierarchicalXcRanker(ranker.ranker, ranker.predict_cfg)
    assert again.fit(train.X, train.Y, ranker.tree_) is again
    for a, b in zip(again.weights_, ranker.weights_, strict=True):
        assert (a != b).nnz == 0


def test_save_load_round_trips_and_a_plain_xr_linear_folder_is_refused(
    trained: dict, tmp_path: Path
) -> None:
    ranker = trained["model"].ranker
    ranker.save(tmp_path / "hxc")
    loaded = HierarchicalXcRanker.load(tmp_path / "hxc")
    X = trained["model_test"].X
    assert (
        type(loaded) is HierarchicalXcRanker and (loaded.predict(X) != ranker.predict(X)).nnz == 0
    )
    XRLinearModel.save(ranker, tmp_path / "plain")
    with pytest.raises(ArtifactError, match="holds a 'XRLinearModel', expected 'Hierarc"):
        HierarchicalXcRanker.load(tmp_path / "plain")


def test_other_losses_are_replaced_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ranker, predict = node_settings(RankerConfig(Cp=4.0), PredictConfig())
    assert (ranker.loss, ranker.Cp, predict.post_processor) == ("logistic", 4.0, "sigmoid")
    assert "ranker.loss=squared_hinge and predict.post_processor=l3-hinge replaced" in caplog.text
    caplog.clear()
    node_settings(RankerConfig(loss="logistic"), PredictConfig(post_processor="sigmoid"))
    assert caplog.text == ""
    with pytest.raises(InputError, match=r"needs the bias feature \(ranker.bias=0.0\)"):
        node_settings(RankerConfig(bias=0.0), PredictConfig())
