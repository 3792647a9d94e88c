"""The training problem of each tree level: targets, matching matrix (negatives), weights.

Tree convention (PECOS): ``tree.C[t]`` is csr (K_{t+1}, K_t) child -> parent; ranker level ``t``
scores the K_{t+1} children of the K_t nodes above (``C[0]`` has one parent, the root; the last
level's children are the labels).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.beam import ChunkedLevel, beam_search


def binarize(m: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """Nonzeros set to 1 (float32 csr)."""
    out = sp.csr_matrix(m, dtype=np.float32, copy=True)
    out.eliminate_zeros()
    out.data[:] = 1.0
    return out


def level_targets(Y: sp.csr_matrix, C: list[sp.csr_matrix]) -> list[sp.csr_matrix]:
    """Relevant nodes of every level: ``Y_last = Y``, ``Y_{t-1} = binarize(Y_t C[t])``.

    ``Y``: csr (n_docs, n_labels). Returns one csr (n_docs, K_{t+1}) per ranker level.
    """
    targets = [binarize(Y)]
    for t in range(len(C) - 1, 0, -1):
        targets.append(binarize(targets[-1] @ C[t]))
    return targets[::-1]


def relevance_counts(Y: sp.csr_matrix, C: list[sp.csr_matrix], t: int) -> sp.csr_matrix:
    """``R(t) = R(t+1) C(t+1)`` with ``R = Y`` at the labels: relevant labels under each node."""
    r = sp.csr_matrix(Y, dtype=np.float32)
    for level in range(len(C) - 1, t, -1):
        r = sp.csr_matrix(r @ C[level])
    return r


def importance_weights(Y: sp.csr_matrix, C: list[sp.csr_matrix], t: int) -> sp.csr_matrix:
    """Weights of the positive (doc, node) pairs of level ``t`` (XR-Transformer eq. 6).

    A node covering more of the document's relevant labels weighs more; each document's
    positive weights average 1, so the overall cost scale (Cp) keeps its meaning.
    """
    r = relevance_counts(Y, C, t)
    counts = np.diff(r.indptr)
    sums = np.asarray(r.sum(axis=1)).ravel()
    scale = np.divide(counts, sums, out=np.zeros_like(sums), where=sums > 0)
    return sp.csr_matrix(sp.diags(scale) @ r, dtype=np.float32)


def matcher_beam(
    X: sp.csr_matrix,
    weights: Sequence[sp.csc_matrix | ChunkedLevel],
    C: list[sp.csr_matrix],
    beam_size: int,
    post_processor: str,
    bias: float,
) -> sp.csr_matrix:
    """Top ``beam_size`` nodes of the last trained level for every document: csr (n_docs,
    K_{len(weights)}) scores, by :func:`beam_search` through ``weights`` (one per level)."""
    levels = (  # one at a time
        W if isinstance(W, ChunkedLevel) else ChunkedLevel.build(W, C[t])
        for t, W in enumerate(weights)
    )
    return beam_search(X, levels, [beam_size] * len(weights), post_processor, bias)


def matching_matrix(
    targets: list[sp.csr_matrix],
    t: int,
    cfg: RankerConfig,
    matched: sp.csr_matrix | None = None,
) -> sp.csr_matrix:
    """Which parents' problems each document joins at level ``t``: csr (n_docs, K_t) binary.

    Level 0 has one parent (everyone joins). Below: ``tfn`` the true parents (teacher forcing),
    ``man`` the matcher's top clusters (``matched``, from :func:`matcher_beam`), or both.
    """
    n_docs = targets[0].shape[0]
    if t == 0:
        return sp.csr_matrix(np.ones((n_docs, 1), dtype=np.float32))
    parts = []
    if cfg.negatives in ("tfn", "tfn+man"):
        parts.append(targets[t - 1])
    if cfg.negatives in ("man", "tfn+man"):
        if matched is None:
            raise ValueError(f"negatives={cfg.negatives!r} needs the matcher's predictions")
        parts.append(matched)
    return binarize(sum(parts[1:], parts[0]))


def level_problems(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: list[sp.csr_matrix],
    t: int,
    trained: Sequence[sp.csc_matrix | ChunkedLevel],
    cfg: RankerConfig,
    post_processor: str,
    extra_parents: sp.csr_matrix | None = None,
) -> tuple[list[sp.csr_matrix], sp.csr_matrix]:
    """What level ``t``'s rankers train on: every level's targets (:func:`level_targets`) and
    the level's matching matrix (:func:`matching_matrix`; the matcher's beam through the
    ``trained`` levels above when the negatives need it), joined by ``extra_parents`` csr
    (n_docs, K_t) binary, more parents per document (e.g. an external matcher's clusters)."""
    targets = level_targets(Y, C)
    matched = None
    if t > 0 and cfg.negatives != "tfn":
        matched = matcher_beam(X, trained, C, cfg.matcher_topk, post_processor, cfg.bias)
    M = matching_matrix(targets, t, cfg, matched)
    if extra_parents is not None and t > 0:
        M = binarize(M + extra_parents)
    return targets, M
