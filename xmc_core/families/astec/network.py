"""Astec's networks (torch, training only; prediction runs on the exported numpy arrays of
:mod:`xmc_core.families.astec.dense`).

- :class:`ResidualBlock`: ``z + gate * dropout(relu(SN(A) z + a))``, ``A`` initialised to the
  identity (as Astec's), ``SN`` spectral normalisation, ``gate`` a scalar initialised to 0:
  the block is exactly the identity at initialisation and learns how far to move from it.
- :class:`SurrogateNet` (module 1): TF-IDF rows -> ``dropout(relu(X E))`` (an
  ``EmbeddingBag`` weighted by the TF-IDF values, sparse gradients) -> residual block -> one
  logit per meta-label.
- :class:`ShortlistNet` (modules 3 and 4): the frozen encoding ``z`` -> a fresh residual
  block -> one logit per (document, shortlisted label) pair, from per-label vectors and
  biases held as sparse-gradient embeddings (a step touches only the batch's labels).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from xmc_core.families.astec.dense import Block


class ResidualBlock(nn.Module):
    """``z + gate * dropout(relu(SN(A) z + a))`` on (n, D) rows; the identity at init."""

    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        linear = nn.Linear(dim, dim)
        with torch.no_grad():
            nn.init.eye_(linear.weight)
            linear.bias.zero_()
        self.linear = spectral_norm(linear)
        self.dropout = nn.Dropout(dropout)
        self.gate = nn.Parameter(torch.zeros(()))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z + self.gate * self.dropout(torch.relu(self.linear(z)))

    def export(self) -> Block:
        """The block as numpy arrays, its spectrally normalised weight evaluated once (the
        module is put in eval mode: the power iteration's vectors are not advanced)."""
        self.eval()
        with torch.no_grad():
            return Block(
                self.linear.weight.detach().cpu().numpy().astype(np.float32),
                self.linear.bias.detach().cpu().numpy().astype(np.float32),
                float(self.gate.detach()),
            )


def bag_inputs(X: sp.csr_matrix, device: torch.device) -> tuple[torch.Tensor, ...]:
    """``EmbeddingBag`` inputs of csr rows ``X``: (feature ids, row offsets, TF-IDF values)."""
    return (
        torch.from_numpy(X.indices.astype(np.int64)).to(device),
        torch.from_numpy(X.indptr[:-1].astype(np.int64)).to(device),
        torch.from_numpy(X.data.astype(np.float32)).to(device),
    )


class SurrogateNet(nn.Module):
    """Module 1: TF-IDF rows -> encoding (n, D) -> meta-label logits (n, K)."""

    def __init__(
        self, n_features: int, dim: int, n_meta: int, dropout: float, block_dropout: float
    ) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(n_features, dim, mode="sum", sparse=True)
        with torch.no_grad():
            self.embedding.weight.normal_(0.0, dim**-0.5)
        self.dropout = nn.Dropout(dropout)
        self.block = ResidualBlock(dim, block_dropout)
        self.output = nn.Linear(dim, n_meta)

    def encode(
        self, ids: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        """The encoding (n, D) of the rows given as :func:`bag_inputs`."""
        h = self.embedding(ids, offsets, per_sample_weights=weights)
        return self.block(self.dropout(torch.relu(h)))

    def forward(
        self, ids: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        return self.output(self.encode(ids, offsets, weights))

    def dense_parameters(self) -> list[nn.Parameter]:
        """Every parameter but the embedding table (which has sparse gradients)."""
        return [p for name, p in self.named_parameters() if not name.startswith("embedding.")]


class ShortlistNet(nn.Module):
    """Modules 3 and 4: encodings (n, D) -> a residual block -> logits of (row, label) pairs.

    ``vectors`` float32 (L, D) and ``bias`` float32 (L,): the initial label vectors and
    biases."""

    def __init__(self, vectors: np.ndarray, bias: np.ndarray, block_dropout: float) -> None:
        super().__init__()
        n_labels, dim = vectors.shape
        self.block = ResidualBlock(dim, block_dropout)
        self.weight = nn.Embedding(n_labels, dim, sparse=True)
        self.bias = nn.Embedding(n_labels, 1, sparse=True)
        with torch.no_grad():
            self.weight.weight.copy_(torch.from_numpy(vectors))
            self.bias.weight.copy_(torch.from_numpy(bias).unsqueeze(1))

    def forward(self, z: torch.Tensor, rows: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Logits (P,) of the pairs (``rows[p]`` of ``z``, label ``labels[p]``)."""
        h = self.block(z)
        w = self.weight(labels)
        return (w * h[rows]).sum(dim=1) + self.bias(labels).squeeze(1)
