"""XR-Transformer's final ranker: XR-Linear on ``[TF-IDF, weight * unit embedding]``.

Its label tree is refined on the concatenated label features (PIFA over TF-IDF ⊕ PIFA over the
fine-tuned embeddings), and the matcher's top clusters on the training documents become
matcher-aware negatives of every ranker level: a document joins the problems of the ranker
clusters that share a label with a cluster the matcher predicted for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import numpy as np
import scipy.sparse as sp

from xmc_core.config import Runtime
from xmc_core.evaluation.ranking import top_k
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta

if TYPE_CHECKING:
    import pyarrow as pa
    from transformers import PreTrainedTokenizerBase

    from xmc_core.transformer.encoder import TextEncoder
    from xmc_core.transformer.onnx_int8 import Int8Encoder

RUNTIMES = get_args(Runtime)  # MatcherConfig.predict_runtime


def concat_features(X: sp.csr_matrix, E: np.ndarray, weight: float) -> sp.csr_matrix:
    """``[X, weight * E]``: csr (n, d + h) float32 (``E`` float32 (n, h) unit rows)."""
    if X.shape[0] != E.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows, the embeddings {E.shape[0]}")
    dense = sp.csr_matrix(np.asarray(E, dtype=np.float32) * np.float32(weight))
    return sp.hstack([sp.csr_matrix(X, dtype=np.float32), dense], format="csr")


def ranker_label_features(X: sp.csr_matrix, E: np.ndarray, Y: sp.csr_matrix) -> sp.csr_matrix:
    """PIFA over TF-IDF ⊕ PIFA over the embeddings, each block unit-norm, then normalized."""
    text = pifa([pifa_partial(X, Y)])
    neural = pifa([pifa_partial(sp.csr_matrix(E.astype(np.float32, copy=False)), Y)])
    return concat_label_features([text, neural], [1.0, 1.0])


def matcher_parent_shortlists(
    P: sp.csr_matrix,
    matcher_tree: LabelTree,
    matcher_level: int,
    ranker_tree: LabelTree,
    beam_size: int,
) -> list[sp.csr_matrix | None]:
    """Per ranker level ``t``: csr (n_docs, K_t) binary parents to add to its matching matrix
    (None at level 0, which has one parent).

    ``P``: csr (n_docs, K_m), the matcher's top clusters at ``matcher_level`` of its tree. The
    two trees differ, so each document gets the ``beam_size`` ranker parents holding the most
    labels of its predicted matcher clusters (ties to the lower id), as many as the matcher's
    beam: the ranker sees the matcher's hard negatives without a blow-up of its problems.
    """
    n_labels = ranker_tree.n_labels
    labels = np.arange(n_labels)
    ones = np.ones(n_labels, dtype=np.float32)
    m_of = matcher_tree.label_to_cluster(matcher_level)
    A_m = sp.csr_matrix((ones, (labels, m_of)), shape=(n_labels, P.shape[1]))
    chosen = sp.csr_matrix(P, dtype=np.float32, copy=True)
    chosen.data[:] = 1.0
    out: list[sp.csr_matrix | None] = [None]
    for t in range(1, ranker_tree.depth):
        parent_of = ranker_tree.label_to_cluster(t - 1)
        K = ranker_tree.level_sizes()[t - 1]
        A_r = sp.csr_matrix((ones, (labels, parent_of)), shape=(n_labels, K))
        shared = sp.csr_matrix(chosen @ sp.csr_matrix(A_m.T @ A_r))  # labels in common
        out.append(top_k(shared, beam_size).indicator())
    return out


EMBEDDINGS_FILE = "embeddings.npz"


@dataclass(frozen=True)
class EmbeddedSplit(SplitFeatures):
    """A split as the final ranker's input: X csr (n, d + h) = ``[X_tfidf, weight * E]``, with
    ``E`` float32 (n, h) the unit embeddings (saved as ``embeddings.npz`` in a
    ``SplitFeatures`` folder, which also loads as plain ``SplitFeatures``)."""

    E: np.ndarray | None = None

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / EMBEDDINGS_FILE, E=self.E)
        super().save(folder)

    @classmethod
    def load(cls, folder: str | Path) -> EmbeddedSplit:
        plain = SplitFeatures.load(folder)
        E = load_arrays(Path(folder) / EMBEDDINGS_FILE)["E"]
        return cls(plain.X, plain.Y, plain.doc_ids, plain.unknown_labels, E)


@dataclass
class EmbeddingFeatures:
    """The fine-tuned encoder as the model's encoder: texts -> ``[TF-IDF, weight * e]``.

    ``weight``, ``batch_size``, ``device``, ``bf16``, ``runtime``: the matcher config's
    ``embedding_weight``, ``embed_batch_size``, ``device``, ``bf16`` and ``predict_runtime``
    (saved with the model, but the device, which is chosen at load time). With ``onnx-int8``
    the encoder is exported to ``int8`` when built (saved beside it), which embeds whenever
    the device is a CPU.
    """

    uses_text = True

    encoder: TextEncoder
    tokenizer: PreTrainedTokenizerBase
    weight: float
    batch_size: int
    device: str
    bf16: bool
    runtime: str = "torch"
    int8: Int8Encoder | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime {self.runtime!r}, expected one of {RUNTIMES}")
        if self.runtime == "onnx-int8" and self.int8 is None:
            from xmc_core.transformer.onnx_int8 import Int8Encoder

            self.int8 = Int8Encoder.from_encoder(self.encoder)

    def on_runtime(self, runtime: str) -> EmbeddingFeatures:
        """The same weights predicting on ``runtime`` (exported to int8 for ``onnx-int8``)."""
        if runtime == self.runtime:
            return self
        return replace(self, runtime=runtime, int8=None)

    def embed(self, texts: list[str | None] | pa.Array) -> np.ndarray:
        """Unit embeddings float32 (n, h) of raw texts."""
        from xmc_core.neural import resolve_device
        from xmc_core.transformer.encoder import embed
        from xmc_core.transformer.tokens import tokenize_texts

        tokens = tokenize_texts(self.tokenizer, texts, self.encoder.cfg.max_length)
        device = resolve_device(self.device)
        if self.int8 is not None and device.type == "cpu":
            return self.int8.embed(tokens, self.batch_size)
        return embed(self.encoder, tokens, device, self.batch_size, self.bf16)

    def transform(self, X: sp.csr_matrix, texts: list[str | None] | pa.Array) -> sp.csr_matrix:
        """The ranker's input for documents with TF-IDF rows ``X`` and raw ``texts``."""
        return concat_features(X, self.embed(texts), self.weight)

    def save(self, folder: str | Path) -> None:
        """``encoder/`` (Hugging Face folder + tokenizer), the int8 encoder if any, and
        ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder.cpu().save(folder / "encoder", self.tokenizer)
        if self.int8 is not None:
            self.int8.save(folder)
        fields = {"weight": self.weight, "batch_size": self.batch_size, "bf16": self.bf16,
                  "runtime": self.runtime}  # fmt: skip
        write_meta(folder, "EmbeddingFeatures", fields)

    @classmethod
    def load(cls, folder: str | Path, device: str) -> EmbeddingFeatures:
        """Read a folder written by :meth:`save` (no download: everything is local); the
        encoder will run on ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``). An int8
        encoder saved with one quantization scale per batch is exported again (per token)."""
        from xmc_core.transformer.encoder import TextEncoder

        folder = Path(folder)
        meta = read_meta(folder, "EmbeddingFeatures")
        encoder, tokenizer = TextEncoder.load_saved(folder / "encoder")
        with meta_fields(folder):
            weight, batch = float(meta["weight"]), int(meta["batch_size"])
            bf16, runtime = bool(meta["bf16"]), meta.get("runtime", "torch")  # saved before int8
            if runtime not in RUNTIMES:
                raise ValueError(f"runtime {runtime!r}, expected one of {RUNTIMES}")
        int8 = None
        if runtime == "onnx-int8":
            from xmc_core.transformer.onnx_int8 import Int8Encoder

            int8 = Int8Encoder.load(folder, encoder.hidden_size)
            if not int8.per_token:  # saved before issue 34: batch-dependent, so export again
                int8 = Int8Encoder.from_encoder(encoder)
        return cls(encoder, tokenizer, weight, batch, device, bf16, runtime, int8)
