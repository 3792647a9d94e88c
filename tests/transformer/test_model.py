"""XR-Transformer as a deployable model: train, evaluate, save -> load -> predict, errors."""

from __future__ import annotations

import numpy as np
import pytest
from xmc_core.pipeline import evaluate_model, featurize_split, model_split, train_model

from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError, InputError
from xmc_core.model.xmc_model import XmcModel


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tx_dataset, tx_config, tx_features):
    cfg = tx_config.model_copy(
        update={
            "model": tx_config.model.model_copy(update={"kind": "xr-transformer"}),
            "work_dir": tmp_path_factory.mktemp("work"),
        }
    )
    return train_model(tx_features, cfg, Corpus(tx_dataset)), cfg


def test_trains_evaluates_and_roundtrips(tmp_path, trained, tx_dataset, tx_features):
    model, cfg = trained
    assert model.kind == "xr-transformer"
    hidden = model.embedding.encoder.hidden_size
    assert model.ranker.n_features_ == tx_features.train.X.shape[1] + hidden
    corpus = Corpus(tx_dataset)
    test = model_split(model, corpus, "test", tx_features.test)
    metrics = evaluate_model(model, test, cfg.eval)
    assert metrics["P@1"] >= 0.6, metrics  # the TF-IDF half alone carries this corpus
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    assert loaded.kind == "xr-transformer"
    texts = corpus.read_split("test", ["text"]).column("text").to_pylist()[:50]
    a, b = model.predict(texts), loaded.predict(texts)
    assert (a != b).nnz == 0 and np.array_equal(a.indices, b.indices)
    again = featurize_split(corpus, "test", loaded)  # the CLI's path: TF-IDF + embeddings
    assert abs(again.X - test.X).max() < 1e-6


def test_corrupt_encoder_weights_fail_clearly(tmp_path, trained):
    model, _ = trained
    model.save(tmp_path / "m")
    weights = tmp_path / "m" / "embedding" / "encoder" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    weights.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match=r"model\.safetensors"):
        XmcModel.load(tmp_path / "m")


def test_bag_of_words_corpus_is_refused(tx_config, tx_features):
    cfg = tx_config.model_copy(
        update={"model": tx_config.model.model_copy(update={"kind": "xr-transformer"})}
    )
    with pytest.raises(InputError, match="raw-text corpus"):
        train_model(tx_features, cfg, None)
