"""The NeuralXC ranker: the input columns it keeps, top-k predictions that match the dense
scores, save -> load -> predict identical, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tests.model_helpers import split_texts as texts
from xmc_core.errors import ArtifactError, InputError
from xmc_core.families.neural_xc.ranker import NeuralXcRanker, input_columns, network_input
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel


def test_input_columns_are_the_most_frequent_ones_ties_to_the_lower() -> None:
    X = sp.csr_matrix(np.array([[1, 1, 0, 0, 2], [0, 1, 1, 0, 0], [1, 1, 1, 0, 0]], np.float32))
    assert input_columns(X, 2).tolist() == [0, 1]  # documents per column: 2, 3, 2, 0, 1
    assert input_columns(X, 3).tolist() == [0, 1, 2]
    assert input_columns(X, 4).tolist() == [0, 1, 2, 4]
    assert input_columns(X, None).tolist() == [0, 1, 2, 3, 4]
    assert input_columns(X, 9).tolist() == [0, 1, 2, 3, 4]


def test_the_input_is_binary_or_the_tfidf_values() -> None:
    X = sp.csr_matrix(np.array([[0.5, 0, 0.25], [0, 0.1, 0]], np.float32))
    cols = np.array([0, 2])
    assert network_input(X, cols, "binary").toarray().tolist() == [[1, 1], [0, 0]]
    assert network_input(X, cols, "tfidf").toarray().tolist() == [[0.5, 0.25], [0, 0]]
    assert network_input(X, np.arange(3), "binary").toarray().tolist() == [[1, 0, 1], [0, 1, 0]]
    assert X.data.tolist() == [0.5, 0.25, pytest.approx(0.1)]  # the caller's matrix unchanged


def test_the_model_is_tfidf_then_the_network(trained: dict) -> None:
    model = trained["model"]
    ranker = model.ranker
    assert isinstance(model.encoder, TfidfEncoder) and isinstance(ranker, NeuralXcRanker)
    n_features = trained["train"].X.shape[1]
    assert ranker.n_features_ == n_features == 5000 and len(ranker.columns_) == 2000
    assert ranker.n_labels == len(model.labels)
    df = np.bincount(trained["train"].X.indices, minlength=n_features)
    assert df[ranker.columns_].min() >= np.delete(df, ranker.columns_).max()


def test_predictions_are_each_rows_top_scores(trained: dict) -> None:
    ranker, X = trained["model"].ranker, trained["test"].X
    got = ranker.predict(X, topk=3)
    with torch.no_grad():
        logits = ranker.net_(torch.from_numpy(ranker.inputs(X).toarray())).numpy()
    want = np.argsort(-logits, axis=1, kind="stable")[:, :3]
    assert got.shape == (X.shape[0], ranker.n_labels)
    assert np.diff(got.indptr).tolist() == [3] * X.shape[0]
    for i in range(X.shape[0]):
        row = got[i]
        assert set(row.indices) == set(want[i])
        assert row.data == pytest.approx(1 / (1 + np.exp(-logits[i, row.indices])), rel=1e-5)


def test_save_load_predict_identical(trained: dict, nxc_dataset: Path, tmp_path: Path) -> None:
    model = trained["model"]
    model.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m" / "ranker").iterdir()) == [
        "columns.npz", "meta.json", "network.safetensors"
    ]  # fmt: skip
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    a, b = model.predict(texts(nxc_dataset)), loaded.predict(texts(nxc_dataset))
    assert a.nnz > 0 and (a != b).nnz == 0
    assert loaded.ranker.record_.history == model.ranker.record_.history


def test_a_damaged_network_file_is_refused(trained: dict, tmp_path: Path) -> None:
    trained["model"].ranker.save(tmp_path / "r")
    path = tmp_path / "r" / "network.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ArtifactError, match=r"network\.safetensors"):
        NeuralXcRanker.load(tmp_path / "r")


def test_documents_of_another_width_are_refused(trained: dict) -> None:
    with pytest.raises(InputError, match="documents have 7 features, the model was trained on"):
        trained["model"].ranker.predict(sp.csr_matrix((2, 7), dtype=np.float32))
