"""The epochs of an Astec training loop: progress lines at least every 30 s, the time budget,
the best epoch."""

from __future__ import annotations

import logging

import pytest

from xmc_core.families.astec.loop import Epochs


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_every_30_s_budget_and_best_epoch(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    epochs = Epochs("astec test", 5, 4, budget_s=100.0, clock=clock)
    scores = iter([0.5, 0.7, 0.7, 0.6, 0.9])
    best = []
    with caplog.at_level(logging.INFO, logger="xmc_core.families.astec.loop"):
        for _ in epochs:
            for _step in range(4):
                clock.now += 10.0
                epochs.step(1.0, 8)
                if epochs.over_budget:
                    break
            if epochs.end_epoch(next(scores)):
                best.append(epochs.epoch)
    lines = [r.getMessage() for r in caplog.records]
    assert best == [1, 2]  # epoch 3 ties epoch 2: the first is kept
    assert epochs.stopped == "time budget of 1m40s reached" and epochs.epoch == 3
    assert [h["epoch"] for h in epochs.history] == [1, 2, 3]
    assert any("step 1/20" in line for line in lines)  # the first step's line
    assert any("step 4/20" in line and "epoch 1/5, val 0.5000" in line for line in lines)
    assert sum("step" in line for line in lines) >= 100 / 30  # at least one per 30 s
    assert lines[-1] == "astec test: time budget of 1m40s reached; best epoch 2"
    assert epochs.record(meta_labels=4)["best_epoch"] == 2
