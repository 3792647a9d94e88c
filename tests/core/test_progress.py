"""RateLog: throttled lines with count, rate and time left, driven by a fake clock."""

from __future__ import annotations

import logging

from xmc_core.progress import RateLog


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_logs_only_after_the_interval_with_rate_and_time_left(caplog):
    clock = FakeClock()
    log = logging.getLogger("xmc_core.test_progress")
    progress = RateLog(log, "embedding", total=1000, unit="docs", every_s=30, clock=clock)
    with caplog.at_level(logging.INFO, logger=log.name):
        clock.now += 10
        progress.update(100)  # 10 s: too early
        clock.now += 30
        progress.update(300)  # 40 s, 400 docs: 10 docs/s, 600 left -> 60 s
        clock.now += 5
        progress.update(50)  # 5 s after the last line: too early
        clock.now += 55
        progress.update(550)  # finished: no progress line, done() closes
        progress.done()
    assert [r.getMessage() for r in caplog.records] == [
        "embedding: 400/1,000 docs (40%), 10.0 docs/s, 60 s left",
        "embedding: 1,000/1,000 docs (100%), 10.0 docs/s, 100.0 s",
    ]


def test_short_loops_stay_silent(caplog):
    clock = FakeClock()
    log = logging.getLogger("xmc_core.test_progress")
    progress = RateLog(log, "embedding", total=64, unit="docs", clock=clock)
    with caplog.at_level(logging.INFO, logger=log.name):
        clock.now += 2
        progress.update(64)
        progress.done()
    assert caplog.records == []
