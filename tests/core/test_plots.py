"""Every plot writes a real PNG atomically (no temporary file left behind)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from xmc_core.evaluation import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CURVE = {"k": [1, 2, 3], "P": [0.9, 0.8, 0.7], "nDCG": [0.9, 0.85, 0.82]}
BUCKETS = [
    {"lo": 0, "hi": 1, "n_labels": 2, "n_relevant_pairs": 3, "recall": 0.0},
    {"lo": 1, "hi": 6, "n_labels": 5, "n_relevant_pairs": 9, "recall": 0.5},
    {"lo": 6, "hi": None, "n_labels": 4, "n_relevant_pairs": 40, "recall": 0.9},
]

CASES: dict[str, Callable[[Path], Path]] = {
    "k_curves": lambda p: plots.plot_k_curves({"train": CURVE, "test": CURVE}, p),
    "recall_by_frequency": lambda p: plots.plot_recall_by_frequency(
        {"train": BUCKETS, "test": BUCKETS}, 5, p
    ),
    "beam_recall": lambda p: plots.plot_beam_recall({"test": [1.0, 0.9, 0.7]}, 10, p),
    "training_loss": lambda p: plots.plot_training_loss(
        {"train": [0.3, 0.2, 0.1], "test": [0.4, 0.3, 0.3]}, "squared_hinge", p
    ),
    "matcher_loss": lambda p: plots.plot_matcher_loss({1: [(5, 0.9), (10, 0.5)], 2: []}, p),
    "empty": lambda p: plots.plot_k_curves({}, p),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_plot_writes_a_png(name: str, tmp_path: Path) -> None:
    target = tmp_path / "plots" / f"{name}.png"
    assert CASES[name](target) == target
    data = target.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000  # axes, text and lines, not a blank image
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_plotting_leaves_pyplot_alone() -> None:
    assert "matplotlib.pyplot" not in sys.modules
