"""Throttled progress lines for long loops: count, rate and time left, at most every few seconds.

Library code logs through :mod:`logging`, so the same lines reach a terminal, a log file and the
Prefect UI (the tasks forward ``xmc_core`` loggers)::

    progress = RateLog(log, "embedding", total=len(texts), unit="docs")
    for batch in batches:
        ...
        progress.update(len(batch))
    progress.done()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLog:
    """Logs ``what: i/total unit (pct), rate unit/s, ETA`` when ``every_s`` seconds have passed."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        total: int,
        unit: str = "items",
        every_s: float = 30.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.log, self.what, self.total, self.unit = log, what, total, unit
        self.every_s, self.clock = every_s, clock
        self.count = 0
        self.start = self.last = clock()

    def update(self, n: int) -> None:
        """Count ``n`` more; log a line if the last one is older than ``every_s``."""
        self.count += n
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
        rate = self.count / elapsed
        pct = 100.0 * self.count / self.total if self.total else 100.0
        text = f"{self.what}: {self.count:,}/{self.total:,} {self.unit} ({pct:.0f}%), "
        text += f"{rate:,.1f} {self.unit}/s"
        if self.count < self.total and rate > 0:
            text += f", {(self.total - self.count) / rate:,.0f} s left"
        else:
            text += f", {elapsed:,.1f} s"
        return text
