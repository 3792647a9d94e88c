"""Label features for clustering: PIFA, label-text TF-IDF, and their concatenation.

PIFA itself lives in :mod:`xmc_core.features.pifa` (re-exported here).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.errors import ArtifactError
from xmc_core.features.labels import LabelIndex
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.storage.artifacts import (
    load_arrays,
    load_csr,
    meta_fields,
    read_meta,
    save_arrays,
    save_csr,
    write_meta,
)

__all__ = ["LabelFeatures", "concat_label_features", "pifa", "pifa_partial"]


class LabelFeatures:
    """Label feature matrix ``Z``: csr (n_labels, n_dims), rows L2-normalized.

    With zero-shot labels on (``label_features.zero_shot``): ``text``, the labels' text TF-IDF,
    csr (n_labels, n_features), rows L2-normalized (a label without text: a zero row), and
    ``zero_shot``, the ids (int64, ascending) of the labels that have a text but no training
    document, whose rows of ``Z`` are their text rows. ``text_blocks``: the columns where the
    text's later blocks begin, when its space is made of blocks (XR-Transformer's ranker space
    ``[TF-IDF, embedding]``: the TF-IDF's width), each scaled on its own by the zero-shot
    rankers (:mod:`xmc_core.linear.zero_shot`).
    """

    def __init__(
        self,
        z: sp.csr_matrix,
        kind: str,
        text: sp.csr_matrix | None = None,
        zero_shot: np.ndarray | None = None,
        text_blocks: tuple[int, ...] = (),
    ) -> None:
        self.z = sp.csr_matrix(z)
        self.kind = kind
        self.text = None if text is None else sp.csr_matrix(text)
        self.zero_shot = np.zeros(0, np.int64) if zero_shot is None else zero_shot.astype(np.int64)
        self.text_blocks = tuple(int(b) for b in text_blocks)
        if self.text is not None and self.text.shape[0] != self.z.shape[0]:
            raise ValueError(f"text has {self.text.shape[0]} rows, Z {self.z.shape[0]}")
        if self.zero_shot.size and not (
            self.zero_shot.min() >= 0 and self.zero_shot.max() < self.z.shape[0]
        ):
            raise ValueError("zero-shot label ids out of range")
        width = 0 if self.text is None else self.text.shape[1]
        if list(self.text_blocks) != sorted(set(self.text_blocks)) or any(
            not 0 < b < width for b in self.text_blocks
        ):
            raise ValueError(f"text blocks {list(self.text_blocks)} do not split {width} columns")

    def save(self, folder: str | Path) -> None:
        """Write ``Z.npz`` (and ``T.npz``, ``zero_shot.npz`` with zero-shot labels on) and
        ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_csr(folder / "Z.npz", self.z)
        if self.text is not None:
            save_csr(folder / "T.npz", self.text)
            save_arrays(folder / "zero_shot.npz", ids=self.zero_shot)
        fields = {
            "kind": self.kind, "shape": list(self.z.shape), "text": self.text is not None,
            "text_blocks": list(self.text_blocks),
        }  # fmt: skip
        write_meta(folder, "LabelFeatures", fields)

    @classmethod
    def load(cls, folder: str | Path) -> LabelFeatures:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "LabelFeatures")
        with meta_fields(folder):
            kind, has_text = str(meta["kind"]), bool(meta.get("text", False))
            blocks = tuple(int(b) for b in meta.get("text_blocks", []))
        z = load_csr(folder / "Z.npz")
        if not has_text:
            return cls(z, kind)
        ids = load_arrays(folder / "zero_shot.npz")["ids"]
        try:
            return cls(z, kind, load_csr(folder / "T.npz"), ids, blocks)
        except ValueError as err:
            raise ArtifactError(folder, f"inconsistent label features: {err}") from err


def aligned_label_texts(index: LabelIndex, texts: pa.Table) -> pa.Array:
    """Each label's text in label-id order (null where it has none). ``texts``: table with
    columns ``label`` and ``text`` (nullable), any order."""
    pos = pc.index_in(index.names, value_set=texts.column("label").cast(pa.large_string()))
    return texts.column("text").combine_chunks().take(pos)


def label_text_matrix(
    vectorizer: TfidfVectorizer, index: LabelIndex, texts: pa.Table
) -> sp.csr_matrix:
    """TF-IDF of each label's text, csr (n_labels, n_features); labels without text are zero rows.

    ``texts``: table with columns ``label`` and ``text`` (nullable), any order.
    """
    return vectorizer.transform(aligned_label_texts(index, texts))


def with_text_rows(z: sp.csr_matrix, text: sp.csr_matrix, rows: np.ndarray) -> sp.csr_matrix:
    """``z`` with its ``rows`` (bool (n_labels,)) replaced by those of ``text`` (the same
    shape): the zero-shot labels' features, in whatever space ``text`` is."""
    mask = rows.astype(np.float32)
    return sp.csr_matrix(sp.diags(1.0 - mask) @ z + sp.diags(mask) @ text, dtype=np.float32)
