"""The one training loop of the torch families (XML-CNN, NeuralXC, Astec's two modules, the
matcher's levels): it counts steps, logs progress, keeps to a time budget, validates at the
boundaries asked for, keeps the best by a validation score, applies patience, and records the
history and why it stopped. A family gives only its hooks (:class:`Trainee`)::

    record = TrainingLoop(log, "xml-cnn", epochs=10, steps_per_epoch=8, budget_s=600.0,
                          patience=3, best="first").run(trainee)

Each epoch is ``trainee.batches(epoch)`` (the family draws its order and seeds there, ``epoch``
counting from 0); each batch one ``trainee.step(rows)``. A boundary comes after every epoch, or,
with ``validate_every``, after every that many steps and at the end. At a boundary the loop
reads ``trainee.validate()`` into a history entry ``{unit: n, loss and the step's other means,
timing, **validation}`` (``unit``: ``epoch``, or ``step`` with ``validate_every``; timing:
``seconds`` since the start, or ``docs_per_s`` since the previous boundary with
``timing="docs_per_s"``), logs a progress line with the entry's :meth:`Trainee.describe`, calls
``trainee.snapshot()`` when the entry is the best so far and ``trainee.checkpoint(state)``.

The best: the entry whose ``score_key`` field is highest, the first of equal scores
(``best="first"``) or the last (``best="last"``); an entry without a score (no validation rows)
is always the best (the latest weights). ``best=None``: nothing kept (no snapshot). Patience:
stop after ``patience`` boundaries without a better score (only once a score was seen). The
time budget (seconds, less what a resumed run already spent: ``state.elapsed``) is checked
after every step; the epoch then ends, is validated and recorded, and the run stops.

Progress lines (:class:`~xmc_core.progress.StepLog`): after the first step, at least every 30 s
and at every boundary (a line due at a boundary's step gives way to the boundary's own line).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import torch

from xmc_core.progress import Clock, StepLog, duration
from xmc_core.wording import counted


@dataclass
class LoopState:
    """Where a run stands: boundaries done (``epoch``), the history, the best entry's number
    and score (None: none scored yet), the seconds spent and why it stopped ("" while it runs).
    A resumed run starts from its checkpoint's state."""

    epoch: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_score: float | None = None
    elapsed: float = 0.0
    stopped: str = ""

    def record(self, **more: Any) -> dict[str, Any]:
        """The run's record (history, best epoch, why it stopped) plus ``more``, for a
        ``meta.json``."""
        return {
            "history": self.history, "best_epoch": self.best_epoch, "stopped": self.stopped,
            **more,
        }  # fmt: skip


class Trainee(Protocol):
    """What a family gives the loop."""

    def batches(self, epoch: int) -> Sequence[np.ndarray]:
        """Epoch ``epoch``'s batches of document rows (each int64 (B,)), in training order."""
        ...

    def step(self, rows: np.ndarray) -> float | dict[str, float]:
        """One optimizer step on documents ``rows``: its loss, or ``{"loss": ..., other}``."""
        ...

    def validate(self) -> dict[str, Any]:
        """The validation fields of a history entry (``{}``: none)."""
        ...

    def describe(self, entry: dict[str, Any]) -> str:
        """What a boundary's progress line adds for ``entry`` (e.g. ``", val P@1 0.4521"``)."""
        ...

    def snapshot(self) -> None:
        """Keep the current weights: this boundary is the best so far."""
        ...

    def checkpoint(self, state: LoopState) -> None:
        """After every boundary (a resumable family saves its weights and ``state`` here)."""
        ...


class TrainingLoop:
    """Up to ``epochs`` epochs of ``steps_per_epoch`` steps (see the module docstring)."""

    def __init__(
        self, log: logging.Logger, what: str, epochs: int, steps_per_epoch: int, *,
        budget_s: float | None = None, patience: int | None = None,
        best: Literal["first", "last"] | None = "first", score_key: str = "val_P@1",
        score_name: str = "val P@1", validate_every: int | None = None,
        timing: Literal["seconds", "docs_per_s"] = "seconds", clock: Clock = time.monotonic,
    ) -> None:  # fmt: skip
        self.log, self.what, self.epochs, self.steps_per_epoch = log, what, epochs, steps_per_epoch
        self.budget_s, self.patience, self.best, self.clock = budget_s, patience, best, clock
        self.score_key, self.score_name, self.timing = score_key, score_name, timing
        self.validate_every = validate_every
        self.unit = "step" if validate_every else "epoch"
        self.passes = 0

    def run(self, trainee: Trainee, state: LoopState | None = None) -> LoopState:
        """Train ``trainee`` from ``state`` (None: from the start) to the end; the final
        state (history, best, ``stopped``)."""
        state = state or LoopState()
        total = self.steps_per_epoch * self.epochs
        budget = None if self.budget_s is None else self.budget_s - state.elapsed
        done = 0 if self.validate_every else self.steps_per_epoch * state.epoch
        self.progress = StepLog(
            self.log, self.what, total, clock=self.clock, done=done, budget_s=budget
        )
        self.start = self.last = self.progress.start - state.elapsed
        self.sums: dict[str, float] = {}
        self.steps, self.docs = 0, 0
        self.passes = 0 if self.validate_every else state.epoch
        reason = self.stop_reason(state, False)
        while reason is None:
            over = self.epoch(trainee, state, self.passes)
            self.passes += 1
            if not self.validate_every:
                self.boundary(trainee, state, self.passes)
            elif over and self.steps:  # the budget ran out between boundaries
                self.boundary(trainee, state, self.progress.steps)
            reason = self.stop_reason(state, over)
        state.stopped = reason
        if self.best is not None:
            self.log.info("%s: %s; best %s %d", self.what, reason, self.unit, state.best_epoch)
        return state

    def epoch(self, trainee: Trainee, state: LoopState, epoch: int) -> bool:
        """One pass over ``trainee.batches(epoch)``; True when the time budget ran out."""
        batches = trainee.batches(epoch)
        every = self.validate_every
        for i, rows in enumerate(batches):
            loss = trainee.step(rows)
            values = {"loss": loss} if isinstance(loss, float) else loss
            for name, value in values.items():
                self.sums[name] = self.sums.get(name, 0.0) + value
            self.steps += 1
            self.docs += len(rows)
            self.progress.step(values["loss"], len(rows))
            last = i + 1 == len(batches)
            at_boundary = bool(every) and (self.progress.steps % every == 0 or last)
            if at_boundary:
                self.boundary(trainee, state, self.progress.steps)
            over = self.budget_s is not None and self.clock() - self.start >= self.budget_s
            if self.progress.due() and not (at_boundary or last or over):
                self.progress.emit()  # else the boundary's own line follows
            if over:
                return True
        return False

    def boundary(self, trainee: Trainee, state: LoopState, number: int) -> None:
        """Validate, record and log boundary ``number`` (an epoch, or a step with
        ``validate_every``); keep the weights if it is the best; checkpoint."""
        entry: dict[str, Any] = {self.unit: number}
        entry |= {k: v / max(self.steps, 1) for k, v in self.sums.items()}
        if self.timing == "docs_per_s":
            entry["docs_per_s"] = self.docs / max(self.progress.now - self.last, 1e-9)
        fields = trainee.validate()
        now = self.clock()
        if self.timing == "seconds":
            entry["seconds"] = round(now - self.start, 3)
        entry |= fields
        state.history.append(entry)
        state.epoch, state.elapsed = state.epoch + 1, now - self.start
        self.sums, self.steps, self.docs, self.last = dict.fromkeys(self.sums, 0.0), 0, 0, now
        head = "" if self.validate_every else f", {self.unit} {number}/{self.epochs}"
        self.progress.emit(head + trainee.describe(entry))
        score = entry.get(self.score_key)
        if self.best is not None and self.better(score, state.best_score):
            state.best_epoch, state.best_score = number, score
            trainee.snapshot()
        trainee.checkpoint(state)

    def better(self, score: float | None, best: float | None) -> bool:
        """Whether ``score`` beats the ``best`` so far (ties: by ``self.best``)."""
        if score is None or best is None:
            return True
        return score >= best if self.best == "last" else score > best

    def stop_reason(self, state: LoopState, over_budget: bool) -> str | None:
        """Why the run stops after ``state`` (None: it goes on)."""
        if over_budget:
            return f"time budget of {duration(self.budget_s or 0)} reached"
        waited = state.epoch - state.best_epoch if not self.validate_every else 0
        if self.patience is not None and state.best_score is not None and waited >= self.patience:
            return f"early stop: no better {self.score_name} in {counted(self.patience, 'epoch')}"
        if self.passes >= self.epochs:
            return f"all {counted(self.epochs, 'epoch')}"
        return None


def cpu_weights(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``net``'s weights on the CPU (a best epoch's snapshot)."""
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
