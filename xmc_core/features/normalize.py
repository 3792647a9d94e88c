"""Row normalization of sparse matrices."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def l2_normalize_rows(m: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """Rows scaled to unit L2 norm (all-zero rows stay zero); returns a new float64 csr matrix."""
    m = sp.csr_matrix(m, dtype=np.float64, copy=True)
    lengths = np.diff(m.indptr)
    rows = np.repeat(np.arange(m.shape[0]), lengths)
    norms = np.sqrt(np.bincount(rows, weights=m.data**2, minlength=m.shape[0]))
    norms[norms == 0] = 1.0
    m.data /= norms[rows]
    return m
