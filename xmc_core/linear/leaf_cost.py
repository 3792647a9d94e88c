"""The leaf level's cost (C), chosen on held-out documents of the training set.

How strongly the label rankers are regularized is the largest accuracy lever we found, and its
best value differs by dataset (noisy, many-label tags want a smaller C, clean topic labels a
larger one). One default that adapts: the leaf level's Cp and Cn are multiplied by a scale
chosen from ``cfg.leaf_cost_scales`` (which holds 1) on held-out documents, never on a test
split:

1. ``HELD_OUT`` of the documents are held out (drawn from ``cfg.seed``); a random sample of the
   level's parents, about ``cfg.leaf_cost_sample`` of the level's work (entries of a parent's
   block times its children), is trained on the rest at each scale tried (at most
   ``SEARCH_MAX_ITER`` epochs);
2. a held-out document is scored by its top-scoring child over the sampled parents it takes
   part in (its true parents with teacher forcing): a hit when that child is one of its labels
   (P@1 within the parents; the post-processor is monotone, so raw scores rank the same);
3. a line search from 1: the two neighbouring scales first, then on in the better direction
   while the next scale is better. A move needs a paired sign test with z >= ``MIN_Z`` over the
   documents whose hit changed: without clear evidence the scale stays 1.

On the shared datasets' validation carves (``benchmarks/leaf_cost.py``) this proxy ranks the
scales as the validation P@1 of the whole model does on reuters, bibtex and delicious.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.solver import train_level

log = logging.getLogger(__name__)

HELD_OUT = 0.2
"""Share of the documents held out to score the scales."""
MIN_Z = 2.0
"""Paired sign-test z a scale needs to replace the current one."""
SEARCH_MAX_ITER = 5
"""Epochs per problem while searching (the final training keeps ``cfg.max_iter``): on the
shared datasets the scales rank the same as with 20, at half the search's time."""


@dataclass(frozen=True)
class CostChoice:
    """The chosen scale of the leaf level's costs, and what the search saw."""

    scale: float = 1.0
    p_at_1: dict[float, float] = field(default_factory=dict)  # scale -> held-out P@1 (%)
    n_docs: int = 0  # held-out documents scored
    seconds: float = 0.0


def choose_leaf_cost(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None = None,
) -> CostChoice:
    """The scale of ``cfg.Cp``/``cfg.Cn`` for the leaf level (arguments as
    :func:`~xmc_core.linear.solver.train_level`: X csr (n_docs, d), Y csr (n_docs, K) labels,
    C csr (K, P), M csr (n_docs, P)). Returns scale 1 when nothing else is allowed or when
    there is too little to decide on."""
    scales = sorted(set(cfg.leaf_cost_scales))
    if scales == [1.0] or M.shape[1] == 0:
        return CostChoice()
    start = time.perf_counter()
    rng = np.random.default_rng([cfg.seed & (2**63 - 1), 0x1EAF])
    M = sp.csr_matrix(M)
    held = rng.random(X.shape[0]) < HELD_OUT
    sampled = _sample_parents(X, C, M, cfg.leaf_cost_sample, rng)
    keep = sp.diags(sampled.astype(np.float64))
    fit_M = sp.diags((~held).astype(np.float64)) @ M @ keep
    eval_M = (sp.diags(held.astype(np.float64)) @ M @ keep).tocsc()
    eval_M.eliminate_zeros()
    fit_M.eliminate_zeros()
    if eval_M.nnz == 0:
        return CostChoice()

    def hits(scale: float) -> np.ndarray:
        costs = {"Cp": cfg.Cp * scale, "Cn": cfg.Cn * scale}
        scaled = cfg.model_copy(update={**costs, "max_iter": min(cfg.max_iter, SEARCH_MAX_ITER)})
        W = train_level(X, Y, C, fit_M.tocsr(), scaled, R, what="leaf cost search")
        return _top_child_hits(X, Y, C, eval_M, W, cfg.bias)

    tried = {1.0: hits(1.0)}
    best = _search(scales, tried, hits)
    n_docs = int(tried[1.0].size)
    choice = CostChoice(
        scale=best,
        p_at_1={s: 100.0 * float(h.mean()) for s, h in sorted(tried.items())},
        n_docs=n_docs,
        seconds=time.perf_counter() - start,
    )
    log.info(
        "leaf level: cost x%g chosen on %s held-out documents (P@1 within their parents: %s), "
        "%.1f s",
        choice.scale, f"{n_docs:,}",
        ", ".join(f"x{s:g} {p:.2f}%" for s, p in choice.p_at_1.items()), choice.seconds,
    )  # fmt: skip
    return choice


def _search(scales: list[float], tried: dict[float, np.ndarray], hits) -> float:
    """Line search over ``scales`` from 1 (``tried`` holds scale 1's hits and gains every
    scale evaluated); returns the chosen scale."""
    at = scales.index(1.0)
    neighbours = [i for i in (at - 1, at + 1) if 0 <= i < len(scales)]
    for i in neighbours:
        tried[scales[i]] = hits(scales[i])
    best = max(neighbours, key=lambda i: _z(tried[scales[i]], tried[1.0]), default=at)
    if best == at or _z(tried[scales[best]], tried[1.0]) < MIN_Z:
        return 1.0
    step = best - at
    while 0 <= best + step < len(scales):
        nxt = scales[best + step]
        tried[nxt] = hits(nxt)
        if _z(tried[nxt], tried[scales[best]]) < MIN_Z:
            break
        best += step
    return scales[best]


def _z(new: np.ndarray, old: np.ndarray) -> float:
    """Paired sign-test z of ``new`` over ``old`` (boolean hits of the same documents)."""
    gained = int(np.count_nonzero(new & ~old))
    lost = int(np.count_nonzero(old & ~new))
    return 0.0 if gained + lost == 0 else (gained - lost) / math.sqrt(gained + lost)


def _sample_parents(
    X: sp.csr_matrix, C: sp.csr_matrix, M: sp.csr_matrix, share: float, rng: np.random.Generator
) -> np.ndarray:
    """Boolean (P,): random parents whose work adds up to about ``share`` of the level's."""
    entries = M.T @ np.diff(X.indptr).astype(np.float64)  # X entries over each parent's docs
    work = entries * np.bincount(sp.csr_matrix(C).indices, minlength=M.shape[1])
    order = rng.permutation(M.shape[1])
    taken = np.cumsum(work[order]) <= share * work.sum()
    taken[0] = True
    sampled = np.zeros(M.shape[1], dtype=bool)
    sampled[order[taken]] = True
    return sampled


def _top_child_hits(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    eval_M: sp.csc_matrix,
    W: sp.csc_matrix,
    bias: float,
) -> np.ndarray:
    """Boolean hits of the held-out documents (rows of ``eval_M`` with a parent, in order):
    is the top-scoring child over their parents one of their labels?"""
    docs = np.flatnonzero(np.diff(sp.csr_matrix(eval_M).indptr))
    where = np.full(X.shape[0], -1, dtype=np.int64)
    where[docs] = np.arange(docs.size)
    best = np.full(docs.size, -np.inf)
    hit = np.zeros(docs.size, dtype=bool)
    children = sp.csc_matrix(C)  # column p: the children of parent p
    Yr, Wd = sp.csr_matrix(Y), sp.csc_matrix(W)
    for p in np.flatnonzero(np.diff(eval_M.indptr)):
        rows = eval_M.indices[eval_M.indptr[p] : eval_M.indptr[p + 1]]
        kids = children.indices[children.indptr[p] : children.indptr[p + 1]]
        Wp = Wd[:, kids]
        S = (X[rows] @ Wp[:-1]).toarray() + bias * Wp[-1].toarray()
        top = np.argmax(S, axis=1)
        score = S[np.arange(rows.size), top]
        label_hit = np.asarray(Yr[rows, kids[top]]).ravel() > 0
        at = where[rows]
        better = score > best[at]
        best[at[better]] = score[better]
        hit[at[better]] = label_hit[better]
    return hit
