"""The saved parts: the flat ranker (top-k, refit, round trip) and the CNN encoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.model_helpers import split_texts as texts
from xmc_core.config import PredictConfig
from xmc_core.evaluation.ranking import top_k, top_k_dense
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.parts import CnnFeatures, CnnOutputRanker
from xmc_core.model.xmc_model import XmcModel


def test_dense_top_k_follows_the_ranking_rule_with_ties() -> None:
    S = np.array([[0.1, 0.9, 0.5, 0.9, 0.2], [0.3, 0.3, 0.3, 0.3, 0.3]], dtype=np.float32)
    cols, vals = top_k_dense(S, 3)
    assert cols.tolist() == [[1, 3, 2], [0, 1, 2]]  # ties: the lower column first
    assert vals.ravel().tolist() == pytest.approx([0.9, 0.9, 0.5, 0.3, 0.3, 0.3])
    ranked = top_k(sp.csr_matrix(S), 3)
    assert ranked.padded(3).tolist() == cols.tolist()


def test_flat_ranker_top_k_equals_a_dense_reference() -> None:
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(6, 40)).astype(np.float32), rng.normal(size=40).astype(np.float32)
    X = sp.random(23, 6, density=0.6, random_state=1, dtype=np.float32, format="csr")
    ranker = CnnOutputRanker(XmlCnnConfig(eval_batch_size=4), PredictConfig(topk=5))
    got = ranker.set_output(W, b).predict(X)
    dense = 1 / (1 + np.exp(-(X.toarray() @ W + b)))
    want = np.argsort(-dense, axis=1, kind="stable")[:, :5]
    assert got.shape == (23, 40) and np.all(np.diff(got.indptr) == 5)
    assert top_k(got).padded(5).tolist() == want.tolist()
    np.testing.assert_allclose(got.toarray()[np.arange(23)[:, None], want],
                               np.take_along_axis(dense, want, 1), rtol=1e-5)  # fmt: skip
    assert np.all(np.diff(ranker.predict(X, topk=2).indptr) == 2)


def test_fit_refits_the_output_layer_on_fixed_features() -> None:
    X = sp.csr_matrix(np.eye(4, dtype=np.float32).repeat(5, axis=0))  # 20 docs, 4 kinds
    Y = sp.csr_matrix(np.eye(4, dtype=np.float32)[[0, 2, 1, 3]].repeat(5, axis=0))
    cfg = XmlCnnConfig(lr=0.05, batch_size=4, refit_epochs=20, threads=1)
    ranker = CnnOutputRanker(cfg, PredictConfig(topk=1))
    assert ranker.fit(X, Y) is ranker and ranker.W_.shape == (4, 4)
    assert top_k(ranker.predict(X)).padded(1).ravel().tolist() == Y.indices.tolist()
    again = CnnOutputRanker(cfg, PredictConfig(topk=1)).fit(X, Y)
    assert np.array_equal(again.W_, ranker.W_)  # seeded


def test_flat_model_round_trip_predicts_the_same(
    trained_flat: dict, cnn_dataset: Path, tmp_path: Path
) -> None:
    model = trained_flat["model"]
    assert isinstance(model.encoder, CnnFeatures) and model.encoder.mode == "hidden"
    assert isinstance(model.ranker, CnnOutputRanker) and model.ranker.n_labels == len(model.labels)
    model.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m" / "encoder").iterdir()) == [
        "meta.json", "network.safetensors", "vocab",
    ]  # fmt: skip
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    some = texts(cnn_dataset)
    a, b = model.predict(some), loaded.predict(some)
    assert a.nnz == 30 * 20 and (a != b).nnz == 0
    X = model.features(model.vectorizer.transform(some), some)
    assert X.shape == (30, 128)  # the bottleneck activations
    train = trained_flat["model_train"]
    assert train.X.shape == (300, 128) and (train.Y != trained_flat["train"].Y).nnz == 0
