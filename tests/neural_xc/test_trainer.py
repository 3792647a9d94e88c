"""NeuralXC's training: the loss falls and the test P@1 beats the label-frequency baseline, the
validation split is a seeded part of train, progress is logged, the time budget holds, and
the memory check comes before any training."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import PredictConfig
from xmc_core.errors import InputError
from xmc_core.families.neural_xc import ranker as ranker_module
from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.neural_xc.ranker import NeuralXcRanker
from xmc_core.families.neural_xc.trainer import train_network

SMALL = NeuralXcConfig(
    input_hidden=[16], input_code=8, label_hidden=[8], label_code=4, regressor_hidden=[8],
    batch_size=8, epochs=2, threads=1, label_prior_bias=True,
)  # fmt: skip


def test_loss_falls_and_p1_beats_the_frequency_baseline(trained: dict) -> None:
    history = trained["network"].record_.history
    assert [h["epoch"] for h in history] == list(range(1, len(history) + 1))
    assert history[-1]["loss"] < 0.9 * history[0]["loss"], history
    assert history[-1]["bce"] < history[0]["bce"]
    Y, Y_test = trained["train"].Y, trained["test"].Y
    top = int(np.argmax(np.bincount(Y.indices, minlength=Y.shape[1])))
    baseline = float((Y_test[:, top].toarray() > 0).mean())  # every document: the top label
    p1 = trained["evaluation"].values["P@1"]
    assert p1 > baseline + 0.1, (p1, baseline)


def toy_problem(n: int = 60, d: int = 12, L: int = 5) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(0)
    Y = sp.csr_matrix((rng.random((n, L)) < 0.3).astype(np.float32))
    X = sp.csr_matrix(np.hstack([Y.toarray(), (rng.random((n, d - L)) < 0.3)]).astype(np.float32))
    return X, Y


def test_progress_is_logged_at_least_every_30_seconds(caplog: pytest.LogCaptureFixture) -> None:
    X, Y = toy_problem()
    ticks = itertools.count(0.0, 31.0)  # every clock reading 31 s after the last
    with caplog.at_level(logging.INFO, logger="xmc_core.families.neural_xc.trainer"):
        _, record = train_network(X, Y, SMALL, clock=lambda: next(ticks))
    steps = [r.getMessage() for r in caplog.records if ": step " in r.getMessage()]
    n_batches = 2 * -(-(60 - 6) // 8)  # 2 epochs of 54 training documents
    assert len(steps) == n_batches, steps  # one line a step: each is 31 s after the last
    assert "docs/s" in steps[0] and "left" in steps[0]
    last = steps[-1]
    assert "epoch 2/2 (input_mse" in last and "bce" in last and "val P@1" in last
    assert record.stopped == "all 2 epochs" and len(record.history) == 2


def test_the_time_budget_stops_training() -> None:
    X, Y = toy_problem()
    ticks = itertools.count(0.0, 10.0)
    cfg = SMALL.model_copy(update={"epochs": 50, "time_budget_s": 95.0})
    _, record = train_network(X, Y, cfg, clock=lambda: next(ticks))
    assert record.stopped == "time budget of 1m35s reached" and len(record.history) == 1


def test_the_same_seed_gives_the_same_network() -> None:
    X, Y = toy_problem()
    a, b = (train_network(X, Y, SMALL)[0].state_dict() for _ in range(2))
    c = train_network(X, Y, SMALL.model_copy(update={"seed": 1}))[0].state_dict()
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    assert not all(np.array_equal(a[k].numpy(), c[k].numpy()) for k in a)


def test_memory_is_checked_before_any_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object) -> None:
        raise AssertionError("trained although over the memory limit")

    monkeypatch.setattr(ranker_module, "train_network", never)
    X, Y = toy_problem()
    cfg = SMALL.model_copy(update={"memory_limit_mb": 0.01})
    with pytest.raises(InputError, match=r"12 input features \(12 used.*5 labels.*"
                       r"neural_xc\.memory_limit_mb=0"):  # fmt: skip
        NeuralXcRanker(cfg, PredictConfig()).fit(X, Y)
