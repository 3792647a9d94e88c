"""The deployable model: raw text in, ranked labels out.

A folder holding the TF-IDF vectorizer, the label index, the label ranker (XR-Linear) and the
training label counts (for propensity-scored metrics); an XR-Transformer model also holds its
fine-tuned encoder (``embedding/``), whose unit embeddings are appended to the TF-IDF rows.
No pickle anywhere.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta
from xmc_core.errors import ArtifactError
from xmc_core.features.labels import LabelIndex
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import XRLinearModel
from xmc_core.ranking import top_k

if TYPE_CHECKING:
    from xmc_core.transformer.ranker import EmbeddingFeatures

log = logging.getLogger(__name__)


class XmcModel:
    """``vectorizer`` + ``labels`` + ``ranker``; ``label_counts``: (n_labels,) train frequency."""

    def __init__(
        self,
        vectorizer: TfidfVectorizer,
        labels: LabelIndex,
        ranker: XRLinearModel,
        label_counts: np.ndarray,
        n_train_docs: int,
        embedding: EmbeddingFeatures | None = None,
    ) -> None:
        if len(labels) != ranker.n_labels or len(label_counts) != len(labels):
            raise ValueError(
                f"{len(labels)} label names, {ranker.n_labels} ranker labels, "
                f"{len(label_counts)} label counts"
            )
        self.vectorizer = vectorizer
        self.labels = labels
        self.ranker = ranker
        self.label_counts = label_counts
        self.n_train_docs = n_train_docs
        self.embedding = embedding
        self._cut_logged = False

    @property
    def kind(self) -> str:
        """``xr-transformer`` when the model has an encoder, else ``xr-linear``."""
        return "xr-linear" if self.embedding is None else "xr-transformer"

    def features(self, X: sp.csr_matrix, texts: list[str | None] | pa.Array) -> sp.csr_matrix:
        """The ranker's input: TF-IDF rows ``X`` (plus the embeddings of ``texts``)."""
        return X if self.embedding is None else self.embedding.features(X, texts)

    def predict_features(
        self, X: sp.csr_matrix, topk: int | None = None, beam_size: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of featurized documents (:meth:`features`)."""
        return self.ranker.predict(X, beam_size=beam_size, topk=topk)

    def predict(
        self,
        texts: list[str | None] | pa.Array,
        topk: int | None = None,
        beam_size: int | None = None,
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of raw texts (each cut to ``predict.max_doc_chars``)."""
        texts = self.capped(texts)
        X = self.features(self.vectorizer.transform(texts), texts)
        return self.predict_features(X, topk, beam_size)

    def capped(self, texts: list[str | None] | pa.Array) -> list[str | None] | pa.Array:
        """``texts`` with each cut to its first ``predict.max_doc_chars`` characters (the
        first cut is logged, once per model object: once per run)."""
        cap = self.ranker.predict_cfg.max_doc_chars
        if cap is None:
            return texts
        if isinstance(texts, pa.Array | pa.ChunkedArray):
            n_long = pc.sum(pc.greater(pc.utf8_length(texts), cap)).as_py() or 0
            capped = pc.utf8_slice_codeunits(texts, 0, cap) if n_long else texts
        else:
            n_long = sum(1 for t in texts if t is not None and len(t) > cap)
            capped = (
                [t[:cap] if t is not None and len(t) > cap else t for t in texts]
                if n_long
                else texts
            )
        if n_long and not self._cut_logged:
            self._cut_logged = True
            log.warning(
                "%d document(s) longer than predict.max_doc_chars=%d characters: each is cut to "
                "its first %d characters (logged once per run)",
                n_long, cap, cap,
            )  # fmt: skip
        return capped if n_long else texts

    def top_labels(self, scores: sp.csr_matrix) -> list[list[tuple[str, float]]]:
        """Each row of a prediction csr (n_docs, n_labels) as ``[(label, score), ...]``, best
        first (ties: lower label id, see :func:`xmc_core.ranking.top_k`)."""
        ranked = top_k(scores)
        pairs = list(zip(self.labels.decode(ranked.cols), ranked.vals.tolist(), strict=True))
        return [pairs[lo:hi] for lo, hi in pairwise(ranked.offsets.tolist())]

    def save(self, folder: str | Path) -> None:
        """Write ``vectorizer/``, ``labels/``, ``ranker/``, ``label_counts.npz``, ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.vectorizer.save(folder / "vectorizer")
        self.labels.save(folder / "labels")
        self.ranker.save(folder / "ranker")
        save_arrays(folder / "label_counts.npz", counts=self.label_counts)
        if self.embedding is not None:
            self.embedding.save(folder / "embedding")
        write_meta(
            folder,
            "XmcModel",
            {
                "kind": self.kind,
                "ranker": "XRLinearModel",
                "n_train_docs": self.n_train_docs,
                "n_labels": len(self.labels),
            },
        )

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> XmcModel:
        """Read a folder written by :meth:`save` (``device``: where an encoder runs)."""
        folder = Path(folder)
        meta = read_meta(folder, "XmcModel")
        with meta_fields(folder):
            n_train_docs = int(meta["n_train_docs"])
        kind = meta.get("kind", "xr-linear")
        if kind not in ("xr-linear", "xr-transformer"):
            raise ArtifactError(folder / "meta.json", f"unknown model kind {kind!r}")
        embedding = None
        if kind == "xr-transformer":
            from xmc_core.transformer.ranker import EmbeddingFeatures

            embedding = EmbeddingFeatures.load(folder / "embedding", device)
        return cls(
            TfidfVectorizer.load(folder / "vectorizer"),
            LabelIndex.load(folder / "labels"),
            XRLinearModel.load(folder / "ranker"),
            load_arrays(folder / "label_counts.npz")["counts"],
            n_train_docs,
            embedding,
        )
