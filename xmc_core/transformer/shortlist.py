"""The training problem of one matcher level (XR-Transformer section 2, eqs. 6-9).

Tree convention as in :mod:`xmc_core.linear.levels`: ``tree.C[t]`` is csr (K_{t+1}, K_t) child
-> parent and ``Y(t)`` (targets of tree level ``t``) is csr (n_docs, K_{t+1}).

At level t the shortlist is ``M(t) = binarize(P(t-1) C(t)ᵀ) + binarize(Y(t-1) C(t)ᵀ)``: the
children of the previous level's predicted clusters (matcher-aware negatives) and of the true
clusters (teacher forcing). The first trained level shortlists every cluster. Positive pairs
weigh their relative relevance ``R̂(t)`` (``R(t) = R(t+1) C(t+1)``, ``R(T) = Y``, scaled so each
document's positive weights average 1), or 1; shortlisted negatives weigh ``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import MatcherConfig
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.linear.levels import binarize, importance_weights, level_targets
from xmc_core.linear.tree import LabelTree


def matcher_levels(tree: LabelTree, cfg: MatcherConfig) -> list[int]:
    """Tree levels (indices into ``tree.C``) the matcher trains, coarse to fine: those with
    ``min_clusters <= K <= max_clusters`` (the label level too, when there are few enough
    labels); if none, the finest level with ``K <= max_clusters``, else the coarsest level."""
    return levels_of_sizes(tree.level_sizes(), cfg)


def levels_of_sizes(sizes: list[int], cfg: MatcherConfig) -> list[int]:
    """:func:`matcher_levels` of a tree whose ``level_sizes()`` are ``sizes``."""
    chosen = [t for t, k in enumerate(sizes) if cfg.min_clusters <= k <= cfg.max_clusters]
    if chosen:
        return chosen
    below = [t for t, k in enumerate(sizes) if k <= cfg.max_clusters]
    return [below[-1]] if below else [0]


def level_choices(tree: LabelTree, cfg: MatcherConfig) -> list[str]:
    """Why the matcher skips each tree level it does not train, and why it trains a level
    outside ``[min_clusters, max_clusters]`` (when none is inside): one line each, coarse to
    fine, e.g. ``matcher: level 0 (16 clusters) skipped: fewer than matcher.min_clusters=32``."""
    chosen = matcher_levels(tree, cfg)
    lines = []
    for t, k in enumerate(tree.level_sizes()):
        if cfg.min_clusters <= k <= cfg.max_clusters and t in chosen:
            continue
        if t in chosen:
            why = f"trained although outside [{cfg.min_clusters:,}, {cfg.max_clusters:,}]: "
            why += "no tree level has a cluster count in that range"
        elif k < cfg.min_clusters:
            why = f"skipped: fewer than matcher.min_clusters={cfg.min_clusters}"
        else:  # k > max_clusters: every level inside the range is chosen
            why = f"skipped: more than matcher.max_clusters={cfg.max_clusters}"
        lines.append(f"matcher: level {t} ({k:,} clusters) {why}")
    return lines


def children_of(parents: sp.csr_matrix, C: sp.csr_matrix) -> sp.csr_matrix:
    """``binarize(S Cᵀ)``: the children (K_{t+1}) of the selected parents ``S`` (n, K_t)."""
    return binarize(sp.csr_matrix(parents) @ sp.csr_matrix(C).T)


def shortlist(
    targets: list[sp.csr_matrix],
    C: list[sp.csr_matrix],
    t: int,
    predicted: sp.csr_matrix | None,
    cfg: MatcherConfig,
) -> sp.csr_matrix | None:
    """``M(t)``: csr (n_docs, K_{t+1}) binary, or None for every cluster.

    ``targets``: :func:`level_targets`; ``predicted``: ``P(t-1)``, csr (n_docs, K_t), the
    matcher's top clusters of the level above, or None when no matcher level was trained above
    (then every cluster is shortlisted).
    """
    if predicted is None or t == 0:
        return None
    parts = []
    if cfg.matcher_negatives:
        chosen = sp.csr_matrix(predicted, dtype=np.float32, copy=True)
        chosen.data[:] = 1.0  # a predicted cluster may score exactly 0
        parts.append(children_of(chosen, C[t]))
    if cfg.teacher_forcing:
        parts.append(children_of(targets[t - 1], C[t]))
    if not parts:
        raise ValueError("matcher: enable teacher_forcing or matcher_negatives (or both)")
    return binarize(sum(parts[1:], parts[0]))


@dataclass(frozen=True)
class LevelProblem:
    """Targets, shortlist and pair weights of one matcher level.

    ``Y``: csr (n, K) binary targets; ``positive_weight``: csr (n, K), the weight of every
    positive pair; ``candidates``: csr (n, K) binary shortlist, None for all clusters;
    ``alpha``: weight of the shortlisted negatives. Pairs outside the shortlist are not
    trained on (so with teacher forcing off, unshortlisted positives are skipped).
    """

    Y: sp.csr_matrix
    positive_weight: sp.csr_matrix
    candidates: sp.csr_matrix | None
    alpha: float

    @property
    def n_clusters(self) -> int:
        return int(self.Y.shape[1])

    def pairs(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """The training pairs of documents ``rows``: ``(batch_row, cluster, y, weight)``.

        ``batch_row`` int64 indexes into ``rows``; ``y`` float32 in {0, 1}; ``weight`` float32.
        """
        K = self.n_clusters
        Y = self.Y[rows]
        if self.candidates is None:
            r = np.repeat(np.arange(len(rows), dtype=np.int64), K)
            c = np.tile(np.arange(K, dtype=np.int64), len(rows))
        else:
            cand = self.candidates[rows].tocoo()
            r, c = cand.row.astype(np.int64), cand.col.astype(np.int64)
        y = np.asarray(Y[r, c]).ravel().astype(np.float32)
        w = np.asarray(self.positive_weight[rows][r, c]).ravel().astype(np.float32)
        weight = np.where(y > 0, w, np.float32(self.alpha)).astype(np.float32)
        return r, c, y, weight


def level_problem(
    Y: sp.csr_matrix,
    tree: LabelTree,
    t: int,
    predicted: sp.csr_matrix | None,
    cfg: MatcherConfig,
) -> LevelProblem:
    """The :class:`LevelProblem` of tree level ``t`` for label matrix ``Y`` (n, n_labels)."""
    targets = level_targets(Y, tree.C)
    weight = importance_weights(Y, tree.C, t) if cfg.importance_weights else targets[t]
    return LevelProblem(
        targets[t], sp.csr_matrix(weight), shortlist(targets, tree.C, t, predicted, cfg),
        cfg.negative_weight,
    )  # fmt: skip


def top_clusters(
    E: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    k: int,
    candidates: sp.csr_matrix | None = None,
    chunk: int = 4096,
) -> sp.csr_matrix:
    """The ``k`` best clusters per document: csr (n, K) holding their scores.

    ``E``: float32 (n, h) embeddings; ``W``: (K, h) head; ``b``: (K,) bias; ``candidates``: csr
    (n, K) binary restricting each row (None: every cluster).
    """
    n, K = E.shape[0], W.shape[0]
    rows, cols, vals = [], [], []
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        if candidates is None:
            scores = E[lo:hi] @ W.T + b
        else:
            sub = candidates[lo:hi].tocoo()
            scores = np.full((hi - lo, K), -np.inf, dtype=np.float32)
            dots = np.einsum("ij,ij->i", E[lo + sub.row], W[sub.col]) + b[sub.col]
            scores[sub.row, sub.col] = dots
        kk = min(k, K)
        top, top_scores = top_k_dense(scores, kk)
        keep = np.isfinite(top_scores)
        r = np.repeat(np.arange(lo, hi), kk).reshape(hi - lo, kk)
        rows.append(r[keep])
        cols.append(top[keep])
        vals.append(top_scores[keep])
    out = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n, K),
        dtype=np.float32,
    )
    out.sort_indices()
    return out
