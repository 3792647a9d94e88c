"""RateLog and StepLog: progress lines with count, rate and time left, driven by a fake clock."""

from __future__ import annotations

import logging

from xmc_core.progress import RateLog, StepLog, duration, rate


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


LOG = logging.getLogger("xmc_core.test_progress")


def test_durations_and_rates_for_people():
    assert [duration(s) for s in (0, 4.4, 59.6, 65, 3599, 3600, 7390)] == [
        "0s", "4s", "1m00s", "1m05s", "59m59s", "1h00m", "2h03m",
    ]  # fmt: skip
    assert [rate(r) for r in (0, 0.02934, 0.1, 0.66, 9.94, 10.4, 117.6, 1204.2)] == [
        "0.0", "0.029", "0.1", "0.7", "9.9", "10", "118", "1,204",
    ]  # fmt: skip


def test_logs_only_after_the_interval_with_rate_and_time_left(caplog):
    clock = FakeClock()
    progress = RateLog(LOG, "embedding", total=1000, unit="docs", every_s=30, clock=clock)
    with caplog.at_level(logging.INFO, logger=LOG.name):
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
        "embedding: 400/1,000 docs (40%), 10 docs/s, 1m00s left",
        "embedding: 1,000/1,000 docs (100%), 10 docs/s, done in 1m40s",
    ]


def test_short_loops_stay_silent(caplog):
    clock = FakeClock()
    progress = RateLog(LOG, "embedding", total=64, unit="docs", clock=clock)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        clock.now += 2
        progress.update(64)
        progress.done()
    assert caplog.records == []


def test_step_log_first_step_then_every_interval_with_mean_loss(caplog):
    clock = FakeClock()
    progress = StepLog(LOG, "matcher level 2 (2/3)", total=150, every_s=30, clock=clock)
    lines = []
    with caplog.at_level(logging.INFO, logger=LOG.name):
        for step in range(1, 151):
            clock.now += 2.0  # 2 s per step of 32 docs: 16 docs/s
            progress.step(step / 1000, 32)  # the mean loss over steps a..b is (a + b) / 2000
            if step in (40, 150):  # e.g. an evaluation: a line whether due or not
                progress.emit(", P@1 0.4521")
            elif progress.due():
                progress.emit()
                lines.append(step)
    # after step 1, then 30 s (15 steps) after each line, restarting at the forced one (40)
    assert lines == [1, 16, 31, 55, 70, 85, 100, 115, 130, 145]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:2] == [
        # 149 steps left at 2 s each: 298 s
        "matcher level 2 (2/3): step 1/150 (1%), loss 0.0010, 16 docs/s, 4m58s left",
        "matcher level 2 (2/3): step 16/150 (11%), loss 0.0090, 16 docs/s, 4m28s left",
    ]
    assert messages[3] == (  # steps 32..40 since the line at 31
        "matcher level 2 (2/3): step 40/150 (27%), loss 0.0360, 16 docs/s, 3m40s left, P@1 0.4521"
    )
    assert messages[-1] == (
        "matcher level 2 (2/3): step 150/150 (100%), loss 0.1480, 16 docs/s, done in 5m00s, "
        "P@1 0.4521"
    )


def test_weighted_items_report_the_share_of_the_work(caplog):
    clock = FakeClock()
    progress = RateLog(LOG, "level 3", total=100, unit="nodes", clock=clock, total_work=1000)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        clock.now += 40
        progress.update(80, work=200)  # 80 cheap nodes, a fifth of the work: 160 s left
    assert [r.getMessage() for r in caplog.records] == [
        "level 3: 80/100 nodes (20% of the work), 2.0 nodes/s, 2m40s left"
    ]


def test_step_log_of_a_resumed_loop_paces_its_own_steps_within_the_time_budget(caplog):
    clock = FakeClock()
    resumed = StepLog(LOG, "xml-cnn", total=327, every_s=30, clock=clock, done=109)
    budgeted = StepLog(LOG, "xml-cnn", total=327, every_s=30, clock=clock, budget_s=100.0)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        clock.now += 2.0  # one step in 2 s
        for progress in (resumed, budgeted):
            progress.step(0.5, 32)
            progress.emit()
    assert [r.getMessage() for r in caplog.records] == [
        # 217 steps left at this run's 2 s a step, not at 2 s per 110 steps
        "xml-cnn: step 110/327 (34%), loss 0.5000, 16 docs/s, 7m14s left",
        # 326 steps would take 652 s; the budget leaves 98 s
        "xml-cnn: step 1/327 (0%), loss 0.5000, 16 docs/s, 1m38s left (time budget)",
    ]
