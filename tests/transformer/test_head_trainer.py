"""Loss, schedule, head storage, bootstrapping (eq. 11) and the fine-tuning loop."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xmc_core.config import MatcherConfig
from xmc_core.errors import ArtifactError
from xmc_core.transformer import trainer
from xmc_core.transformer.encoder import TextEncoder, load_tokenizer
from xmc_core.transformer.head import LevelHead, bootstrap_head
from xmc_core.transformer.shortlist import LevelProblem
from xmc_core.transformer.tokens import tokenize_texts
from xmc_core.transformer.trainer import (
    batches,
    fit_level,
    lr_factor,
    precision_at,
    squared_hinge,
)


def test_squared_hinge_by_hand():
    s = torch.tensor([2.0, 0.5, -1.0, 0.5])
    y = torch.tensor([1.0, 1.0, 0.0, 0.0])
    w = torch.tensor([1.0, 2.0, 3.0, 0.5])
    # margins 1 - s(2y - 1): -1 -> 0, 0.5 -> 0.25 * 2, 0 -> 0, 1.5 -> 2.25 * 0.5
    assert float(squared_hinge(s, y, w)) == pytest.approx(0.5 + 1.125)


def test_warmup_then_linear_decay():
    assert [lr_factor(s, 10, 2) for s in (0, 1, 2, 6, 10)] == [0.5, 1.0, 1.0, 0.5, 0.0]
    assert lr_factor(0, 5, 0) == 1.0


def test_head_save_load_and_corruption(tmp_path):
    head = LevelHead(5, 3).set_arrays(np.arange(15, dtype=np.float32).reshape(5, 3), np.ones(5))
    head.save(tmp_path / "head.safetensors")
    W, b = LevelHead.load(tmp_path / "head.safetensors").arrays()
    assert np.array_equal(W, head.arrays()[0]) and np.array_equal(b, np.ones(5))
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 20)
    with pytest.raises(ArtifactError, match=r"bad\.safetensors"):
        LevelHead.load(tmp_path / "bad.safetensors")


def toy_clusters(n_per: int = 40, K: int = 8, h: int = 16, seed: int = 0):
    """Unit embeddings around K random centres; doc i belongs to cluster i % K."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(K, h))
    label = np.arange(n_per * K) % K
    E = centres[label] + 0.3 * rng.normal(size=(label.size, h))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    Y = sp.csr_matrix((np.ones(label.size), (np.arange(label.size), label)), shape=(label.size, K))
    return E.astype(np.float32), Y.astype(np.float32)


def test_bootstrapped_head_beats_random_init():
    E, Y = toy_clusters()
    C = sp.csr_matrix(np.ones((Y.shape[1], 1), dtype=np.float32))
    train, held = np.arange(0, 160), np.arange(160, 320)  # 20 documents per cluster each
    W, b = bootstrap_head(E[train], LevelProblem(Y[train], Y[train], None, 1.0), C)
    boot = LevelHead(8, 16).set_arrays(W, b)
    torch.manual_seed(0)
    rand = LevelHead(8, 16).set_arrays(np.random.default_rng(1).normal(size=(8, 16)), np.zeros(8))
    p_boot = precision_at(E[held], boot, LevelProblem(Y[held], Y, None, 1.0), np.arange(160))
    p_rand = precision_at(E[held], rand, LevelProblem(Y[held], Y, None, 1.0), np.arange(160))
    assert p_boot["P@1"] > 0.9 > 0.4 > p_rand["P@1"]


def test_loss_decreases_over_a_few_steps(tx_encoder_dir, tx_config):
    texts = [f"topic {i % 4} words alpha beta {i}" for i in range(16)]
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), texts, 16)
    label = np.arange(16) % 4
    Y = sp.csr_matrix((np.ones(16), (np.arange(16), label)), shape=(16, 4)).astype(np.float32)
    torch.manual_seed(0)
    encoder = TextEncoder.load(tx_config.encoder)
    head = LevelHead(4, encoder.hidden_size)
    cfg = MatcherConfig(
        steps_per_level=12, batch_size=16, eval_every=1, head_lr=0.05, warmup_fraction=0.0,
        eval_docs=0, device="cpu",
    )  # fmt: skip
    history = fit_level(
        encoder, head, LevelProblem(Y, Y, None, 1.0), tokens, np.arange(16), np.array([], int),
        cfg, torch.device("cpu"), level=0,
    )  # fmt: skip
    losses = [r["loss"] for r in history.records]
    assert len(losses) == 12 and history.steps == 12
    assert losses[0] == pytest.approx(4.0)  # zero head: every pair has margin 1, 4 pairs/doc
    assert losses[-1] < 0.8 * losses[0]
    assert np.mean(losses[-3:]) < np.mean(losses[3:6]) < np.mean(losses[:3])
    assert all(np.isfinite(losses))


class TickingClock:
    """A fake monotonic clock: every call is ``tick`` seconds after the previous one."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_progress_lines_every_30_s_whatever_eval_every(
    tx_encoder_dir, tx_config, caplog, monkeypatch
):
    texts = [f"topic {i % 4} words alpha beta {i}" for i in range(16)]
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), texts, 16)
    Y = sp.csr_matrix((np.ones(16), (np.arange(16), np.arange(16) % 4)), shape=(16, 4))
    Y = Y.astype(np.float32)
    torch.manual_seed(0)
    encoder = TextEncoder.load(tx_config.encoder)
    cfg = MatcherConfig(steps_per_level=8, batch_size=6, eval_every=1000, eval_docs=0, device="cpu")
    losses: list[float] = []
    real_step = trainer.LevelLoop.step

    def recording_step(loop: trainer.LevelLoop, rows: np.ndarray) -> float:
        losses.append(real_step(loop, rows))
        return losses[-1]

    monkeypatch.setattr(trainer.LevelLoop, "step", recording_step)
    with caplog.at_level(logging.INFO, logger=trainer.log.name):
        history = fit_level(
            encoder, LevelHead(4, encoder.hidden_size), LevelProblem(Y, Y, None, 1.0), tokens,
            np.arange(16), np.array([], int), cfg, torch.device("cpu"), level=1,
            what="matcher level 1 (1/2)", clock=TickingClock(12.0),
        )  # fmt: skip
    # one clock reading per step, 12 s apart: lines after step 1, then 30 s after each line
    # (steps 4 and 7), and the last step's evaluation; 6 docs / 12 s = 0.5 docs/s
    assert [r.getMessage() for r in caplog.records] == [
        "matcher level 1 (1/2): P@k validation skipped: matcher.eval_docs=0",
        f"matcher level 1 (1/2): step 1/8 (12%), loss {losses[0]:.4f}, 0.5 docs/s, 1m24s left",
        f"matcher level 1 (1/2): step 4/8 (50%), loss {np.mean(losses[1:4]):.4f}, 0.5 docs/s, "
        "48s left",
        f"matcher level 1 (1/2): step 7/8 (88%), loss {np.mean(losses[4:7]):.4f}, 0.5 docs/s, "
        "12s left",
        f"matcher level 1 (1/2): step 8/8 (100%), loss {losses[7]:.4f}, 0.5 docs/s, done in 1m36s",
    ]
    assert len(losses) == 8 and losses[0] == pytest.approx(4.0)  # zero head: margin 1, 4 pairs
    assert history.records[0]["loss"] == pytest.approx(np.mean(losses))  # since the last eval


def test_evaluations_log_their_p_at_k_in_the_progress_line(tx_encoder_dir, tx_config, caplog):
    texts = [f"topic {i % 4} words alpha beta {i}" for i in range(24)]
    tokens = tokenize_texts(load_tokenizer(tx_encoder_dir), texts, 16)
    Y = sp.csr_matrix((np.ones(24), (np.arange(24), np.arange(24) % 4)), shape=(24, 4))
    Y = Y.astype(np.float32)
    torch.manual_seed(0)
    encoder = TextEncoder.load(tx_config.encoder)
    cfg = MatcherConfig(steps_per_level=4, batch_size=8, eval_every=2, device="cpu")
    with caplog.at_level(logging.INFO, logger=trainer.log.name):
        history = fit_level(
            encoder, LevelHead(4, encoder.hidden_size), LevelProblem(Y, Y, None, 1.0), tokens,
            np.arange(16), np.arange(16, 24), cfg, torch.device("cpu"), level=0,
        )  # fmt: skip
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(",")[0] for line in lines] == [
        "matcher level 0: step 1/4 (25%)", "matcher level 0: step 2/4 (50%)",
        "matcher level 0: step 4/4 (100%)",
    ]  # fmt: skip
    for line, record in zip(lines[1:], history.records, strict=True):
        assert line.endswith(
            f", P@1 {record['P@1']:.4f}, P@3 {record['P@3']:.4f}, P@5 {record['P@5']:.4f}"
        )
    assert "P@" not in lines[0]


def test_pooled_batches_pad_less_cover_each_pass_and_repeat_with_the_seed():
    rows = np.arange(0, 200, 2)  # 100 training rows
    lengths = np.zeros(200, dtype=np.int32)
    lengths[rows] = np.random.default_rng(5).integers(1, 129, size=100)
    pooled = batches(rows, 10, 0, 1, lengths, pool_batches=5)
    one_pass = [next(pooled) for _ in range(10)]
    assert sorted(np.concatenate(one_pass).tolist()) == rows.tolist()
    plain = batches(rows, 10, 0, 1)
    plain_pass = [next(plain) for _ in range(10)]

    def width(bs: list[np.ndarray]) -> int:  # padded tokens per document, summed over batches
        return sum(int(lengths[b].max()) for b in bs)

    assert width(one_pass) < 0.8 * width(plain_pass)
    again = batches(rows, 10, 0, 1, lengths, pool_batches=5)
    assert all(np.array_equal(a, next(again)) for a in one_pass)
    unpooled = batches(rows, 10, 0, 1, lengths, pool_batches=0)  # the plain batches
    assert all(np.array_equal(a, next(unpooled)) for a in plain_pass)
