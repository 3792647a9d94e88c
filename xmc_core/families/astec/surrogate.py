"""Astec's module 1: meta-labels from balanced 2-means over the label features, and the
encoder trained as a one-vs-all classifier over them (BCE).

The meta-labels are the leaves of a balanced 2-means tree (:class:`~xmc_core.linear.tree.
LabelTree` with branching 2) of :func:`meta_label_count` clusters. Training: Adam for the dense
weights, lazy Adam (``SparseAdam``) for the embedding table, whose gradient holds only the
batch's features; each epoch's order and dropout drawn from ``(seed, epoch)``; the output bias
starts at the meta-labels' log prior odds. The validation rows (:func:`split_rows`) are held
out; the epoch with the best validation P@1 over the meta-labels is kept.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.config import TreeConfig
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.network import SurrogateNet, bag_inputs
from xmc_core.families.astec.parts import AstecEncoder
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.tree import LabelTree
from xmc_core.neural import descend, epoch_seed, prior_logits, split_rows, torch_threads
from xmc_core.neural_loop import LoopState, TrainingLoop

log = logging.getLogger(__name__)
WHAT = "astec surrogate"


def meta_label_count(n_labels: int, cfg: AstecConfig) -> int:
    """The power of two nearest ``n_labels / labels_per_meta_label`` (at least 2, at most
    ``max_meta_labels`` and ``n_labels``): 1,024 for EURLex-4K's 3,993 labels."""
    wanted = max(n_labels / cfg.labels_per_meta_label, 2.0)
    count = 1 << max(round(math.log2(wanted)), 1)
    return max(1, min(count, cfg.max_meta_labels, n_labels))


def meta_labels(label_features: LabelFeatures, tree: TreeConfig, astec: AstecConfig) -> LabelTree:
    """A balanced 2-means tree over the label features whose leaves are the meta-labels
    (``tree``'s k-means iterations, restarts and seed)."""
    n_labels = label_features.z.shape[0]
    count = meta_label_count(n_labels, astec)
    leaf = max(1, -(-n_labels // count))
    cfg = tree.model_copy(update={"branching": 2, "max_leaf_size": leaf})
    built = LabelTree.build(label_features.z, cfg)
    log.info("%s: %s labels in %s meta-labels", WHAT, f"{n_labels:,}",
             f"{built.level_sizes()[-2] if built.depth > 1 else 1:,}")  # fmt: skip
    return built


def meta_targets(Y: sp.csr_matrix, tree: LabelTree) -> sp.csr_matrix:
    """Binary csr (n, K) float32: the meta-labels (tree leaves) holding each document's labels."""
    leaf = tree.C[-1]
    Yc = sp.csr_matrix(sp.csr_matrix(Y, dtype=np.float32) @ leaf)
    Yc.data[:] = 1.0
    return Yc


def train_surrogate(train: SplitFeatures, meta: LabelTree, cfg: AstecConfig) -> AstecEncoder:
    """Module 1 on the training split's TF-IDF rows; returns the encoder (its best epoch)."""
    X = sp.csr_matrix(train.X, dtype=np.float32)
    Yc = meta_targets(train.Y, meta)
    rows, val_rows = split_rows(X.shape[0], cfg)
    with torch_threads(cfg.threads), torch.random.fork_rng():
        torch.manual_seed(epoch_seed(cfg.seed, -1))
        net = SurrogateNet(X.shape[1], cfg.embedding_dim, Yc.shape[1], cfg.dropout,
                           cfg.block_dropout)  # fmt: skip
        with torch.no_grad():
            net.output.bias.copy_(torch.from_numpy(prior_logits(Yc[rows])))
        steps = max(-(-len(rows) // cfg.batch_size), 1)
        loop = TrainingLoop(log, WHAT, cfg.surrogate_epochs, steps, budget_s=cfg.time_budget_s,
                            score_key="val_score", best="first")  # fmt: skip
        log.info("%s: %s training docs, %s validation docs, %s features, %s meta-labels",
                 WHAT, f"{len(rows):,}", f"{len(val_rows):,}", f"{X.shape[1]:,}",
                 f"{Yc.shape[1]:,}")  # fmt: skip
        training = SurrogateTraining(net, X, Yc, rows, val_rows, cfg)
        state = loop.run(training)
    best = training.best
    best.record = state.record(meta_labels=int(Yc.shape[1]))
    return best


class SurrogateTraining:
    """Module 1's part of :class:`~xmc_core.neural_loop.TrainingLoop`: its batches, its step,
    its validation P@1 over the meta-labels and the best encoder."""

    def __init__(
        self, net: SurrogateNet, X: sp.csr_matrix, Yc: sp.csr_matrix, rows: np.ndarray,
        val_rows: np.ndarray, cfg: AstecConfig,
    ) -> None:  # fmt: skip
        self.net, self.X, self.Yc, self.rows, self.val_rows, self.cfg = (
            net,
            X,
            Yc,
            rows,
            val_rows,
            cfg,
        )
        self.opts = [
            torch.optim.Adam(net.dense_parameters(), lr=cfg.lr),
            torch.optim.SparseAdam([net.embedding.weight], lr=cfg.lr),
        ]
        self.best = self.encoder()

    def encoder(self) -> AstecEncoder:
        """The encoder the network is now."""
        E = self.net.embedding.weight.detach().numpy().copy()
        return AstecEncoder(self.cfg, E, self.net.block.export())

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Epoch ``epoch + 1``'s batches in a seeded order, its dropout seeded."""
        cfg = self.cfg
        torch.manual_seed(epoch_seed(cfg.seed, epoch + 1))
        order = np.random.default_rng([cfg.seed, 2, epoch + 1]).permutation(self.rows)
        self.net.train()
        return [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def step(self, rows: np.ndarray) -> float:
        return step(self.net, self.opts, self.X[rows], self.Yc[rows])

    def validate(self) -> dict[str, Any]:
        """``{"val_score": P@1 over the meta-labels}`` (None without validation rows)."""
        if not len(self.val_rows):
            return {"val_score": None}
        return {
            "val_score": meta_precision(self.net, self.X[self.val_rows], self.Yc[self.val_rows])
        }

    def describe(self, entry: dict[str, Any]) -> str:
        return "" if entry["val_score"] is None else f", val {entry['val_score']:.4f}"

    def snapshot(self) -> None:
        self.best = self.encoder()

    def checkpoint(self, state: LoopState) -> None:
        """Nothing: module 1 does not resume."""


def step(
    net: SurrogateNet, opts: list[torch.optim.Optimizer], X: sp.csr_matrix, Yc: sp.csr_matrix
) -> float:
    """One step on a batch of TF-IDF rows ``X`` with meta-label targets ``Yc``; its mean BCE."""
    logits = net(*bag_inputs(X, torch.device("cpu")))
    target = torch.from_numpy(Yc.toarray())
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
    return descend(loss, opts)


def meta_precision(net: SurrogateNet, X: sp.csr_matrix, Yc: sp.csr_matrix) -> float:
    """P@1 of the network's top meta-label on rows ``X`` (ties: the lower meta-label)."""
    net.eval()
    with torch.no_grad():
        logits = net(*bag_inputs(X, torch.device("cpu"))).numpy()
    net.train()
    best = np.argmax(logits, axis=1)
    return float((np.asarray(Yc[np.arange(X.shape[0]), best]) > 0).mean())
