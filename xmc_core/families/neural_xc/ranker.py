"""NeuralXC as a model's ranker: TF-IDF rows -> the chosen input columns (0/1 or their values,
``input_values``) -> input encoder -> regressor -> label decoder -> one sigmoid score per label
(the model's encoder is TF-IDF itself, :class:`~xmc_core.model.xmc_model.TfidfEncoder`).

``fit`` chooses the input columns (:func:`input_columns`), checks the memory training needs
(:func:`~xmc_core.families.neural_xc.network.check_memory`) and trains the whole network
(:mod:`xmc_core.families.neural_xc.trainer`); ``predict`` keeps each document's ``topk`` labels,
``eval_batch_size`` documents at a time (never a dense n x L for all of them). Saved as
``network.safetensors`` (the predicting sub-networks), ``columns.npz`` (the input column ids)
and ``meta.json`` (config, predict settings, shapes, training record); no pickle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from scipy.special import expit

from xmc_core.config import PredictConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.neural_xc.network import MB, NeuralXc, check_memory
from xmc_core.families.neural_xc.trainer import TrainRecord, train_network
from xmc_core.families.xml_cnn.checkpoint import load_tensors, save_tensors
from xmc_core.neural import resolve_device, torch_threads
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta

NETWORK_FILE = "network.safetensors"
COLUMNS_FILE = "columns.npz"


def input_columns(X: sp.csr_matrix, max_features: int | None) -> np.ndarray:
    """int64 ids, ascending, of the at most ``max_features`` columns of ``X`` csr (n, d) with
    the most documents (ties: the lower column); all of them when None or d <= max."""
    d = X.shape[1]
    if max_features is None or d <= max_features:
        return np.arange(d, dtype=np.int64)
    df = np.bincount(X.indices[X.data != 0], minlength=d)
    return np.sort(np.argsort(-df, kind="stable")[:max_features]).astype(np.int64)


def network_input(X: sp.csr_matrix, columns: np.ndarray, values: str) -> sp.csr_matrix:
    """The network's input csr float32 (n, len(columns)): columns ``columns`` of TF-IDF rows
    ``X`` csr (n, d), their values (``tfidf``) or 1 where they are nonzero (``binary``)."""
    X = sp.csr_matrix(X[:, columns] if len(columns) < X.shape[1] else X, dtype=np.float32)
    if values == "binary":
        X = X.copy()  # never the caller's matrix
        X.eliminate_zeros()
        X.data[:] = 1.0
    return X


def matrix_bytes(*matrices: sp.csr_matrix) -> int:
    """Bytes of csr float32 matrices (values, int32 indices and row pointers)."""
    return sum(8 * M.nnz + 4 * (M.shape[0] + 1) for M in matrices)


class NeuralXcRanker:
    """See the module docstring. ``cfg``: the ``neural_xc`` section; ``predict``: the saved
    prediction settings (``topk``)."""

    def __init__(self, cfg: NeuralXcConfig, predict: PredictConfig) -> None:
        self.cfg = cfg
        self.predict_cfg = predict

    @property
    def n_labels(self) -> int:
        return int(self.net_.n_labels)

    def set_network(
        self, net: NeuralXc, columns: np.ndarray, n_features: int, record: TrainRecord
    ) -> NeuralXcRanker:
        """Use a trained network on input columns ``columns`` of ``n_features`` TF-IDF ones."""
        if net.n_inputs != len(columns) or (len(columns) and columns.max() >= n_features):
            raise ValueError(f"{len(columns)} columns of {n_features} for {net.n_inputs} inputs")
        self.net_ = net.eval()
        self.columns_ = np.asarray(columns, dtype=np.int64)
        self.n_features_ = int(n_features)
        self.record_ = record
        return self

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any = None, negatives: Any = None
    ) -> NeuralXcRanker:
        """Train on TF-IDF rows ``X`` csr (n, d) and labels ``Y`` csr (n, L), from a seeded
        start (``index`` and ``negatives``: unused, every label is an output). An InputError
        before any training when the run would need more than ``memory_limit_mb``."""
        cfg = self.cfg
        X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
        columns = input_columns(X, cfg.input_max_features)
        inputs = network_input(X, columns, cfg.input_values)
        check_memory(cfg, X.shape[1], len(columns), Y.shape[1], matrix_bytes(inputs, Y))
        net, record = train_network(inputs, Y, cfg)
        predictor = NeuralXc(cfg, len(columns), Y.shape[1], autoencoders=False)
        predictor.load_state_dict(net.predict_state())
        return self.set_network(predictor, columns, X.shape[1], record)

    def inputs(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """The network's input columns of TF-IDF rows ``X`` csr (n, d)."""
        if X.shape[1] != self.n_features_:
            raise InputError(
                None,
                f"neural-xc ranker: documents have {X.shape[1]:,} features, the model was "
                f"trained on {self.n_features_:,}",
                "featurize them with the model's own vectorizer",
            )
        return network_input(sp.csr_matrix(X), self.columns_, self.cfg.input_values)

    @torch.no_grad()
    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n, L) float32: each row's ``topk`` best sigmoid scores, ranked by logit
        (ties: the lower label; ``beam_size``: no beam, ignored)."""
        k = min(topk or self.predict_cfg.topk, self.n_labels)
        inputs = self.inputs(X)
        n, step = inputs.shape[0], self.cfg.eval_batch_size
        cols, vals = np.zeros((n, k), np.int64), np.zeros((n, k), np.float32)
        device = resolve_device(self.cfg.device)
        net = self.net_.to(device)
        with torch_threads(self.cfg.threads):
            for start in range(0, n, step):
                batch = inputs[start : start + step].toarray()
                logits = net(torch.from_numpy(batch).to(device)).cpu().numpy()
                top, best = top_k_dense(logits, k)
                cols[start : start + step] = top
                vals[start : start + step] = expit(best)
        out = sp.csr_matrix(
            (vals.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, self.n_labels)
        )
        out.sort_indices()
        return out

    def describe(self) -> str:
        """One line: input columns, labels, the training record, the model's size."""
        size = sum(t.numel() for t in self.net_.state_dict().values()) * 4 / MB
        return (
            f"{len(self.columns_):,} of {self.n_features_:,} input columns, {self.n_labels:,} "
            f"labels, {self.record_.describe()}, {size:,.1f} MB of weights"
        )

    def save(self, folder: str | Path) -> None:
        """``network.safetensors``, ``columns.npz`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_tensors(folder / NETWORK_FILE, self.net_.state_dict())
        save_arrays(folder / COLUMNS_FILE, columns=self.columns_)
        rec = self.record_
        fields = {
            "neural_xc": self.cfg.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"),
            "n_features": self.n_features_, "n_labels": self.n_labels,
            "history": rec.history, "best_epoch": rec.best_epoch, "best_p1": rec.best_p1,
            "stopped": rec.stopped,
        }  # fmt: skip
        write_meta(folder, "NeuralXcRanker", fields)

    @classmethod
    def load(cls, folder: str | Path) -> NeuralXcRanker:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "NeuralXcRanker")
        with meta_fields(folder):
            ranker = cls(NeuralXcConfig(**meta["neural_xc"]), PredictConfig(**meta["predict"]))
            n_features, n_labels = int(meta["n_features"]), int(meta["n_labels"])
            record = TrainRecord(
                list(meta["history"]), int(meta["best_epoch"]), float(meta["best_p1"]),
                str(meta["stopped"]),
            )  # fmt: skip
        columns = load_arrays(folder / COLUMNS_FILE)["columns"]
        net = NeuralXc(ranker.cfg, len(columns), n_labels, autoencoders=False)
        try:
            net.load_state_dict(load_tensors(folder / NETWORK_FILE))
            return ranker.set_network(net, columns, n_features, record)
        except (RuntimeError, ValueError) as err:
            raise ArtifactError(
                folder / NETWORK_FILE, f"weights do not fit meta.json ({err})", "re-train it"
            ) from err
