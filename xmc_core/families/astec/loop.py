"""The epochs of one Astec training loop: progress lines (step, loss, docs/s, time left) at
least every 30 s and after every epoch, a time budget checked after every step, the per-epoch
history and the best epoch by a validation score.

A loop reads flat::

    epochs = Epochs("astec surrogate", cfg.surrogate_epochs, len(batches), cfg.time_budget_s)
    for epoch in epochs:
        for rows in batches:
            epochs.step(train_step(rows), len(rows))
            if epochs.over_budget:
                break
        if epochs.end_epoch(validation_score()):
            best = snapshot()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from xmc_core.progress import Clock, StepLog, duration
from xmc_core.wording import counted

log = logging.getLogger(__name__)


class Epochs:
    """Up to ``n_epochs`` epochs of ``steps_per_epoch`` steps, stopped early once
    ``budget_s`` seconds have passed (None: no budget)."""

    def __init__(
        self, what: str, n_epochs: int, steps_per_epoch: int, budget_s: float | None,
        clock: Clock = time.monotonic,
    ) -> None:  # fmt: skip
        self.what, self.n_epochs, self.budget_s, self.clock = what, n_epochs, budget_s, clock
        total = max(steps_per_epoch, 1) * n_epochs
        self.progress = StepLog(log, what, total, clock=clock, budget_s=budget_s)
        self.start = clock()
        self.epoch, self.over_budget = 0, False
        self.loss_sum, self.loss_steps = 0.0, 0
        self.history: list[dict[str, Any]] = []
        self.best_epoch, self.best_score = 0, float("-inf")
        self.stopped = ""

    def __iter__(self) -> Iterator[int]:
        for epoch in range(1, self.n_epochs + 1):
            self.epoch, self.loss_sum, self.loss_steps = epoch, 0.0, 0
            yield epoch
            if self.over_budget:
                self.stopped = f"time budget of {duration(self.budget_s or 0)} reached"
                break
        else:
            self.stopped = f"all {counted(self.n_epochs, 'epoch')}"
        log.info("%s: %s; best epoch %d", self.what, self.stopped, self.best_epoch)

    def step(self, loss: float, docs: int) -> None:
        """Count one step of ``docs`` documents with mean loss ``loss``."""
        now = self.progress.step(loss, docs)
        self.loss_sum += loss
        self.loss_steps += 1
        if self.progress.due():
            self.progress.emit()
        self.over_budget = self.budget_s is not None and now - self.start >= self.budget_s

    def end_epoch(self, score: float | None, **fields: Any) -> bool:
        """Record the epoch just done (its mean loss, ``score`` on the validation split, or
        None without one, and ``fields``) and log it; True when it is the best so far (the
        first of equal scores; every epoch without a score)."""
        entry = {
            "epoch": self.epoch, "loss": self.loss_sum / max(self.loss_steps, 1),
            "seconds": round(self.clock() - self.start, 3), "val_score": score, **fields,
        }  # fmt: skip
        self.history.append(entry)
        shown = "".join(f", {k} {v:.4f}" for k, v in fields.items() if isinstance(v, float))
        val = "" if score is None else f", val {score:.4f}"
        self.progress.emit(f", epoch {self.epoch}/{self.n_epochs}{val}{shown}")
        if score is None or score > self.best_score:
            self.best_epoch, self.best_score = self.epoch, score if score is not None else 0.0
            return True
        return False

    def record(self, **more: Any) -> dict[str, Any]:
        """The loop's record (history, best epoch, why it stopped) plus ``more``, for a
        ``meta.json``."""
        return {
            "history": self.history, "best_epoch": self.best_epoch, "stopped": self.stopped,
            **more,
        }  # fmt: skip
