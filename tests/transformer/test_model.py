"""XR-Transformer as a deployable model: train, evaluate, save -> load -> predict, errors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.model_helpers import train_model, write_bow_dataset
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError, InputError
from xmc_core.model.xmc_model import XmcModel


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tx_dataset, tx_config, tx_features):
    cfg = tx_config.model_copy(
        update={
            "model": tx_config.model.model_copy(update={"kind": "xr_transformer"}),
            "work_dir": tmp_path_factory.mktemp("work"),
        }
    )
    return train_model(tx_features, cfg, Corpus(tx_dataset)), cfg


def test_trains_evaluates_and_roundtrips(tmp_path, trained, tx_dataset, tx_features):
    model, cfg = trained
    assert model.family == "xr_transformer"
    hidden = model.encoder.encoder.hidden_size
    assert model.ranker.n_features_ == tx_features.train.X.shape[1] + hidden
    corpus = Corpus(tx_dataset)
    test = model.encode(tx_features.test, corpus, "test")
    metrics = model.evaluate(test, cfg.eval)
    assert metrics["P@1"] >= 0.6, metrics  # the TF-IDF half alone carries this corpus
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    assert loaded.family == "xr_transformer"
    texts = corpus.read_split("test", ["text"]).column("text").to_pylist()[:50]
    a, b = model.predict(texts), loaded.predict(texts)
    assert (a != b).nnz == 0 and np.array_equal(a.indices, b.indices)
    again = loaded.encode_split(corpus, "test")  # the CLI's path: TF-IDF + embeddings
    assert abs(again.X - test.X).max() < 1e-6


def test_corrupt_encoder_weights_fail_clearly(tmp_path, trained):
    model, _ = trained
    model.save(tmp_path / "m")
    weights = tmp_path / "m" / "encoder" / "encoder" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    weights.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match=r"model\.safetensors"):
        XmcModel.load(tmp_path / "m")


def test_bag_of_words_corpus_is_refused(tmp_path, tx_config, tx_features):
    cfg = tx_config.model_copy(
        update={"model": tx_config.model.model_copy(update={"kind": "xr_transformer"})}
    )
    with pytest.raises(InputError, match="raw-text corpus"):
        train_model(tx_features, cfg, Corpus(write_bow_dataset(tmp_path / "bow")))


def test_described_without_loading(tmp_path, trained, tx_features):
    """``xmc inspect``'s description of a saved XR-Transformer model: the encoder's width and
    length, the tree and per-level nonzeros of the final ranker, from meta.json and headers."""
    from xmc_core.app.describe import describe_model, format_model

    model, _ = trained
    model.save(tmp_path / "m")
    d = describe_model(tmp_path / "m")
    hidden = model.encoder.encoder.hidden_size
    assert d["family"] == "xr_transformer" and d["n_labels"] == len(model.labels)
    assert d["encoder"]["dim"] == hidden and d["encoder"]["max_length"] == 32  # SMALL
    assert d["encoder"]["pooling"] == "mean" and d["encoder"]["class"] == "EmbeddingFeatures"
    tfidf = tx_features.train.X.shape[1]
    assert d["vectorizer"]["features"] == tfidf
    assert d["ranker"]["input_features"] == tfidf + hidden
    levels = d["ranker"]["levels"]
    assert [lv["nodes"] for lv in levels] == model.ranker.tree_.level_sizes()
    assert [lv["nnz"] for lv in levels] == [W.nnz for W in model.ranker.weights_]
    text = format_model(d)
    assert f"encoder: bert, 2 layers, dim {hidden}, max_length 32, mean pooling" in text
    assert f"concatenated with TF-IDF, {tfidf:,} features" in text
