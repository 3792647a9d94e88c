"""Rankers left alone where their training problem did not change.

An XR ranker records a digest of what it was trained on (:func:`training_digest`: its training
documents' features and labels, the label features its tree and zero-shot rows come from, and
the settings its levels were trained with), saved with it as ``train_digest``. A warm start
whose own training problem has the same digest, over the same tree, keeps the champion's
rankers instead of training them again (:func:`same_problem`): the champion's predictions come
back, at no training cost. A digest differs with any change of a feature value, so a problem
computed on another CPU (its rounding) is trained again: the safe side.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import scipy.sparse as sp

from xmc_core.linear.model import LevelRankers, XRLinearModel
from xmc_core.linear.tree import LabelTree


def training_digest(matrices: list[sp.spmatrix], settings: dict[str, Any]) -> str:
    """sha256 of sparse ``matrices`` (shape, dtypes, structure and values, in order) and the
    JSON of ``settings``."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for matrix in matrices:
        m = sp.csr_matrix(matrix)
        layout = (m.shape, m.data.dtype.str, m.indices.dtype.str, m.indptr.dtype.str)
        h.update(repr(layout).encode())
        for array in (m.indptr, m.indices, m.data):
            h.update(np.ascontiguousarray(array).data)
    return h.hexdigest()


def same_problem(champion: XRLinearModel, digest: str, tree: LabelTree) -> bool:
    """Whether ``champion`` was trained on the problem of ``digest`` over ``tree``'s clusters
    (False when it recorded no digest: trained before xmc recorded it)."""
    if champion.train_digest_ is None or champion.train_digest_ != digest:
        return False
    if champion.tree_.depth != tree.depth:
        return False
    return all(_same_csr(a, b) for a, b in zip(champion.tree_.C, tree.C, strict=True))


def kept_level(base: XRLinearModel, level: int) -> LevelRankers:
    """The champion ``base``'s rankers of tree level ``level``, as a level stage makes them
    (the leaf level with the cost scale it was trained with)."""
    if not 0 <= level < len(base.chunks_):
        raise ValueError(f"level {level}: the champion's ranker has {len(base.chunks_)} levels")
    leaf = level == len(base.chunks_) - 1
    scale = base.leaf_cost_scale_ if leaf and base.leaf_cost_scale_ is not None else 1.0
    return LevelRankers(base.level_weights(level), level, scale)


def _same_csr(a: sp.spmatrix, b: sp.spmatrix) -> bool:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    return a.shape == b.shape and (a != b).nnz == 0
