"""Loss, schedule, head storage, bootstrapping (eq. 11) and the fine-tuning loop."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xmc_core.config import MatcherConfig
from xmc_core.errors import ArtifactError
from xmc_core.transformer.encoder import TextEncoder, load_tokenizer
from xmc_core.transformer.head import LevelHead, bootstrap_head
from xmc_core.transformer.shortlist import LevelProblem
from xmc_core.transformer.tokens import tokenize_texts
from xmc_core.transformer.trainer import fit_level, lr_factor, precision_at, squared_hinge


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
