"""Astec's inference arithmetic on numpy arrays (no torch): the encoder's forward pass, the
residual block, unit rows and the score fusion. Training exports its networks to these
(:mod:`xmc_core.families.astec.network`), so the served model needs only numpy, scipy and faiss."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit


@dataclass(frozen=True)
class Block:
    """A residual block ``z + gate * relu(z A^T + a)`` (dropout off): ``A`` float32 (D, D)
    (spectral normalisation already applied), ``a`` float32 (D,), ``gate`` a scalar."""

    A: np.ndarray
    a: np.ndarray
    gate: float

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """The block applied to rows ``z`` float32 (n, D)."""
        if self.gate == 0.0:
            return z
        hidden = np.maximum(z @ self.A.T + self.a, 0.0)
        return (z + np.float32(self.gate) * hidden).astype(np.float32, copy=False)

    @classmethod
    def identity(cls, dim: int) -> Block:
        """The block as initialised: ``A = I``, ``a = 0``, gate 0."""
        return cls(np.eye(dim, dtype=np.float32), np.zeros(dim, np.float32), 0.0)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """``{prefix}A``, ``{prefix}a``, ``{prefix}gate`` for an ``.npz``."""
        gate = np.array(self.gate, dtype=np.float64)
        return {f"{prefix}A": self.A, f"{prefix}a": self.a, f"{prefix}gate": gate}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Block:
        A, a = arrays[f"{prefix}A"], arrays[f"{prefix}a"]
        gate = arrays[f"{prefix}gate"]
        if A.ndim != 2 or A.shape[0] != A.shape[1] or a.shape != (A.shape[0],) or gate.shape:
            raise ValueError(f"block shapes {A.shape}, {a.shape}, {gate.shape} do not fit")
        return cls(A.astype(np.float32), a.astype(np.float32), float(gate))


def encode_rows(X: sp.csr_matrix, E: np.ndarray, block: Block) -> np.ndarray:
    """The encoding float32 (n, D) of TF-IDF rows ``X`` csr (n, d): ``block(relu(X E))``,
    ``E`` float32 (d, D)."""
    h = np.asarray(sp.csr_matrix(X, dtype=np.float32) @ E, dtype=np.float32)
    return block(np.maximum(h, 0.0, out=h))


def unit_rows(Z: np.ndarray) -> np.ndarray:
    """Rows of ``Z`` (n, D) scaled to unit L2 norm (zero rows stay zero), float32."""
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return (Z / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def fuse(logits: np.ndarray, similarity: np.ndarray, beta: float) -> np.ndarray:
    """``beta * sigmoid(logits) + (1 - beta) * sigmoid(similarity)``, float32."""
    return (beta * expit(logits) + (1.0 - beta) * expit(similarity)).astype(np.float32)


GATHER_ROWS = 64
"""Rows whose shortlisted label vectors are gathered at once (a small, reused buffer: a
gather of every row's vectors at once costs more in fresh memory than in arithmetic)."""


def shortlist_logits(H: np.ndarray, labels: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Classifier logits float32 (n, k) of each row of ``H`` (n, D) for its shortlisted
    ``labels`` int64 (n, k) (entries < 0: no label, logit 0): ``W[label] . h + b[label]``,
    ``W`` float32 (L, D), ``b`` float32 (L,)."""
    safe = np.where(labels >= 0, labels, 0)
    logits = np.empty(labels.shape, np.float32)
    for start in range(0, len(H), GATHER_ROWS):
        part = slice(start, start + GATHER_ROWS)
        logits[part] = np.matmul(W[safe[part]], H[part, :, None])[..., 0]
    logits += b[safe]
    return np.where(labels >= 0, logits, np.float32(0.0))


def dense_rows(X: sp.csr_matrix | np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of encodings given as csr (n, D) or dense, as float32 dense."""
    part = X[start:stop]
    return np.asarray(part.toarray() if sp.issparse(part) else part, dtype=np.float32)
