"""Progress lines for long loops: count, rate and time left, at least every
:data:`PROGRESS_EVERY_S` seconds.

Library code logs through :mod:`logging`, so the same lines reach a terminal, a log file and the
Prefect UI (the tasks forward ``xmc_core`` loggers)::

    progress = RateLog(log, "embedding", total=len(texts), unit="docs")
    for batch in batches:
        ...
        progress.update(len(batch))
    progress.done()

A training loop uses :class:`StepLog` (steps, running loss, docs/s, time left). Both read a
monotonic clock (``time.monotonic``), injectable for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

PROGRESS_EVERY_S = 30.0
"""The longest a long loop stays silent: a progress line at least this often (seconds)."""

Clock = Callable[[], float]


def duration(seconds: float) -> str:
    """A duration for people: ``42s``, ``1m05s``, ``2h03m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def byte_size(n: int) -> str:
    """``n`` bytes for people: B, KB, MB or GB (powers of 1000, 1 decimal above bytes)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def rate(per_s: float) -> str:
    """A rate rounded for people: ``1,204``, ``118``, ``7.5``, ``0.029`` (two significant
    digits below 0.1)."""
    if per_s >= 10:
        return f"{per_s:,.0f}"
    return f"{per_s:.1f}" if per_s >= 0.1 or per_s == 0 else f"{per_s:.2g}"


class RateLog:
    """Logs ``what: i/total unit (pct), rate unit/s, time left`` when ``every_s`` seconds have
    passed since the last line (the first after ``every_s``: short loops stay silent).

    With ``total_work``, items of unequal cost: the percentage and the time left follow the
    work done (``update(n, work)``), reported as ``(pct of the work)``.
    """

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        total: int,
        unit: str = "items",
        every_s: float = PROGRESS_EVERY_S,
        clock: Clock = time.monotonic,
        total_work: float | None = None,
    ) -> None:
        self.log, self.what, self.total, self.unit = log, what, total, unit
        self.every_s, self.clock, self.total_work = every_s, clock, total_work
        self.count, self.work = 0, 0.0
        self.start = self.last = clock()

    def update(self, n: int, work: float = 0.0) -> None:
        """Count ``n`` more items (costing ``work``); log a line if the last one is older than
        ``every_s``."""
        self.count += n
        self.work += work
        now = self.clock()
        if now - self.last >= self.every_s and self.count < self.total:
            self.last = now
            self.log.info("%s", self.line(now))

    def done(self) -> None:
        """One closing line, but only when the loop was long enough to have logged progress."""
        now = self.clock()
        if now - self.start >= self.every_s:
            self.log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        if self.total_work:
            done, of_work = self.work / self.total_work, " of the work"
        else:
            done, of_work = (self.count / self.total if self.total else 1.0), ""
        text = f"{self.what}: {self.count:,}/{self.total:,} {self.unit} "
        text += f"({100 * done:.0f}%{of_work}), {rate(self.count / elapsed)} {self.unit}/s"
        if self.count < self.total and 0 < done < 1:
            return text + f", {duration(elapsed * (1 - done) / done)} left"
        return text + f", done in {duration(elapsed)}"


class StepLog:
    """Progress of a training loop of ``total`` steps: ``what: step i/total (pct), loss L, R
    docs/s, T left``.

    :meth:`step` counts one step (its loss and documents) and returns the time; :meth:`due`
    says whether a line is owed (after the first step, then once ``every_s`` has passed since
    the last line); :meth:`emit` logs one (also when not due, e.g. with validation scores) and
    starts the next interval. The loss is the mean over the steps since the last line; the rate
    and the time left come from everything since the start (evaluation pauses included).

    ``done``: steps an earlier run already did (a resumed loop starts counting there; its rate
    and time left come from its own steps); ``budget_s``: the seconds the loop may still run (a
    time budget, less what a resumed run spent): the time left never exceeds what it leaves.
    """

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        total: int,
        every_s: float = PROGRESS_EVERY_S,
        clock: Clock = time.monotonic,
        done: int = 0,
        budget_s: float | None = None,
    ) -> None:
        self.log, self.what, self.total = log, what, total
        self.every_s, self.clock, self.budget_s = every_s, clock, budget_s
        self.steps, self.resumed_at, self.docs = done, done, 0
        self.loss_sum, self.loss_steps = 0.0, 0
        self.start = self.now = clock()
        self.last: float | None = None

    def step(self, loss: float, docs: int) -> float:
        """Count one step of ``docs`` documents with mean loss ``loss``; returns the time."""
        self.steps += 1
        self.docs += docs
        self.loss_sum += loss
        self.loss_steps += 1
        self.now = self.clock()
        return self.now

    def due(self) -> bool:
        """A line is owed: the first step's, or ``every_s`` after the last line."""
        return self.last is None or self.now - self.last >= self.every_s

    def emit(self, extra: str = "") -> None:
        """Log the line (``extra`` appended, e.g. ``", P@1 0.4521"``) and restart the loss."""
        self.log.info("%s%s", self.line(), extra)
        self.loss_sum, self.loss_steps = 0.0, 0
        self.last = self.now

    def line(self) -> str:
        elapsed = max(self.now - self.start, 1e-9)
        loss = self.loss_sum / max(self.loss_steps, 1)
        pct = 100.0 * self.steps / self.total if self.total else 100.0
        text = f"{self.what}: step {self.steps}/{self.total} ({pct:.0f}%), loss {loss:.4f}, "
        text += f"{rate(self.docs / elapsed)} docs/s"
        if self.steps < self.total:
            return text + f", {self.time_left(elapsed)}"
        return text + f", done in {duration(elapsed)}"

    def time_left(self, elapsed: float) -> str:
        """``3m05s left``: the steps left at this run's pace, or what the time budget leaves
        if that is less (``1m38s left (time budget)``)."""
        left = (self.total - self.steps) * elapsed / max(self.steps - self.resumed_at, 1)
        if self.budget_s is not None and self.budget_s - elapsed < left:
            return f"{duration(max(self.budget_s - elapsed, 0.0))} left (time budget)"
        return f"{duration(left)} left"
