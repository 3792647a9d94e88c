"""Rankers for the labels no training document carries yet, made from their texts.

A zero-shot label j has a text (its TF-IDF row ``t_j``, L2-normalized) but no document, so the
leaf ranker trained for it only learned to say no. Its column of the leaf level is replaced by
``a * t_j``, with bias weight ``c / bias``: a document x scores ``a * (x . t_j) + c``, the
cosine of the document and the label's text, scaled. ``(a, c)`` minimize the rankers' own
objective, ``0.5 (a^2 + c^2) + sum of the loss`` (squared hinge or logistic, costs 1), over the
teacher-forced leaf pairs of the rarest labels that have both a text and documents (at most
:data:`TAIL_QUANTILE` of their document counts), on a seeded sample of the training documents:
how text similarity tells relevance where both are known, for labels as rare as possible (fit
on every label, frequent labels' strong texts make the scale too bold: zero-shot labels then
take the top places of labels with documents).
The beam search then treats the label as any other (its leaf cluster's score times its own).
Once documents carry the label, the next training learns it like the rest.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.beam import ChunkedLevel, labelled_child_scores
from xmc_core.linear.levels import level_targets
from xmc_core.linear.tree import LabelTree

log = logging.getLogger(__name__)

SAMPLE_DOCS = 20_000
"""Training documents whose teacher-forced leaf pairs fit (a, c) (a seeded sample)."""
NEWTON_STEPS = 100
TAIL_QUANTILE = 0.25
"""(a, c) are fit on the labels with text whose document count is at most this quantile of
theirs: how text tells relevance for rare labels, which zero-shot labels resemble most."""


def fit_text_scale(s: np.ndarray, y: np.ndarray, loss: str, bias: bool) -> tuple[float, float]:
    """``(a, c)`` minimizing ``0.5 (a^2 + c^2) + sum_i loss(y_i (a s_i + c))`` by Newton's
    method (``bias`` False: c stays 0). ``s``: cosine scores, ``y``: labels +-1."""
    feats = np.stack([s, np.ones_like(s) if bias else np.zeros_like(s)], axis=1)
    theta = np.zeros(2)
    for _ in range(NEWTON_STEPS):
        m = y * (feats @ theta)
        if loss == "logistic":
            p = 0.5 * (1.0 - np.tanh(0.5 * m))  # sigmoid(-m), no overflow
            grad = theta - feats.T @ (y * p)
            hess = np.eye(2) + (feats * (p * (1.0 - p))[:, None]).T @ feats
        else:
            active = m < 1.0
            fa = feats[active]
            grad = theta - 2.0 * fa.T @ (y[active] * (1.0 - m[active]))
            hess = np.eye(2) + 2.0 * fa.T @ fa
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(theta[0]), float(theta[1])


def text_rankers(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, W: sp.csc_matrix,
    text: sp.csr_matrix, zero_shot: np.ndarray, cfg: RankerConfig,
) -> sp.csc_matrix:  # fmt: skip
    """The leaf level ``W`` (csc (n_features + 1, n_labels), last row the bias weights) with the
    columns of the ``zero_shot`` labels made from their ``text`` rows (see the module doc).
    ``X``: csr (n_docs, n_features) training documents, ``Y``: csr (n_docs, n_labels)."""
    if not zero_shot.size:
        return W
    s, y = _known_pairs(X, Y, tree, text, cfg.seed)
    if not s.size:
        log.info("zero-shot labels: no label has both a text and documents; left untrained")
        return W
    a, c = fit_text_scale(s, y, cfg.loss, cfg.bias > 0)
    log.info("zero-shot labels: %d scored as %.3f * cos(doc, text) %+.3f (fit on %d pairs)",
             zero_shot.size, a, c, s.size)  # fmt: skip
    is_zero = np.zeros(W.shape[1], dtype=np.float32)
    is_zero[zero_shot] = 1.0
    kept = sp.csc_matrix(W @ sp.diags(1.0 - is_zero), dtype=np.float32)
    made = sp.vstack([
        (a * text.T.astype(np.float32)) @ sp.diags(is_zero),
        sp.csr_matrix((is_zero * (c / cfg.bias if cfg.bias > 0 else 0.0))[None, :]),
    ])  # fmt: skip
    out = sp.csc_matrix(kept + made, dtype=np.float32)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def _known_pairs(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, text: sp.csr_matrix, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(cosines, labels +-1) of the teacher-forced leaf pairs (a label under one of the
    document's relevant leaf clusters) of the labels with a text and documents, on at most
    :data:`SAMPLE_DOCS` seeded training documents."""
    n_docs = X.shape[0]
    rows = np.arange(n_docs)
    if n_docs > SAMPLE_DOCS:
        rows = np.sort(np.random.default_rng([seed, 0x2E50]).choice(n_docs, SAMPLE_DOCS, False))
    X, Y = sp.csr_matrix(X[rows], dtype=np.float32), sp.csr_matrix(Y[rows])
    docs = np.diff(sp.csc_matrix(Y).indptr)
    known = (docs > 0) & (np.diff(text.indptr) > 0)
    if known.any():  # the rarest known labels: a label no document carries yet is rarer still
        known &= docs <= np.quantile(docs[known], TAIL_QUANTILE)
    targets = level_targets(Y, tree.C)
    parents = targets[-2] if tree.depth > 1 else sp.csr_matrix(np.ones((len(rows), 1)))
    W = sp.vstack([text.T, sp.csr_matrix((1, text.shape[0]))]).tocsc().astype(np.float32)
    level = ChunkedLevel.build(W, tree.C[-1])
    ids, s, y = labelled_child_scores(X, level, parents, targets[-1], 0.0)
    keep = known[ids]
    return s[keep], y[keep]
