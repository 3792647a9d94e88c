"""Rankers for the labels no training document carries yet, made from their texts.

A zero-shot label j has a text (its row ``t_j`` in the rankers' feature space, L2-normalized)
but no document, so the leaf ranker trained for it only learned to say no. Its column of the
leaf level is replaced by ``a * t_j``, with bias weight ``c / bias``: a document x scores
``a * (x . t_j) + c``, the cosine of the document and the label's text, scaled. A feature space
made of blocks (XR-Transformer's ``[TF-IDF, embedding]``) gets one scale per block: x scores
``sum_b a_b (x_b . t_j,b) + c``, so a block whose similarities are high for any pair (the
embeddings') does not drown the one that tells the labels apart (the TF-IDF's).
``(a, c)`` minimize the rankers' own objective, ``0.5 (|a|^2 + c^2) + sum of the loss``
(squared hinge or logistic, costs 1), over the teacher-forced leaf pairs of the rarest labels
that have both a text and documents (at most :data:`TAIL_QUANTILE` of their document counts),
on a seeded sample of the training documents: how text similarity tells relevance where both
are known, for labels as rare as possible (fit on every label, frequent labels' strong texts
make the scale too bold: zero-shot labels then take the top places of labels with documents).
The beam search then treats the label as any other (its leaf cluster's score times its own).
Once documents carry the label, the next training learns it like the rest.
"""

from __future__ import annotations

import logging
from itertools import pairwise

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.beam import ChunkedLevel, child_scores, pair_labels
from xmc_core.linear.levels import level_targets
from xmc_core.linear.tree import LabelTree

log = logging.getLogger(__name__)

SAMPLE_DOCS = 20_000
"""Training documents whose teacher-forced leaf pairs fit (a, c) (a seeded sample)."""
NEWTON_STEPS = 100
TAIL_QUANTILE = 0.25
"""(a, c) are fit on the labels with text whose document count is at most this quantile of
theirs: how text tells relevance for rare labels, which zero-shot labels resemble most."""


def fit_text_scale(s: np.ndarray, y: np.ndarray, loss: str, bias: bool) -> tuple[np.ndarray, float]:
    """``(a, c)`` minimizing ``0.5 (|a|^2 + c^2) + sum_i loss(y_i (s_i . a + c))`` by
    Newton's method (``bias`` False: c stays 0). ``s``: (n, B) cosine scores, one column per
    block of the feature space; ``y``: labels +-1. ``a``: (B,) float64."""
    s = np.asarray(s, dtype=np.float64).reshape(len(y), -1)
    feats = np.hstack([s, np.full((len(y), 1), 1.0 if bias else 0.0)])
    theta = np.zeros(feats.shape[1])
    eye = np.eye(feats.shape[1])
    for _ in range(NEWTON_STEPS):
        m = y * (feats @ theta)
        if loss == "logistic":
            p = 0.5 * (1.0 - np.tanh(0.5 * m))  # sigmoid(-m), no overflow
            grad = theta - feats.T @ (y * p)
            hess = eye + (feats * (p * (1.0 - p))[:, None]).T @ feats
        else:
            active = m < 1.0
            fa = feats[active]
            grad = theta - 2.0 * fa.T @ (y[active] * (1.0 - m[active]))
            hess = eye + 2.0 * fa.T @ fa
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-9:
            break
    return theta[:-1], float(theta[-1])


def text_rankers(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, W: sp.csc_matrix,
    text: sp.csr_matrix, zero_shot: np.ndarray, cfg: RankerConfig, blocks: tuple[int, ...] = (),
) -> sp.csc_matrix:  # fmt: skip
    """The leaf level ``W`` (csc (n_features + 1, n_labels), last row the bias weights) with the
    columns of the ``zero_shot`` labels made from their ``text`` rows (see the module doc).
    ``X``: csr (n_docs, n_features) training documents, ``Y``: csr (n_docs, n_labels);
    ``blocks``: the columns where the feature space's second, third... block begins (none:
    one block), each scaled on its own."""
    if not zero_shot.size:
        return W
    parts = block_texts(text, blocks)
    s, y = _known_pairs(X, Y, tree, parts, cfg.seed)
    if not y.size:
        log.info("zero-shot labels: no label has both a text and documents; left untrained")
        return W
    a, c = fit_text_scale(s, y, cfg.loss, cfg.bias > 0)
    scales = " + ".join(f"{w:.3f} * cos{b + 1}" for b, w in enumerate(a))
    log.info("zero-shot labels: %d scored as %s %+.3f (cos: of doc and text, per block; fit "
             "on %d pairs)", zero_shot.size, scales, c, y.size)  # fmt: skip
    is_zero = np.zeros(W.shape[1], dtype=np.float32)
    is_zero[zero_shot] = 1.0
    kept = sp.csc_matrix(W @ sp.diags(1.0 - is_zero), dtype=np.float32)
    scaled = sum(float(w) * part for w, part in zip(a, parts, strict=True))
    made = sp.vstack([
        sp.csr_matrix(scaled.T, dtype=np.float32) @ sp.diags(is_zero),
        sp.csr_matrix((is_zero * (c / cfg.bias if cfg.bias > 0 else 0.0))[None, :]),
    ])  # fmt: skip
    out = sp.csc_matrix(kept + made, dtype=np.float32)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def block_texts(text: sp.csr_matrix, blocks: tuple[int, ...]) -> list[sp.csr_matrix]:
    """``text`` split by columns at ``blocks`` into matrices of its shape, each zero outside
    its block (their sum is ``text``)."""
    text = sp.csr_matrix(text, dtype=np.float32)
    edges = [0, *blocks, text.shape[1]]
    if any(lo >= hi for lo, hi in pairwise(edges)):
        raise ValueError(f"feature blocks {blocks} do not split {text.shape[1]} columns")
    col = np.arange(text.shape[1])
    return [
        sp.csr_matrix(text @ sp.diags(((col >= lo) & (col < hi)).astype(np.float32)))
        for lo, hi in pairwise(edges)
    ]


def _known_pairs(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, parts: list[sp.csr_matrix], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(cosines (n_pairs, n_blocks), labels +-1) of the teacher-forced leaf pairs (a label
    under one of the document's relevant leaf clusters) of the labels with a text and
    documents, on at most :data:`SAMPLE_DOCS` seeded training documents; ``parts``: the
    labels' text rows, one matrix per block (:func:`block_texts`)."""
    n_docs = X.shape[0]
    rows = np.arange(n_docs)
    if n_docs > SAMPLE_DOCS:
        rows = np.sort(np.random.default_rng([seed, 0x2E50]).choice(n_docs, SAMPLE_DOCS, False))
    X, Y = sp.csr_matrix(X[rows], dtype=np.float32), sp.csr_matrix(Y[rows])
    docs = np.diff(sp.csc_matrix(Y).indptr)
    known = (docs > 0) & (np.diff(sum(parts).indptr) > 0)
    if known.any():  # the rarest known labels: a label no document carries yet is rarer still
        known &= docs <= np.quantile(docs[known], TAIL_QUANTILE)
    targets = level_targets(Y, tree.C)
    parents = targets[-2] if tree.depth > 1 else sp.csr_matrix(np.ones((len(rows), 1)))
    scores = []
    for part in parts:  # every block scores the same pairs, listed by (document, label)
        W = sp.vstack([part.T, sp.csr_matrix((1, part.shape[0]))]).tocsc().astype(np.float32)
        docs_of, ids, s = child_scores(X, ChunkedLevel.build(W, tree.C[-1]), parents, 0.0)
        order = np.lexsort((ids, docs_of))  # a block's own order is by its scores
        docs_of, ids = docs_of[order], ids[order]
        scores.append(s[order])
    keep = known[ids]
    return np.stack(scores, axis=1)[keep], pair_labels(targets[-1], docs_of, ids)[keep]
