"""XR-Linear end to end on a small synthetic corpus: accuracy floor, save/load, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.linear.conftest import SMALL
from tests.model_helpers import Featurized, train_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError
from xmc_core.linear.model import XRLinearModel
from xmc_core.model.xmc_model import XmcModel


@pytest.fixture(scope="module")
def trained(small_features: Featurized, small_dataset: Path) -> XmcModel:
    return train_model(small_features, XmcConfig.load(None, SMALL), Corpus(small_dataset))


def test_tree_has_several_levels_and_model_beats_a_floor(
    trained: XmcModel, small_features: Featurized
) -> None:
    assert trained.ranker.tree_.depth >= 3
    metrics = trained.evaluate(small_features.test, XmcConfig().eval)
    # most-frequent-label baseline is ~0.2 on this corpus; a linear model gets ~0.8
    assert metrics["P@1"] >= 0.65, metrics
    assert metrics["P@1"] >= metrics["P@3"] >= metrics["P@5"]
    assert 0 < metrics["PSP@1"] <= 1


def test_save_load_predict_identical(trained: XmcModel, tmp_path: Path) -> None:
    trained.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m")
    texts = ["first test document words", "", None]
    a, b = trained.predict(texts), loaded.predict(texts)
    assert (a != b).nnz == 0 and a.shape == (3, len(trained.labels))
    top = loaded.top_labels(loaded.predict(["x"], topk=3))
    assert len(top[0]) <= 3 and all(isinstance(n, str) for n, _ in top[0])


def test_same_seed_same_model(small_features: Featurized, small_dataset: Path) -> None:
    cfg = XmcConfig.load(None, [*SMALL, "tfidf.max_features=3000"])
    corpus = Corpus(small_dataset)
    a, b = train_model(small_features, cfg, corpus), train_model(small_features, cfg, corpus)
    for wa, wb in zip(a.ranker.weights_, b.ranker.weights_, strict=True):
        assert (wa != wb).nnz == 0


def path_scores(model: XmcModel, X: sp.csr_matrix) -> list[np.ndarray]:
    """Exhaustive scores of every node of every level, dense (n_docs, K_{t+1}) float64: the
    product of the l3-hinge transformed ranker scores along the node's path from the root."""
    ranker = model.ranker
    assert ranker.predict_cfg.post_processor == "l3-hinge"
    Xb = sp.hstack([X, np.full((X.shape[0], 1), ranker.ranker.bias)], format="csr")
    out, above = [], np.ones((X.shape[0], 1))
    for W, C in zip(ranker.weights_, ranker.tree_.C, strict=True):
        raw = (Xb.astype(np.float64) @ W.astype(np.float64)).toarray()
        above = np.exp(-(np.maximum(1.0 - raw, 0.0) ** 3)) * above[:, C.indices]
        out.append(above)
    return out


def test_beam_and_topk_overrides(trained: XmcModel, small_features: Featurized) -> None:
    X = small_features.test.X[:20]
    assert (np.diff(trained.predict_features(X, topk=2).indptr) <= 2).all()
    tree = trained.ranker.tree_
    levels = path_scores(trained, X)
    # beam 50 holds every cluster of every level (4, 16): the exhaustive top 5
    assert max(tree.level_sizes()[:-1]) <= 50
    wide = trained.predict_features(X, topk=5, beam_size=50)
    best = np.argsort(-levels[-1], axis=1, kind="stable")[:, :5]
    assert (np.diff(wide.indptr) == 5).all()
    for i in range(20):
        assert set(wide[i].indices) == set(best[i])
        np.testing.assert_allclose(wide[i].data, levels[-1][i, wide[i].indices], rtol=1e-5)
    # beam 1 follows the single best node down: the top 5 children of the greedy leaf cluster
    narrow = trained.predict_features(X, topk=5, beam_size=1)
    for i in range(20):
        node = int(np.argmax(levels[0][i]))
        for t in range(1, tree.depth - 1):
            children = np.flatnonzero(tree.C[t].indices == node)
            node = int(children[np.argmax(levels[t][i, children])])
        leaves = np.flatnonzero(tree.C[-1].indices == node)  # the labels of the kept cluster
        top = leaves[np.argsort(-levels[-1][i, leaves], kind="stable")[:5]]
        assert set(narrow[i].indices) == set(top)
        np.testing.assert_allclose(narrow[i].data, levels[-1][i, narrow[i].indices], rtol=1e-5)
    assert (wide != narrow).nnz > 0  # the beam override reaches the search


def test_corrupt_or_mismatched_model_fails_clearly(trained: XmcModel, tmp_path: Path) -> None:
    trained.save(tmp_path / "m")
    w = tmp_path / "m" / "ranker" / "W1.npz"
    w.write_bytes(w.read_bytes()[:100])
    with pytest.raises(ArtifactError, match=r"W1\.npz"):
        XmcModel.load(tmp_path / "m")
    trained.save(tmp_path / "n")
    meta_path = tmp_path / "n" / "ranker" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "format": 7}))
    with pytest.raises(ArtifactError, match="format 7"):
        XRLinearModel.load(tmp_path / "n" / "ranker")


@pytest.mark.parametrize("negatives", ["man", "tfn+man"])
def test_matcher_aware_negatives_train(
    small_features: Featurized, small_dataset: Path, negatives: str
) -> None:
    cfg = XmcConfig.load(
        None, [*SMALL, f"ranker.negatives={negatives}", "ranker.importance_weights=true"]
    )
    model = train_model(small_features, cfg, Corpus(small_dataset))
    assert model.evaluate(small_features.test, cfg.eval)["P@1"] >= 0.6
