"""The leaf level's cost (C), chosen on held-out documents of the training set.

How strongly the label rankers are regularized is the largest accuracy lever we found, and its
best value differs by dataset (noisy, many-tag labels want a smaller C, clean topic labels a
larger one). One default that adapts: the leaf level's Cp and Cn are multiplied by a scale
chosen from ``cfg.leaf_cost_scales`` (which holds 1) on held-out documents, never on a test
split:

1. ``HELD_OUT`` of the documents are held out (drawn from ``cfg.seed``); a random sample of the
   level's parents, about ``cfg.leaf_cost_sample`` of the level's work (entries of a parent's
   block times its children) and at least ``MIN_PAIRS`` held-out (document, parent) pairs, is
   trained on the rest at each scale tried (at most ``SEARCH_MAX_ITER`` epochs);
2. each held-out document is scored on the children of the sampled parents it takes part in
   (its true parents with teacher forcing), ranked by their scores (the post-processor is
   monotone, so raw scores rank the same): P@1 + P@3 within its parents;
3. a line search from 1 (a warm start's: from its champion's scale): the next larger scale
   first, the next smaller one only when the larger is not clearly better, then on in the
   direction of the clearly better one while the next scale is better. A move needs a paired t
   statistic >= ``MIN_Z`` over the documents: without clear evidence the scale stays where the
   search started.

On the shared datasets' validation carves (``benchmarks/leaf_cost.py``) this proxy ranks the
scales as the validation P@1 of the whole model does.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.solver import train_level

log = logging.getLogger(__name__)

HELD_OUT = 0.2
"""Share of the documents held out to score the scales."""
MIN_PAIRS = 1000
"""Held-out (document, parent) pairs the parent sample holds at least (all parents if fewer)."""
MIN_Z = 2.0
"""Paired t statistic a scale needs to replace the current one."""
SEARCH_MAX_ITER = 5
"""Epochs per problem while searching (the final training keeps ``cfg.max_iter``): on the
shared datasets the scales rank the same as with 20, at half the search's time."""
TOP = 3
"""Children ranked per held-out document: the score is P@1 + P@TOP within its parents."""


@dataclass(frozen=True)
class CostChoice:
    """The chosen scale of the leaf level's costs, and what the search saw."""

    scale: float = 1.0
    held_out: dict[float, tuple[float, float]] = field(default_factory=dict)  # (P@1, P@3) %
    n_docs: int = 0  # held-out documents scored
    seconds: float = 0.0


def choose_leaf_cost(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None = None,
    start: float = 1.0,
) -> CostChoice:
    """The scale of ``cfg.Cp``/``cfg.Cn`` for the leaf level (arguments as
    :func:`~xmc_core.linear.solver.train_level`: X csr (n_docs, d), Y csr (n_docs, K) labels,
    C csr (K, P), M csr (n_docs, P)). The line search starts from ``start`` (a warm start's
    champion's scale; 1 when it is not one of ``cfg.leaf_cost_scales``), which it keeps without
    clear evidence. Returns ``start`` when no other scale is allowed or when there is nothing to
    decide on."""
    scales = sorted(set(cfg.leaf_cost_scales))
    start = start if start in scales else 1.0
    if scales == [start] or M.shape[1] == 0:
        return CostChoice(scale=start)
    began = time.perf_counter()
    rng = np.random.default_rng([cfg.seed & (2**63 - 1), 0x1EAF])
    M = sp.csr_matrix(M)
    held = rng.random(X.shape[0]) < HELD_OUT
    sampled = _sample_parents(X, C, M, held, cfg.leaf_cost_sample, rng)
    keep = sp.diags(sampled.astype(np.float64))
    fit_M = (sp.diags((~held).astype(np.float64)) @ M @ keep).tocsr()
    eval_M = (sp.diags(held.astype(np.float64)) @ M @ keep).tocsc()
    fit_M.eliminate_zeros()
    eval_M.eliminate_zeros()
    if eval_M.nnz == 0:
        return CostChoice(scale=start)
    n_docs, blocks = _held_out_blocks(X, Y, C, eval_M)

    def scores(scale: float) -> np.ndarray:
        costs = {"Cp": cfg.Cp * scale, "Cn": cfg.Cn * scale}
        scaled = cfg.model_copy(update={**costs, "max_iter": min(cfg.max_iter, SEARCH_MAX_ITER)})
        W = train_level(X, Y, C, fit_M, scaled, R, what="leaf cost search", report_idle=False)
        return _ranked_hits(n_docs, blocks, W, cfg.bias)

    tried = {start: scores(start)}
    best = _search(scales, tried, scores, start)
    choice = CostChoice(
        scale=best,
        held_out={s: tuple(100.0 * h.mean(axis=0)) for s, h in sorted(tried.items())},
        n_docs=n_docs,
        seconds=time.perf_counter() - began,
    )
    log.info(
        "leaf level: cost x%g chosen on %s held-out documents (P@1/P@%d within their parents: "
        "%s), %.1f s",
        choice.scale, f"{n_docs:,}", TOP,
        ", ".join(f"x{s:g} {p1:.2f}/{p3:.2f}%" for s, (p1, p3) in choice.held_out.items()),
        choice.seconds,
    )  # fmt: skip
    return choice


def _search(
    scales: list[float],
    tried: dict[float, np.ndarray],
    hits: Callable[[float], np.ndarray],
    start: float = 1.0,
) -> float:
    """Line search over ``scales`` from ``start`` (``tried`` holds its per-document scores and
    gains every scale evaluated; ``hits(scale)`` evaluates one); returns the chosen scale."""
    at = scales.index(start)
    best = at
    for i in (at + 1, at - 1):  # upwards first: a clear gain there spares the other try
        if 0 <= i < len(scales):
            tried[scales[i]] = hits(scales[i])
            if _z(tried[scales[i]], tried[start]) >= MIN_Z:
                best = i
                break
    if best == at:
        return start
    step = best - at
    while 0 <= best + step < len(scales):
        nxt = scales[best + step]
        tried[nxt] = hits(nxt)
        if _z(tried[nxt], tried[scales[best]]) < MIN_Z:
            break
        best += step
    return scales[best]


def _z(new: np.ndarray, old: np.ndarray) -> float:
    """Paired t statistic of ``new`` over ``old``: per-document (P@1, P@3) rows, summed."""
    diff = new.sum(axis=1) - old.sum(axis=1)
    sd = float(diff.std(ddof=1)) if diff.size > 1 else 0.0
    return 0.0 if sd == 0.0 else float(diff.mean() / (sd / math.sqrt(diff.size)))


def _sample_parents(
    X: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    held: np.ndarray,
    share: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Boolean (P,): random parents, taken until their work reaches ``share`` of the level's
    and their held-out (document, parent) pairs reach ``MIN_PAIRS``."""
    entries = M.T @ np.diff(X.indptr).astype(np.float64)  # X entries over each parent's docs
    work = entries * np.bincount(sp.csr_matrix(C).indices, minlength=M.shape[1])
    pairs = M.T @ held.astype(np.float64)
    order = rng.permutation(M.shape[1])
    work_before = np.cumsum(work[order]) - work[order]
    pairs_before = np.cumsum(pairs[order]) - pairs[order]
    taken = (work_before < share * work.sum()) | (pairs_before < MIN_PAIRS)
    sampled = np.zeros(M.shape[1], dtype=bool)
    sampled[order[taken]] = True
    return sampled


@dataclass(frozen=True)
class _Block:
    """One sampled parent's held-out documents: what every scale's scoring reads."""

    X: sp.csr_matrix  # (rows, d) the documents' rows
    kids: np.ndarray  # (k,) the parent's children
    at: np.ndarray  # (rows,) the documents' positions among the scored ones
    labels: np.ndarray  # (rows, k) bool: is child j a label of document i


def _held_out_blocks(
    X: sp.csr_matrix, Y: sp.csr_matrix, C: sp.csr_matrix, eval_M: sp.csc_matrix
) -> tuple[int, list[_Block]]:
    """(number of held-out documents with a parent, one block per parent of ``eval_M``)."""
    docs = np.flatnonzero(np.diff(sp.csr_matrix(eval_M).indptr))
    where = np.full(X.shape[0], -1, dtype=np.int64)
    where[docs] = np.arange(docs.size)
    children = sp.csc_matrix(C)  # column p: the children of parent p
    Yr = sp.csr_matrix(Y)
    blocks = []
    for p in np.flatnonzero(np.diff(eval_M.indptr)):
        rows = eval_M.indices[eval_M.indptr[p] : eval_M.indptr[p + 1]]
        kids = children.indices[children.indptr[p] : children.indptr[p + 1]]
        labels = Yr[rows][:, kids].toarray() > 0
        blocks.append(_Block(X[rows], kids, where[rows], labels))
    return int(docs.size), blocks


def _ranked_hits(n_docs: int, blocks: list[_Block], W: sp.csc_matrix, bias: float) -> np.ndarray:
    """(n_docs, 2) float: P@1 and P@``TOP`` of each held-out document over the children of
    its parents (``blocks``), ranked by their scores under ``W``."""
    Wd = sp.csc_matrix(W)
    doc_parts, score_parts, hit_parts = [], [], []
    for b in blocks:
        Wp = Wd[:, b.kids]
        S = (b.X @ Wp[:-1]).toarray() + bias * Wp[-1].toarray()
        top = np.argsort(-S, axis=1, kind="stable")[:, :TOP]
        r = np.repeat(np.arange(b.at.size), top.shape[1])
        doc_parts.append(b.at[r])
        score_parts.append(S[r, top.ravel()])
        hit_parts.append(b.labels[r, top.ravel()])
    doc, score, hit = (np.concatenate(x) for x in (doc_parts, score_parts, hit_parts))
    order = np.lexsort((-score, doc))  # by document, best first (ties: parent order)
    doc, hit = doc[order], hit[order]
    rank = np.arange(doc.size) - np.searchsorted(doc, doc)
    out = np.zeros((n_docs, 2))
    out[doc[rank == 0], 0] = hit[rank == 0]
    out[:, 1] = np.bincount(doc[rank < TOP], weights=hit[rank < TOP], minlength=n_docs) / TOP
    return out
