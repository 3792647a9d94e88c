"""The deployable model: raw text in, ranked labels out.

A folder holding the TF-IDF vectorizer, the label index, the label ranker (XR-Linear) and the
training label counts (for propensity-scored metrics); no pickle anywhere.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.artifacts import load_arrays, read_meta, save_arrays, write_meta
from xmc_core.features.labels import LabelIndex
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import XRLinearModel


class XmcModel:
    """``vectorizer`` + ``labels`` + ``ranker``; ``label_counts``: (n_labels,) train frequency."""

    def __init__(
        self,
        vectorizer: TfidfVectorizer,
        labels: LabelIndex,
        ranker: XRLinearModel,
        label_counts: np.ndarray,
        n_train_docs: int,
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

    def predict_features(
        self, X: sp.csr_matrix, topk: int | None = None, beam_size: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of featurized documents."""
        return self.ranker.predict(X, beam_size=beam_size, topk=topk)

    def predict(
        self,
        texts: list[str | None] | pa.Array,
        topk: int | None = None,
        beam_size: int | None = None,
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of raw texts."""
        return self.predict_features(self.vectorizer.transform(texts), topk, beam_size)

    def top_labels(self, scores: sp.csr_matrix) -> list[list[tuple[str, float]]]:
        """Each row of a prediction as ``[(label, score), ...]``, best first."""
        out = []
        for i in range(scores.shape[0]):
            lo, hi = scores.indptr[i], scores.indptr[i + 1]
            cols, vals = scores.indices[lo:hi], scores.data[lo:hi]
            order = np.lexsort((cols, -vals))
            names = self.labels.decode(cols[order])
            out.append([(n, float(v)) for n, v in zip(names, vals[order], strict=True)])
        return out

    def save(self, folder: str | Path) -> None:
        """Write ``vectorizer/``, ``labels/``, ``ranker/``, ``label_counts.npz``, ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.vectorizer.save(folder / "vectorizer")
        self.labels.save(folder / "labels")
        self.ranker.save(folder / "ranker")
        save_arrays(folder / "label_counts.npz", counts=self.label_counts)
        write_meta(
            folder,
            "XmcModel",
            {
                "ranker": "XRLinearModel",
                "n_train_docs": self.n_train_docs,
                "n_labels": len(self.labels),
            },
        )

    @classmethod
    def load(cls, folder: str | Path) -> XmcModel:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "XmcModel")
        return cls(
            TfidfVectorizer.load(folder / "vectorizer"),
            LabelIndex.load(folder / "labels"),
            XRLinearModel.load(folder / "ranker"),
            load_arrays(folder / "label_counts.npz")["counts"],
            int(meta["n_train_docs"]),
        )
