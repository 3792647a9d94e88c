"""The saved parts of an Astec model: the encoder (module 1's embeddings and residual block)
and the ranker (module 2's ANN indexes, module 3's residual block, module 4's per-label
classifier, the fusion weight ``beta``).

Both predict with numpy (and faiss) only: torch is imported by ``fit`` alone. Arrays are saved
as ``.npz`` (``allow_pickle=False``), settings in ``meta.json``; an ANN index is faiss's own
serialization stored as a uint8 array, its sha256 in ``meta.json`` checked before faiss reads
it. No pickle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from xmc_core.config import PredictConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.dense import (
    Block,
    dense_rows,
    encode_rows,
    fuse,
    shortlist_logits,
    unit_rows,
)
from xmc_core.families.astec.shortlist import Shortlister
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta

ENCODER_FILE = "encoder.npz"
CLASSIFIER_FILE = "classifier.npz"


class AstecEncoder:
    """TF-IDF rows -> Astec's encoding: ``block(relu(X E))`` (module 1, frozen).

    ``E`` float32 (n_features, D); ``block`` the residual block; ``record``: how module 1
    was trained (meta-labels, per-epoch history), kept in ``meta.json``."""

    uses_text = False

    def __init__(
        self, cfg: AstecConfig, E: np.ndarray, block: Block, record: dict[str, Any] | None = None
    ) -> None:
        if E.ndim != 2 or block.A.shape != (E.shape[1], E.shape[1]):
            raise ValueError(f"embeddings {E.shape} and block {block.A.shape} do not fit")
        self.cfg, self.E, self.block = cfg, np.ascontiguousarray(E, np.float32), block
        self.record = record or {}

    @property
    def dim(self) -> int:
        return int(self.E.shape[1])

    def encode(self, X: sp.csr_matrix) -> np.ndarray:
        """The encodings float32 (n, D) of TF-IDF rows ``X`` csr (n, n_features)."""
        if X.shape[1] != self.E.shape[0]:
            raise InputError(
                None, f"documents have {X.shape[1]} features, the encoder {self.E.shape[0]}",
                "encode them with the model's own vectorizer",
            )  # fmt: skip
        X = sp.csr_matrix(X, dtype=np.float32)
        step = self.cfg.eval_batch_size
        parts = [
            encode_rows(X[s : s + step], self.E, self.block) for s in range(0, X.shape[0], step)
        ]
        return np.vstack(parts) if parts else np.zeros((0, self.dim), np.float32)

    def transform(self, X: sp.csr_matrix, texts: Any = None) -> sp.csr_matrix:
        """The ranker's input: the encodings as csr (n, D) float32 (``texts``: unused)."""
        return sp.csr_matrix(self.encode(X))

    def save(self, folder: str | Path) -> None:
        """``encoder.npz`` (E, the block) and ``meta.json`` (config, shapes, record)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / ENCODER_FILE, E=self.E, **self.block.arrays("block_"))
        fields = {
            "astec": self.cfg.model_dump(mode="json"), "n_features": int(self.E.shape[0]),
            "dim": self.dim, "record": self.record,
        }  # fmt: skip
        write_meta(folder, "AstecEncoder", fields)

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> AstecEncoder:
        """Read a folder written by :meth:`save` (``device``: unused, numpy runs it)."""
        folder = Path(folder)
        meta = read_meta(folder, "AstecEncoder")
        arrays = load_arrays(folder / ENCODER_FILE)
        with meta_fields(folder):
            cfg = AstecConfig(**meta["astec"])
            shape = (int(meta["n_features"]), int(meta["dim"]))
            encoder = cls(cfg, arrays["E"], Block.from_arrays(arrays, "block_"), meta["record"])
        if encoder.E.shape != shape:
            raise ArtifactError(folder / ENCODER_FILE, f"E {encoder.E.shape}, meta.json {shape}")
        return encoder


class AstecRanker:
    """Modules 2-4 on Astec encodings: the ANN indexes give each document its shortlist
    (:class:`~xmc_core.families.astec.shortlist.Shortlister`); each shortlisted label scores
    ``beta * sigmoid(w . block(z) + b) + (1 - beta) * sigmoid(s)``, ``s`` its ANN similarity.
    ``W`` float32 (L, D), ``b`` float32 (L,)."""

    def __init__(self, cfg: AstecConfig, predict: PredictConfig) -> None:
        self.cfg = cfg
        self.predict_cfg = predict

    @property
    def n_labels(self) -> int:
        return int(self.W_.shape[0])

    def set_parts(
        self, shortlister: Shortlister, W: np.ndarray, b: np.ndarray, block: Block, beta: float,
        record: dict[str, Any] | None = None,
    ) -> AstecRanker:  # fmt: skip
        """Use trained indexes, classifier, block and fusion weight."""
        if W.ndim != 2 or b.shape != (W.shape[0],) or block.A.shape[0] != W.shape[1]:
            raise ValueError(f"classifier shapes {W.shape}, {b.shape}, {block.A.shape} differ")
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta {beta} is not in [0, 1]")
        self.shortlister_, self.block_, self.beta_ = shortlister, block, float(beta)
        self.W_ = np.ascontiguousarray(W, np.float32)
        self.b_ = np.ascontiguousarray(b, np.float32)
        self.record_ = record or {}
        return self

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any = None, negatives: Any = None
    ) -> AstecRanker:
        """Train modules 2-4 on encodings ``X`` csr (n, D) and labels ``Y`` csr (n, L)
        (``index``, ``negatives``: unused; the ANN indexes are built here)."""
        from xmc_core.families.astec.classifier import fit_classifier

        f = fit_classifier(X, Y, self.cfg)
        return self.set_parts(f.shortlister, f.W, f.b, f.block, f.beta, f.record)

    def shortlist_scores(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ANN shortlist of each encoding row of ``Z`` float32 (n, D) and its fused
        scores: (labels int64 (n, S), scores float32 (n, S)); -1 labels: none."""
        labels, sims = self.shortlister_.shortlists(unit_rows(Z), threads=self.cfg.predict_threads)
        logits = shortlist_logits(self.block_(Z), labels, self.W_, self.b_)
        return labels, fuse(logits, sims, self.beta_)

    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n, L) float32: each row's ``topk`` best shortlisted labels (``beam_size``:
        no beam, ignored; the shortlist is set by ``shortlist_size`` and ``n_neighbours``)."""
        k = min(topk or self.predict_cfg.topk, self.n_labels)
        n, step = X.shape[0], self.cfg.eval_batch_size
        cols, vals = [], []
        for start in range(0, n, step):
            labels, scores = self.shortlist_scores(dense_rows(X, start, start + step))
            top, top_scores = top_k_dense(scores, k, labels)
            cols.append(top)
            vals.append(top_scores)
        cols_all = np.vstack(cols) if cols else np.zeros((0, k), np.int64)
        vals_all = np.vstack(vals) if vals else np.zeros((0, k), np.float32)
        rows = np.repeat(np.arange(n), cols_all.shape[1]).reshape(cols_all.shape)
        keep = cols_all >= 0
        out = sp.csr_matrix(
            (vals_all[keep], (rows[keep], cols_all[keep])), shape=(n, self.n_labels),
            dtype=np.float32,
        )  # fmt: skip
        out.sort_indices()
        return out

    def save(self, folder: str | Path) -> None:
        """``classifier.npz`` (W, b, the block), the ANN indexes (``label_index.npz``; with
        ``n_neighbours``, ``doc_index.npz`` and ``doc_labels.npz``) and ``meta.json`` (config,
        predict settings, beta, the indexes' sha256, record)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / CLASSIFIER_FILE, W=self.W_, b=self.b_, **self.block_.arrays("block_"))
        digests = self.shortlister_.save(folder)
        fields = {
            "astec": self.cfg.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"), "n_labels": self.n_labels,
            "beta": self.beta_, "ann": self.shortlister_.labels.kind, **digests,
            "record": self.record_,
        }  # fmt: skip
        write_meta(folder, "AstecRanker", fields)

    @classmethod
    def load(cls, folder: str | Path) -> AstecRanker:
        """Read a folder written by :meth:`save`; each index is checked against its sha256
        before faiss parses it."""
        folder = Path(folder)
        meta = read_meta(folder, "AstecRanker")
        with meta_fields(folder):
            ranker = cls(AstecConfig(**meta["astec"]), PredictConfig(**meta["predict"]))
            beta, record, n_labels = (
                float(meta["beta"]),
                dict(meta["record"]),
                int(meta["n_labels"]),
            )
            shortlister = Shortlister.load(folder, meta, ranker.cfg)
        arrays = load_arrays(folder / CLASSIFIER_FILE)
        with meta_fields(folder):
            block = Block.from_arrays(arrays, "block_")
            ranker.set_parts(shortlister, arrays["W"], arrays["b"], block, beta, record)
        indexed = int(shortlister.labels.ids.max(initial=-1))
        doc_labels = shortlister.doc_labels
        if (
            ranker.n_labels != n_labels
            or indexed >= n_labels
            or (doc_labels is not None and doc_labels.shape[1] != n_labels)
        ):
            raise ArtifactError(folder / CLASSIFIER_FILE, f"does not hold {n_labels} labels")
        return ranker
