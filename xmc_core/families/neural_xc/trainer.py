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
from xmc_core.neural import descend, epoch_seed, prior_logits, split_rows, torch_threads
from xmc_core.progress import Clock, StepLog, duration
from xmc_core.transformer.encoder import resolve_device
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

    def stop_reason(self, cfg: NeuralXcConfig, over_budget: bool) -> str | None:
        epoch = len(self.history)
        if over_budget:
            return f"time budget of {duration(cfg.time_budget_s or 0)} reached"
        if epoch - self.best_epoch >= cfg.patience and self.best_p1 >= 0:
            return f"early stop: no better val P@1 in {counted(cfg.patience, 'epoch')}"
        if epoch >= cfg.epochs:
            return f"all {counted(cfg.epochs, 'epoch')}"
        return None

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
        loop = EpochLoop(net.to(device), X, Y, cfg, device, clock)
        record, best = loop.run()
    net.load_state_dict(best)
    return net.cpu().eval(), record


class EpochLoop:
    """The epochs of one training run (see the module docstring)."""

    def __init__(
        self, net: NeuralXc, X: sp.csr_matrix, Y: sp.csr_matrix, cfg: NeuralXcConfig,
        device: torch.device, clock: Clock,
    ) -> None:  # fmt: skip
        self.net, self.X, self.Y, self.cfg, self.device, self.clock = net, X, Y, cfg, device, clock
        self.opt = torch.optim.Adam(  # fused: one kernel for every parameter, 10x the loop's speed
            net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True
        )
        self.train_rows, self.val_rows = split_rows(X.shape[0], cfg)
        self.sums = dict.fromkeys(("loss", *TERMS), 0.0)
        self.steps = 0

    def run(self) -> tuple[TrainRecord, dict[str, torch.Tensor]]:
        """Train to the end; returns the record and the best epoch's weights."""
        cfg, n = self.cfg, len(self.train_rows)
        steps = -(-n // cfg.batch_size)
        progress = StepLog(
            log, WHAT, steps * cfg.epochs, clock=self.clock, budget_s=cfg.time_budget_s
        )
        log.info(
            "%s: %s training docs, %s validation docs, %s input columns, %s labels, "
            "%s epochs at most on %s",
            WHAT, f"{n:,}", f"{len(self.val_rows):,}", f"{self.X.shape[1]:,}",
            f"{self.Y.shape[1]:,}", cfg.epochs, self.device,
        )  # fmt: skip
        record, best = TrainRecord(), {}
        start = self.clock()
        reason = record.stop_reason(cfg, False)
        while reason is None:
            over = self.epoch(len(record.history), progress, start)
            best = self.record(record, best, progress, self.clock() - start)
            reason = record.stop_reason(cfg, over)
        record.stopped = reason
        log.info("%s: %s; best epoch %d", WHAT, reason, record.best_epoch)
        return record, best or self.copy()

    def epoch(self, epoch: int, progress: StepLog, start: float) -> bool:
        """One pass over the training rows; True when the time budget ran out."""
        cfg = self.cfg
        order = np.random.default_rng([cfg.seed, 2, epoch]).permutation(self.train_rows)
        self.net.train()
        self.sums, self.steps = dict.fromkeys(self.sums, 0.0), 0
        for begin in range(0, len(order), cfg.batch_size):
            rows = order[begin : begin + cfg.batch_size]
            loss = self.step(rows)
            progress.step(loss, len(rows))
            if progress.due() and begin + cfg.batch_size < len(order):  # the epoch's line follows
                progress.emit()
            budget = cfg.time_budget_s
            if budget is not None and self.clock() - start >= budget:
                return True
        return False

    def step(self, rows: np.ndarray) -> float:
        """One Adam step on documents ``rows``; returns the batch's loss."""
        x, y = dense(self.X, rows, self.device), dense(self.Y, rows, self.device)
        parts = self.net.losses(x, y, self.cfg.alpha, self.cfg.beta)
        values = {"loss": descend(parts.total, [self.opt])}
        values |= {t: float(getattr(parts, t).detach()) for t in TERMS}
        for name, value in values.items():
            self.sums[name] += value
        self.steps += 1
        return values["loss"]

    def record(
        self, record: TrainRecord, best: dict[str, torch.Tensor], progress: StepLog,
        elapsed: float,
    ) -> dict[str, torch.Tensor]:  # fmt: skip
        """Validate the epoch just done, log it, keep its weights if they are the best."""
        cfg, epoch = self.cfg, len(record.history) + 1
        entry: dict[str, Any] = {"epoch": epoch}
        entry |= {k: v / max(self.steps, 1) for k, v in self.sums.items()}
        entry |= {"seconds": round(elapsed, 3), "val_P@1": None}
        if len(self.val_rows):
            entry["val_P@1"] = precision_at_1(
                self.net, self.X, self.Y, self.val_rows, cfg.eval_batch_size, self.device
            )
        record.history.append(entry)
        p1 = entry["val_P@1"]
        terms = ", ".join(f"{t} {entry[t]:.4g}" for t in TERMS)
        score = "" if p1 is None else f", val P@1 {p1:.4f}"
        progress.emit(f", epoch {epoch}/{cfg.epochs} ({terms}){score}")
        if p1 is None or p1 >= record.best_p1:  # a tie: the later, longer-trained epoch
            record.best_p1, record.best_epoch = -1.0 if p1 is None else p1, epoch
            return self.copy()
        return best

    def copy(self) -> dict[str, torch.Tensor]:
        """The network's weights, copied to the CPU."""
        return {k: v.detach().cpu().clone() for k, v in self.net.state_dict().items()}
