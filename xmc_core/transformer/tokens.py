"""Subword tokenization of a corpus partition for the encoder, saved as ``.npz`` (no pickle).

``input_ids``: int32 (n_docs, max_length), padded with the tokenizer's pad id after each row's
``lengths[i]`` tokens (special tokens included). Batches are cut to their longest row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from xmc_core.errors import ArtifactError, InputError
from xmc_core.storage.artifacts import load_arrays, read_meta, save_arrays, write_meta

if TYPE_CHECKING:
    import pyarrow as pa
    from transformers import PreTrainedTokenizerBase

    from xmc_core.corpus import Corpus, PartitionRef

CHUNK = 4096  # texts per tokenizer call (bounds the Python lists it builds)
POOL_BATCHES = 50
"""Batches drawn together and sorted by length (see :func:`epoch_batches`)."""


@dataclass(frozen=True)
class TokenizedTexts:
    """Token ids int32 (n, L) and lengths int32 (n,) of ``n`` documents."""

    input_ids: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        if self.input_ids.ndim != 2 or self.lengths.shape != (self.input_ids.shape[0],):
            raise ValueError(f"bad shapes {self.input_ids.shape}, {self.lengths.shape}")

    @property
    def n_docs(self) -> int:
        return int(self.input_ids.shape[0])

    def take(self, rows: np.ndarray) -> TokenizedTexts:
        """The documents ``rows`` (int array), in that order."""
        return TokenizedTexts(self.input_ids[rows], self.lengths[rows])

    def batch(self, rows: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` int64 (len(rows), longest) on ``device``."""
        width = max(int(self.lengths[rows].max()), 1) if len(rows) else 1
        ids = torch.from_numpy(self.input_ids[rows, :width].astype(np.int64))
        mask = torch.arange(width)[None, :] < torch.from_numpy(self.lengths[rows])[:, None]
        return ids.to(device), mask.long().to(device)

    @staticmethod
    def concat(parts: list[TokenizedTexts]) -> TokenizedTexts:
        """Stack partitions in order (they share max_length)."""
        return TokenizedTexts(
            np.concatenate([p.input_ids for p in parts]), np.concatenate([p.lengths for p in parts])
        )

    def save(self, folder: str | Path) -> None:
        """Write ``tokens.npz`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / "tokens.npz", input_ids=self.input_ids, lengths=self.lengths)
        write_meta(
            folder, "TokenizedTexts", {"n_docs": self.n_docs, "shape": [*self.input_ids.shape]}
        )

    @classmethod
    def load(cls, folder: str | Path) -> TokenizedTexts:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        read_meta(folder, "TokenizedTexts")
        arrays = load_arrays(folder / "tokens.npz")
        try:
            return cls(arrays["input_ids"], arrays["lengths"])
        except ValueError as err:  # a missing array is an ArtifactError of load_arrays
            raise ArtifactError(folder, f"not a token file ({err})", "re-create it") from err


def tokenize_texts(
    tokenizer: PreTrainedTokenizerBase, texts: list[str] | pa.Array, max_length: int
) -> TokenizedTexts:
    """Tokenize (truncating to ``max_length`` tokens, special tokens included)."""
    values = texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)
    n = len(values)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = np.full((n, max_length), pad, dtype=np.int32)
    lengths = np.zeros(n, dtype=np.int32)
    for start in range(0, n, CHUNK):
        chunk = [v if v is not None else "" for v in values[start : start + CHUNK]]
        encoded = tokenizer(chunk, truncation=True, max_length=max_length)["input_ids"]
        for i, row in enumerate(encoded, start):
            ids[i, : len(row)] = row
            lengths[i] = len(row)
    return TokenizedTexts(ids, lengths)


def tokenize_partition(
    corpus: Corpus, ref: PartitionRef, tokenizer: PreTrainedTokenizerBase, max_length: int
) -> TokenizedTexts:
    """Tokenize the texts of one corpus partition (raw-text corpora only)."""
    if corpus.kind != "text":
        raise InputError(
            corpus.path,
            "XR-Transformer needs raw text, and this corpus is bag-of-words",
            "train XR-Linear on it (model.kind=xr_linear) or ingest a text corpus",
        )
    return tokenize_texts(
        tokenizer, corpus.read_partition(ref, ["text"]).column("text"), max_length
    )


def epoch_batches(
    rows: np.ndarray, lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
    pool_batches: int = POOL_BATCHES,
) -> list[np.ndarray]:  # fmt: skip
    """An epoch's batches of ``batch_size`` rows: a permutation of ``rows`` (a short last
    batch left out) cut into pools of ``pool_batches`` batches, each pool sorted by document
    length (``lengths``, indexed by row) and cut into batches, the batches then shuffled;
    documents of similar length share a batch, so little of it is padding."""
    kept = max(len(rows) // batch_size * batch_size, min(len(rows), batch_size))
    order = rng.permutation(rows)[:kept]
    pool = pool_batches * batch_size
    batches = []
    for start in range(0, len(order), pool):
        part = order[start : start + pool]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]
