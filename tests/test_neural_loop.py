"""The one training loop of the torch families: progress lines at least every 30 s, the time
budget (with a resumed run's offset), the best by a validation score with either tie rule,
patience, validation every N steps, the history and why it stopped."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from xmc_core.neural_loop import LoopState, TrainingLoop

log = logging.getLogger("xmc_core.test_loop")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A trainee of ``steps`` batches of 8 documents an epoch, each step ``tick`` seconds and
    of loss ``step number``, with the given validation scores in turn."""

    def __init__(self, clock: FakeClock, steps: int, scores: list[float | None], tick: float):
        self.clock, self.n_steps, self.scores, self.tick = clock, steps, iter(scores), tick
        self.epochs: list[int] = []
        self.snapshots: list[int] = []
        self.checkpoints: list[int] = []
        self.steps = 0

    def batches(self, epoch: int) -> list[np.ndarray]:
        self.epochs.append(epoch)
        return [np.arange(8) for _ in range(self.n_steps)]

    def step(self, rows: np.ndarray) -> float:
        self.clock.now += self.tick
        self.steps += 1
        return float(self.steps)

    def validate(self) -> dict[str, Any]:
        return {"val_P@1": next(self.scores)}

    def describe(self, entry: dict[str, Any]) -> str:
        p1 = entry["val_P@1"]
        return "" if p1 is None else f", val {p1:.4f}"

    def snapshot(self) -> None:
        self.snapshots.append(self.steps)

    def checkpoint(self, state: LoopState) -> None:
        self.checkpoints.append(state.epoch)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name]


def test_progress_every_30_s_budget_and_the_first_best(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    trainee = Scripted(clock, 4, [0.5, 0.7, 0.7, 0.6, 0.9], tick=10.0)
    loop = TrainingLoop(log, "test", 5, 4, budget_s=100.0, clock=clock)
    with caplog.at_level(logging.INFO, logger=log.name):
        state = loop.run(trainee)
    lines = messages(caplog)
    assert trainee.epochs == [0, 1, 2]  # the budget ran out at step 10, in epoch 3
    assert trainee.snapshots == [4, 8]  # epoch 3 ties epoch 2: the first is kept
    assert state.best_epoch == 2 and state.best_score == 0.7 and trainee.checkpoints == [1, 2, 3]
    assert state.stopped == "time budget of 1m40s reached"
    assert [(h["epoch"], h["loss"], h["seconds"]) for h in state.history] == [
        (1, 2.5, 40.0), (2, 6.5, 80.0), (3, 9.5, 100.0),
    ]  # fmt: skip
    assert lines[0] == "test: step 1/20 (5%), loss 1.0000, 0.8 docs/s, 1m30s left (time budget)"
    assert lines[1].startswith("test: step 4/20 (20%), loss 3.0000,")  # since the last line
    assert lines[1].endswith(", epoch 1/5, val 0.5000")
    assert lines[-2].startswith("test: step 10/20 (50%), loss 9.5000,")  # no line due at 10:
    assert lines[-2].endswith(", epoch 3/5, val 0.7000")  # the epoch's line alone
    assert sum(": step " in line for line in lines) == 5  # steps 1, 4, 7, 8, 10
    assert lines[-1] == "test: time budget of 1m40s reached; best epoch 2"
    assert state.record(meta_labels=4)["best_epoch"] == 2


def test_patience_with_either_tie_rule() -> None:
    scores = [0.5, 0.6, 0.6, 0.6, 0.4, 0.3, 0.2]
    first = TrainingLoop(log, "t", 7, 1, patience=2, best="first", clock=FakeClock())
    state = first.run(Scripted(FakeClock(), 1, scores, 1.0))
    assert state.best_epoch == 2 and len(state.history) == 4  # epochs 3, 4 tie: no better
    assert state.stopped == "early stop: no better val P@1 in 2 epochs"
    last = TrainingLoop(log, "t", 7, 1, patience=2, best="last", clock=FakeClock())
    trainee = Scripted(FakeClock(), 1, scores, 1.0)
    state = last.run(trainee)
    assert state.best_epoch == 4 and len(state.history) == 6  # ties go to the later epoch
    assert trainee.snapshots == [1, 2, 3, 4]
    unscored = TrainingLoop(log, "t", 3, 1, patience=1, clock=FakeClock())
    state = unscored.run(Scripted(FakeClock(), 1, [None] * 3, 1.0))
    assert state.best_epoch == 3 and state.stopped == "all 3 epochs"  # no score: no patience


def test_validation_every_n_steps_records_the_rate(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    trainee = Scripted(clock, 7, [0.1, 0.2, 0.3, 0.4], tick=2.0)
    loop = TrainingLoop(log, "level", 1, 7, best=None, validate_every=3, timing="docs_per_s",
                        clock=clock)  # fmt: skip
    with caplog.at_level(logging.INFO, logger=log.name):
        state = loop.run(trainee)
    assert [(h["step"], h["loss"], h["docs_per_s"]) for h in state.history] == [
        (3, 2.0, 4.0), (6, 5.0, 4.0), (7, 7.0, 4.0),
    ]  # 8 docs every 2 s; the last boundary is the last step  # fmt: skip
    assert all("seconds" not in h for h in state.history) and trainee.snapshots == []
    assert [line.split(",")[0] for line in messages(caplog)] == [
        "level: step 1/7 (14%)", "level: step 3/7 (43%)", "level: step 6/7 (86%)",
        "level: step 7/7 (100%)",
    ]  # no closing line without a best to name  # fmt: skip


def test_a_resumed_run_counts_on_from_its_state(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    clock.now = 1000.0
    resumed = LoopState(epoch=2, history=[{"epoch": 1}, {"epoch": 2}], best_epoch=2,
                        best_score=0.5, elapsed=60.0)  # fmt: skip
    trainee = Scripted(clock, 4, [0.4, 0.6], tick=10.0)
    loop = TrainingLoop(log, "cnn", 4, 4, budget_s=100.0, patience=5, clock=clock)
    with caplog.at_level(logging.INFO, logger=log.name):
        state = loop.run(trainee, resumed)
    assert trainee.epochs == [2]  # epoch 3 (from 0), where 60 + 40 s end the budget
    assert [h["epoch"] for h in state.history] == [1, 2, 3]
    assert state.history[-1]["seconds"] == 100.0 and state.elapsed == 100.0
    assert state.stopped == "time budget of 1m40s reached" and state.best_epoch == 2
    # step 9 of 16, 10 s after the resumed start: its own pace (7 steps x 10 s) exceeds the
    # 40 s the budget leaves
    first = messages(caplog)[0]
    assert first == "cnn: step 9/16 (56%), loss 1.0000, 0.8 docs/s, 30s left (time budget)"
