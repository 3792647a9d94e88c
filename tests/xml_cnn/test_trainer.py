"""The XML-CNN training loop: it learns, stops early on a validation split carved from train,
keeps to its time budget, resumes, and is seeded."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.model_helpers import Featurized
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.train import train_in_process
from xmc_core.families.xml_cnn import graph as xml_cnn
from xmc_core.families.xml_cnn import trainer
from xmc_core.families.xml_cnn.checkpoint import load_tensors
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.embeddings import initial_embeddings
from xmc_core.families.xml_cnn.trainer import train_network
from xmc_core.families.xml_cnn.vocab import vocabulary


def test_loss_falls_and_p1_beats_the_frequency_baseline(
    trained_flat: dict, cnn_features: Featurized
) -> None:
    history = trained_flat["network"].history
    assert [h["epoch"] for h in history] == list(range(1, len(history) + 1))
    assert history[-1]["loss"] < 0.9 * history[0]["loss"], history
    counts = np.bincount(cnn_features.train.Y.indices, minlength=cnn_features.train.Y.shape[1])
    top = int(np.argmax(counts))  # every document gets the most frequent training label
    baseline = float((cnn_features.test.Y[:, top].toarray() > 0).mean())
    p1 = trained_flat["evaluation"].values["P@1"]
    assert p1 > baseline + 0.1, (p1, baseline)


def test_the_network_never_sees_the_test_split(
    cnn_dataset: Path, cnn_config: XmcConfig, cnn_features: Featurized,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    seen = {}

    class Seen(Exception):
        pass

    def spy(tokens, Y, init, cfg, out):
        seen.update(n=tokens.n_docs, Y=Y)
        raise Seen

    monkeypatch.setattr(xml_cnn, "train_network", spy)
    with pytest.raises(Seen):
        train_in_process(Corpus(cnn_dataset), cnn_config.model_copy(update={"work_dir": tmp_path}))
    assert seen["n"] == cnn_features.train.X.shape[0] == 300
    assert (seen["Y"] != cnn_features.train.Y).nnz == 0


@pytest.fixture(scope="module")
def problem(cnn_dataset: Path, cnn_features: Featurized) -> tuple:
    corpus = Corpus(cnn_dataset)
    cfg = XmlCnnConfig(
        embedding_init="random", embedding_dim=16, num_filters=8, hidden_dim=16,
        max_length=32, batch_size=32, lr=0.003, threads=1, epochs=3, patience=5,
    )  # fmt: skip
    vocab = vocabulary(corpus, XmcConfig().tokenizer, 5000, 1, cfg.max_length)
    tokens = vocab.ids(corpus.read_split("train", ["text"]).column("text"))
    return tokens, cnn_features.train.Y, initial_embeddings(vocab.words, cfg), cfg


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_tensors(folder / "network.safetensors")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_network_and_resume_ends_the_same(
    problem: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    tokens, Y, init, cfg = problem
    first = train_network(tokens, Y, init, cfg, tmp_path / "a")
    train_network(tokens, Y, init, cfg, tmp_path / "b")
    assert same(weights(tmp_path / "a"), weights(tmp_path / "b"))
    assert len(first.history) == 3 and first.stopped == "all 3 epochs"
    other = train_network(tokens, Y, init, cfg.model_copy(update={"seed": 1}), tmp_path / "s")
    assert not same(weights(first.folder), weights(other.folder))

    save, calls = trainer.CnnTraining.checkpoint, []

    def interrupted(self, *args):
        save(self, *args)
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer.CnnTraining, "checkpoint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_network(tokens, Y, init, cfg, tmp_path / "c")
    assert (tmp_path / ".c.resume" / "state.json").is_file()
    monkeypatch.setattr(trainer.CnnTraining, "checkpoint", save)
    ticks = iter(range(0, 10**6, 31))  # every clock reading 31 s on: a progress line a step
    caplog.clear()  # only the resumed run's lines (an earlier test may leave xmc_core at INFO)
    with caplog.at_level(logging.INFO, logger="xmc_core.families.xml_cnn.trainer"):
        resumed = train_network(tokens, Y, init, cfg, tmp_path / "c", clock=lambda: next(ticks))
    assert "xml-cnn: resumed after epoch 2 from" in caplog.text
    first_line = next(m for m in caplog.messages if m.startswith("xml-cnn: step"))
    # 8 steps an epoch: step 17 of 24 came 31 s (one clock reading) after the loop started:
    # 7 steps left at this run's pace (7 x 31 s), not at 31 s per 17 steps
    assert first_line.startswith("xml-cnn: step 17/24 (71%)") and first_line.endswith(
        ", 3m37s left"
    )
    assert same(weights(resumed.folder), weights(first.folder))
    assert resumed.history[:2] == [{**h, "seconds": resumed.history[i]["seconds"]}
                                   for i, h in enumerate(first.history[:2])]  # fmt: skip
    assert not (tmp_path / ".c.resume").exists()


def test_time_budget_and_early_stopping(
    problem: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens, Y, init, cfg = problem
    ticks = iter(range(0, 10**6, 100))
    budget = cfg.model_copy(update={"time_budget_s": 150.0, "epochs": 50})
    done = train_network(tokens, Y, init, budget, tmp_path / "t", clock=lambda: next(ticks))
    assert len(done.history) == 1 and done.stopped == "time budget of 2m30s reached"
    ticks = iter(range(0, 10**6, 31))
    caplog.clear()  # only this run's lines
    with caplog.at_level(logging.INFO, logger="xmc_core.families.xml_cnn.trainer"):
        train_network(
            tokens, Y, init, budget.model_copy(update={"time_budget_s": 200.0}),
            tmp_path / "b", clock=lambda: next(ticks),
        )  # fmt: skip
    first_line = next(m for m in caplog.messages if m.startswith("xml-cnn: step"))
    # 399 steps at 31 s each would take hours: the budget leaves 200 - 31 s
    assert first_line.startswith("xml-cnn: step 1/400 (0%)")
    assert first_line.endswith(", 2m49s left (time budget)"), first_line
    never = cfg.model_copy(update={"lr": 1e-9, "epochs": 50, "patience": 2})
    stopped = train_network(tokens, Y, init, never, tmp_path / "p")
    assert stopped.stopped == "early stop: no better val P@1 in 2 epochs"
    assert len(stopped.history) == stopped.best_epoch + 2


def test_progress_lines(problem: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokens, Y, init, cfg = problem
    ticks = iter(range(0, 10**6, 31))  # every step is 31 s: a line each (none at an epoch's end)
    with caplog.at_level(logging.INFO, logger="xmc_core.families.xml_cnn.trainer"):
        train_network(tokens, Y, init, cfg, tmp_path / "t", clock=lambda: next(ticks))
    lines = [m for m in caplog.messages if m.startswith("xml-cnn: step")]
    ends = [m for m in lines if ", epoch " in m]
    assert len(ends) == 3 and len(lines) == 3 * 8  # 270 training docs: 8 steps of 32 an epoch
    assert all(" loss 0.0000," not in m for m in ends)
    assert ends[0].startswith("xml-cnn: step 8/24 (33%), loss 0.")
    assert ", epoch 1/3, val P@1 0." in ends[0]
