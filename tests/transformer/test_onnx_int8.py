"""The int8 ONNX encoder (``matcher.predict_runtime: onnx-int8``): close to the torch encoder,
saved with the model, loaded back identical, clear errors; and in every runtime a document's
embedding and labels never depend on its batch (issue 34)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.model_helpers import train_model
from xmc_core.config import EncoderConfig, MatcherConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError, InputError
from xmc_core.families.configured import family_requirements
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.package import pip_requirements
from xmc_core.transformer.encoder import TextEncoder, embed, load_tokenizer
from xmc_core.transformer.onnx_int8 import ONNX_FILE, Int8Encoder, embed_on
from xmc_core.transformer.ranker import EmbeddingFeatures
from xmc_core.transformer.tokens import tokenize_texts

TEXTS = ["", "short text", "a somewhat longer text about parsing and packaging " * 4]


@pytest.fixture(scope="module")
def encoder(tx_encoder_dir):
    return TextEncoder.load(EncoderConfig(path=tx_encoder_dir, max_length=32), tx_encoder_dir)


@pytest.fixture(scope="module")
def int8(encoder):
    return Int8Encoder.from_encoder(encoder)


def test_embeddings_are_unit_rows_close_to_torch_in_input_order(encoder, int8, tx_encoder_dir):
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), TEXTS, 32)
    assert len(set(tokens.lengths.tolist())) == 3  # one padded batch of three lengths
    full = embed(encoder, tokens, torch.device("cpu"), 8, False)
    fast = int8.embed(tokens, 8)
    assert fast.shape == full.shape == (3, encoder.hidden_size) and fast.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(fast * full, axis=1)
    assert cosines.min() > 0.95, cosines
    # each row is its own document: one at a time gives (nearly) the same rows
    alone = np.concatenate([int8.embed(tokens.take(np.array([i])), 1) for i in range(3)])
    assert np.sum(alone * fast, axis=1).min() > 0.98
    assert fast.tobytes() == int8.embed(tokens, 8).tobytes()  # deterministic


BATCH_SIZES = (1, 7, 64)  # 64: the fixtures' matcher.embed_batch_size


@pytest.fixture(scope="module")
def mixed_texts(tx_dataset) -> list[str]:
    """60 test documents of 3 to 21 words (the split's texts, cut)."""
    texts = Corpus(tx_dataset).read_split("test", ["text"]).column("text").to_pylist()[:60]
    return [" ".join(text.split()[: 3 + 3 * (i % 7)]) for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
def mixed_tokens(mixed_texts, tx_encoder_dir):
    """40 of them tokenized (32 tokens at most): many lengths, several documents of each."""
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), mixed_texts[:40], 32)
    counts = np.bincount(tokens.lengths)
    assert np.count_nonzero(counts) >= 5 and counts.max() >= 3, counts
    return tokens


@pytest.mark.parametrize("runtime", ["float32", "onnx-int8"])
def test_a_documents_embedding_never_depends_on_its_batch(runtime, encoder, int8, mixed_tokens):
    def run(tokens, batch_size):
        if runtime == "onnx-int8":
            return int8.embed(tokens, batch_size)
        return embed(encoder, tokens, torch.device("cpu"), batch_size, False)

    alone = run(mixed_tokens, 1)
    for batch_size in BATCH_SIZES[1:]:  # int8 quantized per batch: 7e-5 apart here
        np.testing.assert_allclose(run(mixed_tokens, batch_size), alone, rtol=0, atol=1e-6)
    order = np.random.default_rng(0).permutation(mixed_tokens.n_docs)
    shuffled = run(mixed_tokens.take(order), BATCH_SIZES[-1])
    np.testing.assert_allclose(shuffled, alone[order], rtol=0, atol=1e-6)


def test_export_leaves_the_encoder_in_its_mode_and_attention(encoder):
    encoder.train()
    attention = encoder.body.config._attn_implementation
    Int8Encoder.from_encoder(encoder)  # exports with eager attention
    assert encoder.training and encoder.body.config._attn_implementation == attention
    encoder.eval()


def test_save_and_load_round_trip(tmp_path, int8, tx_encoder_dir):
    int8.save(tmp_path)
    loaded = Int8Encoder.load(tmp_path, int8.hidden_size)
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), TEXTS, 32)
    assert loaded.embed(tokens, 8).tobytes() == int8.embed(tokens, 8).tobytes()
    (tmp_path / ONNX_FILE).write_bytes(b"not an onnx model")
    with pytest.raises(ArtifactError, match=ONNX_FILE):
        Int8Encoder.load(tmp_path, int8.hidden_size)
    (tmp_path / ONNX_FILE).unlink()
    with pytest.raises(ArtifactError, match="missing"):
        Int8Encoder.load(tmp_path, int8.hidden_size)


SECRET_WHERE = {
    "the working directory": lambda cwd, folder: "onnx-secret.txt",
    "beside the folder": lambda cwd, folder: "../onnx-secret.txt",
    "an absolute path": lambda cwd, folder: str(cwd / "onnx-secret.txt"),
    "a link out of the folder": lambda cwd, folder: _link(folder / "weights.bin", cwd),
    "a file of the folder": lambda cwd, folder: _copy(cwd, folder / "weights.bin"),
}


def _link(link: Path, cwd: Path) -> str:
    link.symlink_to(cwd / "onnx-secret.txt")
    return link.name


def _copy(cwd: Path, inside: Path) -> str:
    inside.write_bytes((cwd / "onnx-secret.txt").read_bytes())
    return inside.name


@pytest.mark.parametrize("where", list(SECRET_WHERE))
def test_external_data_outside_the_model_folder_is_refused(
    tmp_path, monkeypatch, int8, tx_encoder_dir, where
):
    """A saved encoder whose token embeddings name another file as their data (ONNX external
    data) made ONNX Runtime read that file from the working directory (the model was opened
    from bytes). Only data inside the model's folder is read; the rest is refused."""
    import onnx

    cwd, folder = tmp_path / "cwd", tmp_path / "model"
    cwd.mkdir()
    folder.mkdir()
    monkeypatch.chdir(cwd)
    model = onnx.load_model_from_string(int8.model)
    table = next(t for t in model.graph.initializer if "word_embeddings" in t.name)
    (cwd / "onnx-secret.txt").write_bytes(table.raw_data)  # readable as the table it replaces
    entries = {"location": SECRET_WHERE[where](cwd, folder), "length": str(len(table.raw_data))}
    table.ClearField("raw_data")
    table.data_location = onnx.TensorProto.EXTERNAL
    for key, value in entries.items():
        table.external_data.add(key=key, value=value)
    (folder / ONNX_FILE).write_bytes(model.SerializeToString())
    if where == "a file of the folder":
        tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), TEXTS, 32)
        loaded = Int8Encoder.load(folder, int8.hidden_size)
        assert loaded.embed(tokens, 8).tobytes() == int8.embed(tokens, 8).tobytes()
        return
    with pytest.raises(ArtifactError, match=r"(?i)external data") as excinfo:
        Int8Encoder.load(folder, int8.hidden_size)
    assert str(folder / ONNX_FILE) in str(excinfo.value) and "fix:" in str(excinfo.value)


def test_missing_runtime_names_the_extra(monkeypatch, encoder):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(InputError, match=r"\.\[onnx\]"):
        Int8Encoder.from_encoder(encoder)


def test_embed_on_runs_torch_or_the_int8_export(encoder, tx_encoder_dir):
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), TEXTS, 32)
    cpu = torch.device("cpu")
    full = embed(encoder, tokens, cpu, 8, False)
    given = {"embed_batch_size": 8, "bf16": False}
    torch_cfg = MatcherConfig(**given)
    assert torch_cfg.embed_runtime == "torch"  # the default
    assert embed_on(encoder, tokens, cpu, torch_cfg).tobytes() == full.tobytes()
    fast = embed_on(encoder, tokens, cpu, MatcherConfig(**given, embed_runtime="onnx-int8"))
    assert fast.tobytes() != full.tobytes() and np.sum(fast * full, axis=1).min() > 0.95
    assert fast.tobytes() == Int8Encoder.from_encoder(encoder).embed(tokens, 8).tobytes()


@pytest.fixture(scope="module")
def int8_trained(tmp_path_factory, tx_dataset, tx_config, tx_features):
    """A model trained with ``embed_runtime`` and ``predict_runtime`` onnx-int8, and the
    document count of each int8 embedding pass its training made."""
    cfg = tx_config.model_copy(
        update={
            "model": tx_config.model.model_copy(update={"kind": "xr_transformer"}),
            "matcher": tx_config.matcher.model_copy(
                update={"predict_runtime": "onnx-int8", "embed_runtime": "onnx-int8"}
            ),
            "work_dir": tmp_path_factory.mktemp("work"),
        }
    )
    passes: list[int] = []
    real = Int8Encoder.embed

    def counted(self, tokens, batch_size, what="embedding"):
        passes.append(tokens.n_docs)
        return real(self, tokens, batch_size, what)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Int8Encoder, "embed", counted)
        model = train_model(tx_features, cfg, Corpus(tx_dataset))
    return model, passes


@pytest.fixture(scope="module")
def int8_model(int8_trained):
    return int8_trained[0]


def test_training_embeds_through_int8_when_asked(int8_trained, tx_features):
    # each matcher level's documents, then the rest of train (the ranker's features)
    passes, n_train = int8_trained[1], tx_features.train.X.shape[0]
    assert len(passes) >= 3 and sum(passes) >= n_train, passes


def test_model_predicts_with_int8_and_round_trips(tmp_path, int8_model, tx_dataset):
    assert int8_model.encoder.runtime == "onnx-int8" and int8_model.encoder.int8 is not None
    texts = Corpus(tx_dataset).read_split("test", ["text"]).column("text").to_pylist()[:60]
    fast = int8_model.predict(texts)
    int8_model.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "encoder" / "meta.json").read_text())
    assert meta["runtime"] == "onnx-int8" and ONNX_FILE in meta["files"]  # checksummed
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    again = loaded.predict(texts)
    assert (fast != again).nnz == 0 and np.array_equal(fast.indices, again.indices)
    # the same weights through torch: the int8 top label agrees on most documents
    plain = int8_model.encoder.on_runtime("torch")
    assert plain.int8 is None and plain.encoder is int8_model.encoder.encoder
    full = int8_model.with_encoder(plain).predict(texts)
    agree = np.mean([top_label(fast, i) == top_label(full, i) for i in range(len(texts))])
    assert agree >= 0.9, agree


@pytest.mark.parametrize("runtime", ["torch", "onnx-int8"])
def test_a_documents_labels_never_depend_on_its_batch(runtime, int8_model, mixed_texts):
    texts = mixed_texts
    features = int8_model.encoder.on_runtime(runtime)
    assert (features.int8 is not None) == (runtime == "onnx-int8")

    def top5(batch_size, rows):
        model = int8_model.with_encoder(replace(features, batch_size=batch_size))
        return ranked(model.predict([texts[i] for i in rows], topk=5))

    rows = np.arange(len(texts))
    labels, scores = top5(BATCH_SIZES[-1], rows)
    order = np.random.default_rng(1).permutation(rows)
    # each batch size, a shuffled request, and a request of one text (as in `xmc serve`)
    for batch_size, asked in [(1, rows), (7, rows), (BATCH_SIZES[-1], order), (7, rows[[5]])]:
        got_labels, got_scores = top5(batch_size, asked)
        assert got_labels == [labels[i] for i in asked], (batch_size, asked)
        np.testing.assert_allclose(got_scores, scores[asked], rtol=0, atol=1e-6)


def ranked(scores) -> tuple[list[list[int]], np.ndarray]:
    """Each row's label ids best first, and their scores (n, 5), of a top-5 csr."""
    labels, values = [], np.zeros((scores.shape[0], 5), dtype=np.float32)
    for i in range(scores.shape[0]):
        row = scores[i]
        best = np.argsort(-row.data, kind="stable")
        labels.append(row.indices[best].tolist())
        values[i, : len(best)] = row.data[best]
    return labels, values


def top_label(scores, row: int) -> int:
    r = scores[row]
    return int(r.indices[np.argmax(r.data)])


def test_unknown_runtime_in_meta_fails_clearly(tmp_path, int8_model):
    folder = tmp_path / "features"
    int8_model.encoder.save(folder)
    assert EmbeddingFeatures.load(folder, "cpu").int8 is not None
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(meta | {"runtime": "tensorrt"}))
    with pytest.raises(ArtifactError, match="runtime 'tensorrt'"):
        EmbeddingFeatures.load(folder, "cpu")


def test_an_int8_encoder_quantized_per_batch_is_exported_again_on_load(tmp_path, int8_model):
    import onnx

    features = int8_model.encoder
    assert features.int8.per_token  # the export marks its graph
    older = onnx.load_from_string(features.int8.model)
    del older.metadata_props[:]  # as saved before issue 34 (quantize_dynamic's graph)
    stale = Int8Encoder(older.SerializeToString(), features.int8.hidden_size)
    assert not stale.per_token
    replace(features, int8=stale).save(tmp_path / "features")
    loaded = EmbeddingFeatures.load(tmp_path / "features", "cpu")
    assert loaded.int8.per_token and loaded.int8.model != stale.model


def test_a_served_int8_model_pins_onnxruntime() -> None:
    plain = XmcConfig.load(None, ["model.kind=xr_transformer"])
    fast = XmcConfig.load(None, ["model.kind=xr_transformer", "matcher.predict_runtime=onnx-int8"])
    assert "onnxruntime" not in family_requirements("xr_transformer", plain)
    assert "onnxruntime" in family_requirements("xr_transformer", fast)
    pin = f"onnxruntime=={metadata.version('onnxruntime')}"
    assert pin in pip_requirements("xr_transformer", fast)
