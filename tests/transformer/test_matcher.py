"""Matcher levels: checkpoints, their contents, resume after a failure, corruption."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import xmc_core.transformer.matcher as matcher_mod
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError
from xmc_core.families.xr_transformer.graph import tokenize
from xmc_core.linear.tree import LabelTree
from xmc_core.transformer.matcher import (
    MatcherCheckpoint,
    bootstrap_rows,
    matcher_rows,
    train_matcher,
    train_matcher_level,
)
from xmc_core.transformer.shortlist import matcher_levels
from xmc_core.transformer.tokens import TokenizedTexts


@pytest.fixture(scope="module")
def inputs(tx_dataset, tx_config, tx_features):
    corpus = Corpus(tx_dataset)
    tokens = TokenizedTexts.concat(
        [tokenize(corpus, ref, tx_config.encoder) for ref in corpus.partitions("train")]
    )
    tree = LabelTree.build(tx_features.label_features.z, tx_config.tree)
    return tokens, tx_features.train.Y, tree


def test_rows_hold_out_and_subsample(tx_config):
    train, val = matcher_rows(1000, tx_config.matcher.model_copy(update={"train_docs": 300}))
    assert len(val) == 40 and len(train) == 300 and not np.intersect1d(train, val).size
    again = matcher_rows(1000, tx_config.matcher.model_copy(update={"train_docs": 300}))
    assert np.array_equal(again[0], train)


def test_bootstrap_rows_subsample_the_matcher_documents(tx_config):
    rows = np.arange(0, 200, 2, dtype=np.int64)
    every = tx_config.matcher.model_copy(update={"bootstrap_docs": None})
    assert np.array_equal(bootstrap_rows(rows, every), rows)
    assert np.array_equal(
        bootstrap_rows(rows, every.model_copy(update={"bootstrap_docs": 500})), rows
    )
    some = every.model_copy(update={"bootstrap_docs": 30})
    picked = bootstrap_rows(rows, some)
    assert len(picked) == 30 and np.all(np.diff(picked) > 0) and np.isin(picked, rows).all()
    assert np.array_equal(bootstrap_rows(rows, some), picked)


def test_first_level_bootstraps_on_bootstrap_docs_only(tmp_path, monkeypatch, inputs, tx_config):
    tokens, Y, tree = inputs
    embedded: list[int] = []
    real = matcher_mod._embed

    def counting(encoder, toks, rows, *args):
        embedded.append(len(rows))
        return real(encoder, toks, rows, *args)

    monkeypatch.setattr(matcher_mod, "_embed", counting)
    cfg = tx_config.matcher.model_copy(update={"steps_per_level": 0, "bootstrap_docs": 7})
    level = matcher_levels(tree, cfg)[0]
    ckpt = train_matcher_level(tokens, Y, tree, level, None, tx_config.encoder, cfg, tmp_path)
    train, val = matcher_rows(tokens.n_docs, cfg)
    assert embedded == [7, len(train) + len(val)]  # the bootstrap, then the level's documents
    W, _ = ckpt.head().arrays()
    assert np.abs(W).sum() > 0  # the head was fitted, not left at zero


def test_levels_checkpoint_and_resume_after_failure(
    tmp_path, monkeypatch, caplog, inputs, tx_config
):
    tokens, Y, tree = inputs
    levels = matcher_levels(tree, tx_config.matcher)
    assert len(levels) == 2, tree.level_sizes()
    calls: list[int] = []
    real = matcher_mod.fit_level

    def failing_at_second(*args, **kwargs):
        calls.append(kwargs["level"] if "level" in kwargs else args[-1])
        if calls[-1] == levels[1]:
            raise RuntimeError("simulated crash at matcher level 2")
        return real(*args, **kwargs)

    monkeypatch.setattr(matcher_mod, "fit_level", failing_at_second)
    root = tmp_path / "ckpt"
    with pytest.raises(RuntimeError, match="simulated crash"):
        train_matcher(tokens, Y, tree, tx_config.encoder, tx_config.matcher, root)
    assert calls == levels
    assert sorted(p.name for p in root.iterdir()) == [f"level-{levels[0]}"]  # no partial level
    first_meta = root / f"level-{levels[0]}" / "meta.json"
    stamp = first_meta.stat().st_mtime_ns

    calls.clear()
    monkeypatch.setattr(
        matcher_mod, "fit_level", lambda *a, **k: calls.append(a[-1]) or real(*a, **k)
    )
    caplog.clear()  # the first run's lines, captured when another test set xmc_core to INFO
    with caplog.at_level(logging.INFO, logger=matcher_mod.log.name):
        ckpts = train_matcher(tokens, Y, tree, tx_config.encoder, tx_config.matcher, root)
    assert calls == [levels[1]]  # level 1 was reused, only level 2 trained
    sizes = tree.level_sizes()
    assert levels == [0, 1] and sizes[2] > 16, sizes  # matcher.max_clusters=16
    messages = [r.getMessage() for r in caplog.records if r.name == matcher_mod.log.name]
    assert messages[:3] == [
        f"matcher: level 2 ({sizes[2]} clusters) skipped: more than matcher.max_clusters=16",
        f"matcher level 0 (1/2): resumed from checkpoint {root / 'level-0'}",
        f"matcher level 1 (2/2): {sizes[1]} clusters, 6 steps of 8 docs on cpu",
    ]
    assert messages[-1].startswith("matcher level 1 (2/2): done in ")
    assert first_meta.stat().st_mtime_ns == stamp
    assert [(c.level, c.n_clusters) for c in ckpts] == [(t, tree.level_sizes()[t]) for t in levels]
    rows, E, P = ckpts[-1].state(tokens.n_docs)
    assert np.allclose(np.linalg.norm(E[rows], axis=1), 1.0, atol=1e-4)
    assert P.shape == (tokens.n_docs, tree.level_sizes()[levels[1]])
    assert np.all(np.diff(P.indptr)[rows] == tx_config.matcher.beam_size)
    encoder, tokenizer = ckpts[-1].encoder()
    assert encoder.cfg.max_length == tx_config.encoder.max_length and tokenizer.pad_token_id == 0


def test_corrupt_checkpoint_fails_clearly(tmp_path, inputs, tx_config):
    tokens, Y, tree = inputs
    cfg = tx_config.matcher.model_copy(update={"steps_per_level": 1, "bootstrap": False})
    ckpt = train_matcher(tokens, Y, tree, tx_config.encoder, cfg, tmp_path / "c")[0]
    head = Path(ckpt.folder) / "head.safetensors"
    blob = bytearray(head.read_bytes())
    blob[-1] ^= 0xFF
    head.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match=r"head\.safetensors"):
        MatcherCheckpoint.open(ckpt.folder)
