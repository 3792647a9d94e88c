"""XR-Linear end to end on a small synthetic corpus: accuracy floor, save/load, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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


def test_beam_and_topk_overrides(trained: XmcModel, small_features: Featurized) -> None:
    X = small_features.test.X[:20]
    assert (np.diff(trained.predict_features(X, topk=2).indptr) <= 2).all()
    wide = trained.predict_features(X, topk=5, beam_size=50)
    narrow = trained.predict_features(X, topk=5, beam_size=1)
    assert wide.shape == narrow.shape


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
