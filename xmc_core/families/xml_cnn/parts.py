"""The saved parts of an XML-CNN model: the CNN as the model's encoder, and its output layer
as the flat placement's ranker.

:class:`CnnFeatures` turns raw texts into the ranker's input: word ids (its
:class:`~xmc_core.families.xml_cnn.vocab.Vocabulary`) -> the network up to the output layer.
The flat placement's input is the bottleneck activations (n, hidden) as csr; the xr placement's is
``[X_tfidf, weight * unit(bottleneck)]`` (XR-Transformer's ``concat_features``).
:class:`CnnOutputRanker` is the output layer ``sigmoid(x W + b)`` over every label.
Tensors are saved as safetensors, arrays as ``.npz``, settings in ``meta.json``; no pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import torch
from scipy.special import expit

from xmc_core.config import PredictConfig
from xmc_core.errors import ArtifactError
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.xml_cnn.checkpoint import NETWORK_FILE, Shapes, load_tensors, save_tensors
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.network import XmlCnn, encode
from xmc_core.families.xml_cnn.vocab import Vocabulary
from xmc_core.neural import descend, epoch_seed, resolve_device, torch_threads
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta
from xmc_core.transformer.ranker import concat_features

Mode = Literal["hidden", "concat"]


def unit_rows(H: np.ndarray) -> np.ndarray:
    """Rows of ``H`` (n, h) scaled to unit L2 norm (zero rows stay zero), float32."""
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return (H / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@dataclass
class CnnFeatures:
    """Texts -> the ranker's input by a trained XML-CNN (see the module docstring).

    ``mode``: ``hidden`` (flat: the bottleneck activations) or ``concat`` (xr: ``[X, weight *
    unit(bottleneck)]``); ``device``: where the network runs (``auto``: CUDA when present).
    """

    uses_text = True

    vocab: Vocabulary
    cfg: XmlCnnConfig
    net: XmlCnn
    mode: Mode
    weight: float
    device: str = "auto"

    def hidden(self, texts: Any) -> np.ndarray:
        """The network's features float32 (n, n_features) of raw texts."""
        tokens = self.vocab.ids(texts)
        device = resolve_device(self.device)
        self.net.to(device)
        with torch_threads(self.cfg.threads):
            return encode(
                self.net, tokens.input_ids, tokens.lengths, self.cfg.eval_batch_size, device
            )

    def transform(self, X: sp.csr_matrix, texts: Any) -> sp.csr_matrix:
        """The ranker's input for documents with TF-IDF rows ``X`` and raw ``texts``."""
        H = self.hidden(texts)
        if self.mode == "hidden":
            return sp.csr_matrix(H)
        return concat_features(X, unit_rows(H), self.weight)

    def save(self, folder: str | Path) -> None:
        """``vocab/``, ``network.safetensors`` (every weight but the output layer's),
        ``meta.json`` (config, shapes, mode, weight)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.vocab.save(folder / "vocab")
        save_tensors(folder / NETWORK_FILE, self.net.encoder_state())
        emb = self.net.embedding.weight
        fields = {
            "xml_cnn": self.cfg.model_dump(mode="json"), "mode": self.mode,
            "weight": self.weight, "n_words": int(emb.shape[0]), "dim": int(emb.shape[1]),
        }  # fmt: skip
        write_meta(folder, "CnnFeatures", fields)

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> CnnFeatures:
        """Read a folder written by :meth:`save`; the network will run on ``device``."""
        folder = Path(folder)
        meta = read_meta(folder, "CnnFeatures")
        with meta_fields(folder):
            cfg = XmlCnnConfig(**meta["xml_cnn"])
            shapes = Shapes(int(meta["n_words"]), int(meta["dim"]), 1)
            mode, weight = meta["mode"], float(meta["weight"])
        net = shapes.network(cfg)
        state = load_tensors(folder / NETWORK_FILE)
        missing, unexpected = net.load_state_dict(state, strict=False)
        if unexpected or any(not k.startswith("output.") for k in missing):
            raise ArtifactError(
                folder / NETWORK_FILE, "weights do not fit the network in meta.json", "re-train"
            )
        return cls(Vocabulary.load(folder / "vocab"), cfg, net.eval(), mode, weight, device)


class CnnOutputRanker:
    """The flat placement's ranker: ``sigmoid(x W + b)`` for every label, W (d, L), b (L,);
    ``predict`` keeps each document's ``topk`` labels, ``eval_batch_size`` documents at a time
    (never a dense n x L for all of them)."""

    def __init__(self, cfg: XmlCnnConfig, predict: PredictConfig) -> None:
        self.cfg = cfg
        self.predict_cfg = predict

    @property
    def n_labels(self) -> int:
        return int(self.W_.shape[1])

    def set_output(self, W: np.ndarray, b: np.ndarray) -> CnnOutputRanker:
        """Use the trained output layer W float32 (d, L), b float32 (L,)."""
        if W.ndim != 2 or b.shape != (W.shape[1],):
            raise ValueError(f"output layer shapes {W.shape}, {b.shape} do not fit")
        self.W_ = np.ascontiguousarray(W, dtype=np.float32)
        self.b_ = np.ascontiguousarray(b, dtype=np.float32)
        return self

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any = None, negatives: Any = None
    ) -> CnnOutputRanker:
        """Refit the output layer alone on fixed features ``X`` csr (n, d) and labels ``Y`` csr
        (n, L): BCE over every label, ``refit_epochs`` Adam epochs (``lr``, ``batch_size``),
        from a seeded initialisation (``index`` and ``negatives``: unused, flat)."""
        cfg = self.cfg
        X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
        with torch_threads(cfg.threads), torch.random.fork_rng():
            torch.manual_seed(epoch_seed(cfg.seed, -2))
            layer = torch.nn.Linear(X.shape[1], Y.shape[1])
            opt = torch.optim.Adam(layer.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
            for epoch in range(cfg.refit_epochs):
                order = np.random.default_rng([cfg.seed, 3, epoch]).permutation(X.shape[0])
                for start in range(0, len(order), cfg.batch_size):
                    rows = order[start : start + cfg.batch_size]
                    x, y = (torch.from_numpy(M[rows].toarray()) for M in (X, Y))
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(layer(x), y)
                    descend(loss, [opt])
        W = layer.weight.detach().numpy().T
        return self.set_output(W, layer.bias.detach().numpy())

    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n, L) float32: each row's ``topk`` best sigmoid scores (``beam_size``:
        no beam, ignored)."""
        k = min(topk or self.predict_cfg.topk, self.n_labels)
        X = sp.csr_matrix(X, dtype=np.float32)
        n, step = X.shape[0], self.cfg.eval_batch_size
        cols, vals = np.zeros((n, k), np.int64), np.zeros((n, k), np.float32)
        for start in range(0, n, step):
            S = expit(X[start : start + step].toarray() @ self.W_ + self.b_)
            cols[start : start + step], vals[start : start + step] = top_k_dense(S, k)
        out = sp.csr_matrix(
            (vals.ravel(), cols.ravel(), np.arange(0, n * k + 1, k)), shape=(n, self.n_labels)
        )
        out.sort_indices()
        return out

    def save(self, folder: str | Path) -> None:
        """``output.npz`` (W, b) and ``meta.json`` (config, predict settings)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / "output.npz", W=self.W_, b=self.b_)
        fields = {
            "xml_cnn": self.cfg.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"), "n_labels": self.n_labels,
        }  # fmt: skip
        write_meta(folder, "CnnOutputRanker", fields)

    @classmethod
    def load(cls, folder: str | Path) -> CnnOutputRanker:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "CnnOutputRanker")
        with meta_fields(folder):
            ranker = cls(XmlCnnConfig(**meta["xml_cnn"]), PredictConfig(**meta["predict"]))
            arrays = load_arrays(folder / "output.npz")
            return ranker.set_output(arrays["W"], arrays["b"])
