"""Tiny deterministic matrices whose right answer is known by hand: document ``i`` has the one
label ``i % n_labels`` and the one nonzero feature ``i % n_labels`` (weight 1), so every
document's best label is its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp


def separable(n_docs: int = 24, n_labels: int = 4) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``X`` csr (n_docs, n_labels + 2) and ``Y`` csr (n_docs, n_labels), float32; the two last
    feature columns are a constant 0.5 and zero (a column no document uses)."""
    rows = np.arange(n_docs)
    label = rows % n_labels
    Y = sp.csr_matrix((np.ones(n_docs), (rows, label)), shape=(n_docs, n_labels), dtype=np.float32)
    X = sp.hstack([Y, sp.csr_matrix(np.full((n_docs, 1), 0.5)), sp.csr_matrix((n_docs, 1))])
    return sp.csr_matrix(X, dtype=np.float32), Y


def write_npz(folder: Path, **matrices: sp.spmatrix) -> dict[str, Path]:
    """Each matrix as ``folder/NAME.npz`` (``scipy.sparse.save_npz``); returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, m in matrices.items():
        paths[name] = folder / f"{name}.npz"
        sp.save_npz(paths[name], m)
    return paths
