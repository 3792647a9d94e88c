"""xmc_core/transformer/tokens.py: length-pooled batches."""

from __future__ import annotations

import numpy as np

from xmc_core.transformer.tokens import epoch_batches


def test_batches_group_lengths_and_cover_each_row_once() -> None:
    lengths = np.arange(100)[::-1].copy()
    batches = epoch_batches(np.arange(100), lengths, 10, np.random.default_rng(0))
    assert len(batches) == 10 and sorted(np.concatenate(batches).tolist()) == list(range(100))
    spans = [int(np.ptp(lengths[b])) for b in batches]
    assert max(spans) < 20  # one pool of 50 batches: sorted, so each batch is 10 neighbours
    short = epoch_batches(np.arange(7), lengths, 10, np.random.default_rng(0))
    assert [len(b) for b in short] == [7]  # fewer rows than a batch: one batch
