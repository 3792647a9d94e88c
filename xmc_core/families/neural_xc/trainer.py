"""The NeuralXC training loop: Adam on the three-term loss, the best epoch by validation P@1.

A validation split is carved from the training documents (``val_fraction`` of them, at most
``val_max_docs``, drawn from ``seed``; the test split is never read). Each epoch visits the other
training documents in an order drawn from ``(seed, epoch)``, in batches of ``batch_size`` (the
last one short), each batch's input columns and labels made dense (``batch_size`` x (d + L)
floats: ``input_max_features`` keeps d modest). After every epoch the validation P@1 is
measured and the best epoch's weights kept; training stops after ``patience`` epochs without a
better P@1 (a tie counts as better: the later epoch is kept and the run goes on), after
``epochs`` or once ``time_budget_s`` has passed (checked after every batch). Adam is the fused
one (one kernel over every parameter: on the CPU a tenth of the time of its loop).
A progress line (step, loss, docs/s, time left) comes at least every 30 s and after every
epoch (with the loss terms and the P@1). The same seed gives the same network (bit-identical on
the CPU with the same threads).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.neural_xc.network import NeuralXc
from xmc_core.neural import (
    descend,
    epoch_seed,
    prior_logits,
    resolve_device,
    split_rows,
    torch_threads,
)
from xmc_core.neural_loop import LoopState, TrainingLoop, cpu_weights
from xmc_core.progress import Clock
from xmc_core.wording import counted

log = logging.getLogger(__name__)
WHAT = "neural-xc"
TERMS = ("input_mse", "label_mse", "bce")


def dense(M: sp.csr_matrix, rows: np.ndarray | slice, device: torch.device) -> torch.Tensor:
    """Rows of csr ``M`` as a dense float32 tensor on ``device``."""
    return torch.from_numpy(M[rows].toarray().astype(np.float32, copy=False)).to(device)


@torch.no_grad()
def precision_at_1(
    net: NeuralXc, X: sp.csr_matrix, Y: sp.csr_matrix, rows: np.ndarray, batch_size: int,
    device: torch.device,
) -> float:  # fmt: skip
    """P@1 of the network's top label on documents ``rows`` (ties: the lower label)."""
    net.eval()
    hits = 0
    for start in range(0, len(rows), batch_size):
        part = rows[start : start + batch_size]
        top = np.array(net(dense(X, part, device)).argmax(dim=1).cpu(), dtype=np.int64)
        hits += int((Y[part][np.arange(len(part)), top] > 0).sum())
    return hits / max(len(rows), 1)


@dataclass
class TrainRecord:
    """A run's history (per epoch: mean loss and terms, validation P@1, seconds), its best
    epoch and why it stopped."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_p1: float = -1.0
    stopped: str = ""

    def describe(self) -> str:
        """``3 epochs (best 2, val P@1 0.6120), early stop: ...``."""
        best = next((h for h in self.history if h["epoch"] == self.best_epoch), {})
        p1 = best.get("val_P@1")
        score = f", val P@1 {p1:.4f}" if p1 is not None else ""
        return (
            f"{counted(len(self.history), 'epoch')} (best {self.best_epoch}{score}), {self.stopped}"
        )


def train_network(
    X: sp.csr_matrix, Y: sp.csr_matrix, cfg: NeuralXcConfig, clock: Clock = time.monotonic
) -> tuple[NeuralXc, TrainRecord]:
    """Train a network on inputs ``X`` csr (n, d) and labels ``Y`` csr (n, L); returns it with
    the best epoch's weights (on the CPU, eval mode) and the run's record."""
    device = resolve_device(cfg.device)
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
    with torch_threads(cfg.threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(epoch_seed(cfg.seed, -1))
        net = NeuralXc(cfg, X.shape[1], Y.shape[1])
        if cfg.label_prior_bias:
            with torch.no_grad():
                net.output_bias().copy_(torch.from_numpy(prior_logits(Y)))
        record, best = NeuralXcTraining(net.to(device), X, Y, cfg, device).run(clock)
    net.load_state_dict(best)
    return net.cpu().eval(), record


class NeuralXcTraining:
    """The network's part of :class:`~xmc_core.neural_loop.TrainingLoop`: its batches, its
    Adam step on the three-term loss, its validation P@1 and the best weights."""

    def __init__(
        self, net: NeuralXc, X: sp.csr_matrix, Y: sp.csr_matrix, cfg: NeuralXcConfig,
        device: torch.device,
    ) -> None:  # fmt: skip
        self.net, self.X, self.Y, self.cfg, self.device = net, X, Y, cfg, device
        self.opt = torch.optim.Adam(  # fused: one kernel for every parameter, 10x the loop's speed
            net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True
        )
        self.train_rows, self.val_rows = split_rows(X.shape[0], cfg)
        self.best: dict[str, torch.Tensor] = {}

    def run(self, clock: Clock) -> tuple[TrainRecord, dict[str, torch.Tensor]]:
        """Train to the end; returns the record and the best epoch's weights."""
        cfg, n = self.cfg, len(self.train_rows)
        log.info(
            "%s: %s training docs, %s validation docs, %s input columns, %s labels, "
            "%s epochs at most on %s",
            WHAT, f"{n:,}", f"{len(self.val_rows):,}", f"{self.X.shape[1]:,}",
            f"{self.Y.shape[1]:,}", cfg.epochs, self.device,
        )  # fmt: skip
        loop = TrainingLoop(log, WHAT, cfg.epochs, -(-n // cfg.batch_size),
                            budget_s=cfg.time_budget_s, patience=cfg.patience, best="last",
                            clock=clock)  # fmt: skip
        state = loop.run(self)
        best_p1 = -1.0 if state.best_score is None else state.best_score
        record = TrainRecord(state.history, state.best_epoch, best_p1, state.stopped)
        if not self.best:
            self.snapshot()
        return record, self.best

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Epoch ``epoch``'s batches: the training rows in an order drawn from it."""
        cfg = self.cfg
        order = np.random.default_rng([cfg.seed, 2, epoch]).permutation(self.train_rows)
        self.net.train()
        return [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]

    def step(self, rows: np.ndarray) -> dict[str, float]:
        """One Adam step on documents ``rows``; returns the batch's loss and its terms."""
        x, y = dense(self.X, rows, self.device), dense(self.Y, rows, self.device)
        parts = self.net.losses(x, y, self.cfg.alpha, self.cfg.beta)
        values = {"loss": descend(parts.total, [self.opt])}
        return values | {t: float(getattr(parts, t).detach()) for t in TERMS}

    def validate(self) -> dict[str, Any]:
        """``{"val_P@1": ...}`` on the validation rows (None without any)."""
        net, rows, batch = self.net, self.val_rows, self.cfg.eval_batch_size
        p1 = precision_at_1(net, self.X, self.Y, rows, batch, self.device) if len(rows) else None
        return {"val_P@1": p1}

    def describe(self, entry: dict[str, Any]) -> str:
        p1 = entry["val_P@1"]
        terms = ", ".join(f"{t} {entry[t]:.4g}" for t in TERMS)
        return f" ({terms})" + ("" if p1 is None else f", val P@1 {p1:.4f}")

    def snapshot(self) -> None:
        """The network's weights, copied to the CPU."""
        self.best = cpu_weights(self.net)

    def checkpoint(self, state: LoopState) -> None:
        """Nothing: a NeuralXC run does not resume."""
