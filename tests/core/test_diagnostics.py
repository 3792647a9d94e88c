"""Diagnostics on a hand-built two-level model whose values are worked out by hand."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from xmc_core.config import EvalConfig, PredictConfig, RankerConfig
from xmc_core.evaluation import diagnostics
from xmc_core.evaluation.diagnostics import (
    Diagnostics,
    beam_recall_and_scores,
    beam_recall_per_level,
    k_curves,
    matcher_loss_history,
    training_loss_per_level,
)
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.artifacts import write_meta

# Two clusters under the root; labels 0, 1 in cluster 0 and 2, 3 in cluster 1.
C0 = sp.csr_matrix(np.ones((2, 1), dtype=np.float32))
C1 = sp.csr_matrix((np.ones(4, np.float32), ([0, 1, 2, 3], [0, 0, 1, 1])), shape=(4, 2))
# Rows: feature 0, feature 1, bias. Cluster 0 likes feature 0, cluster 1 feature 1.
W0 = np.array([[2.0, -2.0], [-2.0, 2.0], [0.0, 0.0]])
# label 0: x0; label 1: bias 0.5 only; label 2: 0.5 x1; label 3: 2 x1.
W1 = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, 2.0], [0.0, 0.5, 0.0, 0.0]])
# doc 0 -> label 0, doc 1 -> label 3, doc 2 looks like cluster 0 but holds label 2.
X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32))
Y = sp.csr_matrix((np.ones(3, np.float32), ([0, 1, 2], [0, 3, 2])), shape=(3, 4))


def tiny_model(loss: str = "squared_hinge") -> XRLinearModel:
    weights = [sp.csc_matrix(W0, dtype=np.float32), sp.csc_matrix(W1, dtype=np.float32)]
    model = XRLinearModel(RankerConfig(loss=loss, bias=1.0), PredictConfig(beam_size=1))
    return model.set_levels(LabelTree([C0, C1]), weights, 2)


def test_k_curves_by_hand() -> None:
    Y_true = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.float32))
    scores = sp.csr_matrix(np.array([[0.9, 0.8, 0.7], [0.9, 0.5, 0.0]], dtype=np.float32))
    curves = k_curves(Y_true, scores, 3)
    assert curves["k"] == [1, 2, 3]
    np.testing.assert_allclose(curves["P"], [0.5, 0.5, 0.5])
    d2 = 1 / np.log2(3)  # discount of rank 2
    ndcg2 = (1 / (1 + d2) + d2) / 2
    ndcg3 = (1.5 / (1 + d2) + d2) / 2
    np.testing.assert_allclose(curves["nDCG"], [0.5, ndcg2, ndcg3])


def test_k_curves_rejects_kmax_zero() -> None:
    with pytest.raises(ValueError, match="kmax"):
        k_curves(sp.csr_matrix((1, 2)), sp.csr_matrix((1, 2)), 0)


def test_beam_recall_loses_the_misleading_document() -> None:
    # beam 1: doc 2 follows cluster 0 and loses its cluster 1 at level 0, so its label too.
    np.testing.assert_allclose(beam_recall_per_level(tiny_model(), X, Y, 1), [2 / 3, 2 / 3])
    # beam 2 keeps both clusters, but the label beam still misses label 2 of doc 2.
    np.testing.assert_allclose(beam_recall_per_level(tiny_model(), X, Y, 2), [1.0, 2 / 3])
    # a beam holding every label finds every pair
    np.testing.assert_allclose(beam_recall_per_level(tiny_model(), X, Y, 4), [1.0, 1.0])


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_the_recall_search_gives_the_models_own_top_k(beam: int) -> None:
    scores = beam_recall_and_scores(tiny_model(), X, Y, beam)[1]
    model = tiny_model()
    model.predict_cfg = PredictConfig(beam_size=beam)
    assert (scores != model.predict(X, topk=beam)).nnz == 0


def test_squared_hinge_per_level_by_hand() -> None:
    # level 0, all 6 (doc, cluster) pairs: only doc 2 is wrong, by margin -2 twice: 9 + 9.
    # level 1, children of the true parent: doc 0 label 1 (s 0.5, y -1): 2.25; doc 1 label 2
    # (s 0.5, y -1): 2.25; doc 2 labels 2, 3 (s 0): 1 + 1.
    expected = [18 / 6, 6.5 / 6]
    np.testing.assert_allclose(training_loss_per_level(tiny_model(), X, Y), expected)
    # one document per chunk: same sums
    chunked = training_loss_per_level(tiny_model(), X, Y, pairs_per_chunk=1)
    np.testing.assert_allclose(chunked, expected)


def test_logistic_loss_follows_the_config() -> None:
    def lg(m: float) -> float:
        return float(np.log1p(np.exp(-m)))

    level0 = (4 * lg(2.0) + 2 * lg(-2.0)) / 6
    level1 = (lg(1.0) + lg(-0.5) + lg(-0.5) + lg(2.0) + 2 * lg(0.0)) / 6
    got = training_loss_per_level(tiny_model(), X, Y, RankerConfig(loss="logistic"))
    np.testing.assert_allclose(got, [level0, level1])
    np.testing.assert_allclose(training_loss_per_level(tiny_model("logistic"), X, Y), got)


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="features"):
        training_loss_per_level(tiny_model(), sp.csr_matrix((3, 5)), Y)
    with pytest.raises(ValueError, match="Y has shape"):
        beam_recall_per_level(tiny_model(), X, sp.csr_matrix((3, 7)), 1)


def test_matcher_loss_history_reads_checkpoint_meta(tmp_path: Path) -> None:
    for level, records in [(2, [{"step": 5, "loss": 0.5, "P@1": 0.3}]), (1, [])]:
        folder = tmp_path / f"level-{level}"
        folder.mkdir()
        history = {"steps": 5, "seconds": 1.0, "records": records}
        write_meta(folder, "MatcherLevel", {"level": level, "n_clusters": 4, "history": history})
    got = matcher_loss_history([tmp_path / "level-2", tmp_path / "level-1"])
    assert got == {1: [], 2: [(5, 0.5)]}
    assert list(got) == [1, 2]


class FlatRanker:
    """A ranker without a tree: the tiny model's predictions, through a wrapper."""

    def __init__(self) -> None:
        self.inner = tiny_model()
        self.predict_cfg = self.inner.predict_cfg

    def predict(self, X: sp.csr_matrix, topk: int) -> sp.csr_matrix:
        return self.inner.predict(X, topk=topk)


def test_sampled_splits_and_skipped_levels_say_so(caplog) -> None:
    split = SplitFeatures(X, Y, pa.array(["a", "b", "c"]))
    counts = np.ones(4)
    with caplog.at_level(logging.INFO, logger=diagnostics.log.name):
        tree = Diagnostics.compute(tiny_model(), counts, {"test": split}, EvalConfig(), max_docs=2)
    assert [r.getMessage() for r in caplog.records] == [
        "diagnostics: test split sampled, 2 of 3 documents"
    ]
    assert tree.report["n_docs"] == {"test": 2} and len(tree.report["beam_recall"]["test"]) == 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=diagnostics.log.name):
        flat = Diagnostics.compute(FlatRanker(), counts, {"test": split}, EvalConfig())
    assert [r.getMessage() for r in caplog.records] == [
        "diagnostics: beam recall and loss per level skipped: the ranker has no tree"
    ]
    assert flat.report["n_docs"] == {"test": 3} and flat.report["beam_recall"] == {}
