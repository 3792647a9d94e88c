"""The label head of one matcher level: one weight vector and bias per cluster.

Stored as sparse-gradient embeddings, so a step touches only the shortlisted clusters' rows
(``torch.optim.SparseAdam``). Bootstrapping (XR-Transformer eq. 11) fits the head as a linear
model on the embeddings of the encoder before this level's fine-tuning, with the same squared
hinge loss, shortlist and weights, using the XR-Linear solver. Saved as safetensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file
from torch import nn

from xmc_core.config import RankerConfig
from xmc_core.errors import ArtifactError
from xmc_core.linear.solver import train_level
from xmc_core.storage.atomic import atomic_file
from xmc_core.transformer.shortlist import LevelProblem


class LevelHead(nn.Module):
    """``score(doc, cluster) = e_doc · W[cluster] + b[cluster]``; W: (K, h), b: (K,)."""

    def __init__(self, n_clusters: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Embedding(n_clusters, hidden, sparse=True)
        self.bias = nn.Embedding(n_clusters, 1, sparse=True)
        nn.init.zeros_(self.weight.weight)
        nn.init.zeros_(self.bias.weight)

    @property
    def n_clusters(self) -> int:
        return int(self.weight.num_embeddings)

    def pair_scores(
        self, emb: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor
    ) -> torch.Tensor:
        """Scores of pairs: ``emb`` (B, h), ``rows``/``cols`` int64 (P,) -> float32 (P,)."""
        return (emb[rows] * self.weight(cols)).sum(-1) + self.bias(cols).squeeze(-1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(W float32 (K, h), b float32 (K,)) on the CPU."""
        return (
            self.weight.weight.detach().float().cpu().numpy().copy(),
            self.bias.weight.detach().float().cpu().numpy()[:, 0].copy(),
        )

    def set_arrays(self, W: np.ndarray, b: np.ndarray) -> LevelHead:
        """Copy weights in (shapes must match)."""
        if W.shape != tuple(self.weight.weight.shape) or b.shape != (self.n_clusters,):
            raise ValueError(f"head shapes {W.shape}, {b.shape} do not fit {self.n_clusters}")
        with torch.no_grad():
            self.weight.weight.copy_(torch.from_numpy(np.ascontiguousarray(W, np.float32)))
            self.bias.weight.copy_(torch.from_numpy(np.ascontiguousarray(b, np.float32))[:, None])
        return self

    def save(self, path: str | Path) -> None:
        """``W`` and ``b`` as one safetensors file, written atomically."""
        W, b = self.arrays()
        with atomic_file(Path(path)) as tmp:
            save_file({"W": W, "b": b}, str(tmp))

    @classmethod
    def load(cls, path: str | Path) -> LevelHead:
        """Read a file written by :meth:`save`."""
        try:
            arrays = load_file(str(path))
            W, b = arrays["W"], arrays["b"]
        except (OSError, KeyError, ValueError, SafetensorError) as err:
            raise ArtifactError(
                Path(path), f"not a head file ({err})", "re-train the level"
            ) from err
        return cls(W.shape[0], W.shape[1]).set_arrays(W, b)


def bootstrap_head(
    E: np.ndarray, problem: LevelProblem, C: sp.csr_matrix, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 11: the head fitted on embeddings ``E`` (n, h) of the level's training documents.

    Each cluster's problem covers the documents that shortlist it (or all, without a
    shortlist): squared hinge, unit costs, negatives weighted ``alpha`` and positives by their
    importance weight, no pruning. ``C``: csr (K, P) child -> parent of the level. Returns
    (W float32 (K, h), b float32 (K,)).
    """
    n, h = E.shape
    if problem.candidates is None:
        M = sp.csr_matrix(np.ones((n, C.shape[1]), dtype=np.float32))
    else:
        # a document joins a parent's problem if it shortlists any child of that parent
        M = sp.csr_matrix(problem.candidates @ C)
        M.data[:] = 1.0
    X = sp.csr_matrix(E.astype(np.float32, copy=False))
    cfg = RankerConfig(Cp=1.0, Cn=problem.alpha, threshold=0.0, seed=seed)
    W = train_level(X, problem.Y, C, M, cfg, problem.positive_weight, "head bootstrap").toarray()
    return np.ascontiguousarray(W[:h].T, dtype=np.float32), W[h].astype(np.float32) * cfg.bias
