"""Astec's modules 2-4 on frozen encodings: the ANN indexes
(:mod:`xmc_core.families.astec.shortlist`), the training shortlists (ANN shortlist, positives,
random labels), the shortlist classifier
and the fusion weight ``beta``.

The validation rows (:func:`split_rows`, the same rows module 1 held out) train nothing: the
label vectors, the indexes and the classifier see only the other rows; a training document's
own labels are not among its neighbours' votes. After every epoch the
validation rows' ANN shortlists (exactly what prediction scores) are scored with the exported
classifier for every ``beta`` of ``beta_grid``; the epoch and ``beta`` with the best P@1 (then
P@5) are kept (:func:`choose_beta`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.errors import InputError
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.dense import (
    Block,
    dense_rows,
    fuse,
    shortlist_logits,
    unit_rows,
)
from xmc_core.families.astec.network import ShortlistNet
from xmc_core.families.astec.shortlist import Shortlister
from xmc_core.neural import descend, epoch_seed, split_rows, torch_threads
from xmc_core.neural_loop import LoopState, TrainingLoop

log = logging.getLogger(__name__)
WHAT = "astec classifier"


@dataclass(frozen=True)
class Fitted:
    """What modules 2-4 learn: the ANN indexes, the classifier ``W`` (L, D), ``b`` (L,), its
    block, ``beta`` and the training record."""

    shortlister: Shortlister
    W: np.ndarray
    b: np.ndarray
    block: Block
    beta: float
    record: dict[str, Any]


def candidate_pairs(
    shortlist: np.ndarray, positives: sp.csr_matrix, n_random: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, label) pairs a batch trains on: each row's ANN ``shortlist`` int64 (B, k)
    (-1: none), its ``positives`` csr (B, L) and ``n_random`` labels drawn from ``rng``, each
    pair once; (rows int64 (P,), labels int64 (P,), targets float32 (P,)), sorted by row
    then label."""
    B, L = positives.shape
    pos = sp.csr_matrix(positives)
    pos_rows = np.repeat(np.arange(B), np.diff(pos.indptr))
    rows = np.concatenate([
        np.repeat(np.arange(B), shortlist.shape[1]), np.repeat(np.arange(B), n_random), pos_rows,
    ])  # fmt: skip
    labels = np.concatenate(
        [shortlist.ravel(), rng.integers(0, L, size=B * n_random), pos.indices]
    ).astype(np.int64)
    keys = np.unique(rows[labels >= 0] * L + labels[labels >= 0])
    targets = np.isin(keys, pos_rows * L + pos.indices).astype(np.float32)
    return keys // L, keys % L, targets


def precision(labels: np.ndarray, Y: sp.csr_matrix) -> np.ndarray:
    """Per-row hits float (n, k) of ranked ``labels`` int64 (n, k) (-1: none) in ``Y``."""
    safe = np.where(labels >= 0, labels, 0)
    hits = np.asarray(Y[np.arange(len(labels))[:, None], safe].todense()) > 0
    return hits & (labels >= 0)


def fused_precision(
    logits: np.ndarray, sims: np.ndarray, labels: np.ndarray, Y: sp.csr_matrix, beta: float
) -> tuple[float, float]:
    """(P@1, P@5) of the fused scores of shortlists ``labels`` (n, S) against ``Y`` (n, L)."""
    top, _ = top_k_dense(fuse(logits, sims, beta), 5, labels)
    hits = precision(top, Y)
    return float(hits[:, :1].mean()), float(hits.sum(axis=1).mean() / 5)


def choose_beta(
    logits: np.ndarray, sims: np.ndarray, labels: np.ndarray, Y: sp.csr_matrix,
    grid: list[float],
) -> tuple[float, dict[float, tuple[float, float]]]:  # fmt: skip
    """The ``beta`` of ``grid`` whose fused scores rank the validation rows best, by P@1
    then P@5 (ties: the first in ``grid``), and (P@1, P@5) of every ``beta``. ``logits``,
    ``sims``, ``labels`` (n, S): the rows' shortlists; ``Y`` csr (n, L) their labels."""
    scores = {beta: fused_precision(logits, sims, labels, Y, beta) for beta in grid}
    best = max(grid, key=lambda beta: (scores[beta], -grid.index(beta)))
    return best, scores


def initial_bias(n_positive: float, n_pairs: float) -> float:
    """The logit of the share of positives among a document's training pairs."""
    p = min(max(n_positive / max(n_pairs, 1), 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def fit_classifier(X: sp.csr_matrix, Y: sp.csr_matrix, cfg: AstecConfig) -> Fitted:
    """Modules 2-4 on encodings ``X`` csr (n, D) with labels ``Y`` csr (n, L)."""
    Y = sp.csr_matrix(Y, dtype=np.float32)
    train_rows, val_rows = split_rows(X.shape[0], cfg)
    Z = dense_rows(X, 0, X.shape[0])
    U = unit_rows(Z)
    if Y[train_rows].nnz == 0:
        raise InputError(None, "no training document has a label", "check the dataset")
    log.info("%s: building the %s index over the label vectors%s", WHAT, cfg.ann,
             f" and over {len(train_rows):,} documents" if cfg.n_neighbours else "")  # fmt: skip
    shortlister, V, has = Shortlister.build(U[train_rows], Y[train_rows], cfg)
    log.info("%s: %s of %s labels indexed (the others have no training document)", WHAT,
             f"{int(has.sum()):,}", f"{len(has):,}")  # fmt: skip
    own = np.arange(len(train_rows))
    short = shortlister.shortlists(U[train_rows], own=own, threads=cfg.threads)[0]
    val = shortlister.shortlists(U[val_rows], threads=cfg.threads) if len(val_rows) else None
    per_doc = Y[train_rows].nnz / len(train_rows)
    width = float((short >= 0).sum(axis=1).mean())
    bias = np.full(Y.shape[1], initial_bias(per_doc, width + cfg.n_random + per_doc), np.float32)
    with torch_threads(cfg.threads), torch.random.fork_rng():
        torch.manual_seed(epoch_seed(cfg.seed, -3))
        vectors = np.where(has[:, None], V, 0.0).astype(np.float32)
        trainer = ShortlistTraining(ShortlistNet(vectors, bias, cfg.block_dropout), Z, Y,
                                    train_rows, short, cfg)  # fmt: skip
        best, state = trainer.run(val_rows, val)
    W, b, block, beta = best
    record = state.record(indexed_labels=int(has.sum()), mean_shortlist=round(width, 1))
    return Fitted(shortlister, W, b, block, beta, record)


Exported = tuple[np.ndarray, np.ndarray, Block, float]


class ShortlistTraining:
    """The shortlist classifier's part of :class:`~xmc_core.neural_loop.TrainingLoop` (BCE over
    each document's candidate pairs; the best epoch by validation P@1 of the fused scores)."""

    def __init__(
        self, net: ShortlistNet, Z: np.ndarray, Y: sp.csr_matrix, rows: np.ndarray,
        shortlist: np.ndarray, cfg: AstecConfig,
    ) -> None:  # fmt: skip
        self.net, self.Z, self.Y, self.rows, self.shortlist = net, Z, Y, rows, shortlist
        self.cfg = cfg
        self.opts = [
            torch.optim.Adam(net.block.parameters(), lr=cfg.lr),
            torch.optim.SparseAdam(list(net.weight.parameters()) + list(net.bias.parameters()),
                                   lr=cfg.lr),
        ]  # fmt: skip
        self.best: Exported | None = None

    def run(
        self, val_rows: np.ndarray, val: tuple[np.ndarray, np.ndarray] | None
    ) -> tuple[Exported, LoopState]:
        """Train; returns the best epoch's parts (by validation P@1 of the fused scores)
        and the loop's record."""
        cfg, n = self.cfg, len(self.rows)
        steps = max(-(-n // cfg.batch_size), 1)
        loop = TrainingLoop(log, WHAT, cfg.classifier_epochs, steps, budget_s=cfg.time_budget_s,
                            score_key="val_score", best="first")  # fmt: skip
        width = float((self.shortlist >= 0).sum(axis=1).mean())
        log.info("%s: %s training docs, %s validation docs, %s labels; each document's pairs: "
                 "its ANN shortlist (%.1f labels on average), %d random labels, its positives",
                 WHAT, f"{n:,}", f"{len(val_rows):,}", f"{self.Y.shape[1]:,}", width,
                 cfg.n_random)  # fmt: skip
        self.val_rows, self.val = val_rows, val
        state = loop.run(self)
        assert self.best is not None
        log.info("%s: beta %.2f chosen on %s validation documents", WHAT, self.best[3],
                 f"{len(val_rows):,}")  # fmt: skip
        return self.best, state

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Epoch ``epoch + 1``'s batches (positions in the training rows) in a seeded order,
        its dropout seeded; the step's random labels come from the same generator."""
        cfg = self.cfg
        torch.manual_seed(epoch_seed(cfg.seed, epoch + 1))
        self.rng = np.random.default_rng([cfg.seed, 4, epoch + 1])
        order = self.rng.permutation(len(self.rows))
        self.net.train()
        return [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def validate(self) -> dict[str, Any]:
        """The epoch's classifier, its ``beta`` and validation scores (none without validation
        rows: the ``beta`` of the grid nearest 0.5)."""
        self.exported = self.export(1.0)
        if self.val is None:
            self.beta = min(self.cfg.beta_grid, key=lambda b: abs(b - 0.5))
            return {"val_score": None, "beta": self.beta}
        beta, scores = self.choose(self.exported, self.val_rows, self.val)
        self.beta = beta
        p1, p5 = scores[beta]
        ann_only, clf_only = fused_precision_ends(scores)
        return {"val_score": p1, "beta": beta, "val_p5": p5, "p1_ann": ann_only,
                "p1_clf": clf_only}  # fmt: skip

    def describe(self, entry: dict[str, Any]) -> str:
        score = entry["val_score"]
        shown = "".join(
            f", {k} {v:.4f}" for k, v in entry.items()
            if k not in ("epoch", "loss", "seconds", "val_score") and isinstance(v, float)
        )  # fmt: skip
        return ("" if score is None else f", val {score:.4f}") + shown

    def snapshot(self) -> None:
        self.best = (*self.exported[:3], self.beta)

    def checkpoint(self, state: LoopState) -> None:
        """Nothing: the classifier does not resume."""

    def step(self, part: np.ndarray) -> float:
        """One step on training rows ``self.rows[part]``; returns the mean BCE of its pairs."""
        docs = self.rows[part]
        pair_rows, labels, targets = candidate_pairs(
            self.shortlist[part], self.Y[docs], self.cfg.n_random, self.rng
        )
        z = torch.from_numpy(self.Z[docs])
        logits = self.net(z, torch.from_numpy(pair_rows), torch.from_numpy(labels))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.from_numpy(targets)
        )
        return descend(loss, self.opts)

    def export(self, beta: float) -> Exported:
        """The current classifier as numpy arrays: (W, b, block, ``beta``)."""
        block = self.net.block.export()
        self.net.train()
        with torch.no_grad():
            W = self.net.weight.weight.detach().numpy().copy()
            b = self.net.bias.weight.detach().numpy()[:, 0].copy()
        return W, b, block, beta

    def choose(
        self, exported: Exported, val_rows: np.ndarray, val: tuple[np.ndarray, np.ndarray]
    ) -> tuple[float, dict[float, tuple[float, float]]]:
        """:func:`choose_beta` on the validation rows' ANN shortlists."""
        W, b, block, _ = exported
        labels, sims = val
        Z = self.Z[val_rows]
        logits = shortlist_logits(block(Z), labels, W, b)
        return choose_beta(logits, sims, labels, self.Y[val_rows], self.cfg.beta_grid)


def fused_precision_ends(scores: dict[float, tuple[float, float]]) -> tuple[float, float]:
    """Validation P@1 of the smallest and the largest ``beta`` tried (with the default grid:
    the ANN similarity alone, the classifier alone)."""
    return scores[min(scores)][0], scores[max(scores)][0]
