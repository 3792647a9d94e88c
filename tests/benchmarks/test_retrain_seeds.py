"""The seeded warm-against-cold benchmark: its corpora grow by one drop a step, and its table
gives warm minus cold per seed and their mean (hand-made figures, then a tiny real run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import retrain_seeds
from retrain_seeds import report_lines, step_corpora

from tests.benchmarks.test_families import write_lines_dataset
from xmc_core.corpus import Corpus


def test_the_table_gives_warm_minus_cold_per_seed_and_the_mean() -> None:
    def run(p1: float) -> dict:
        return {"P@1": p1, "P@5": 0.2, "seconds": 1.0, "leaf_cost_scale": 1.0}

    runs = {
        "0": {"cold": [run(0.80), run(0.90)], "warm": [run(0.91)]},
        "1": {"cold": [run(0.80), run(0.92)], "warm": [run(0.90)]},
    }
    report = {"datasets": {"toy": {"source": "x", "runs": runs}}}
    # seed 0: 91 - 90 = +1.00, seed 1: 90 - 92 = -2.00, mean -0.50
    assert "| 2 | 90.00 / 92.00 | 91.00 / 90.00 | +1.00 / -2.00 | -0.50 |" in report_lines(report)


def test_a_tiny_run_grows_the_corpus_and_chains_the_warm_models(tmp_path: Path) -> None:
    src = write_lines_dataset(tmp_path / "data" / "tiny")
    corpora = step_corpora(src, tmp_path / "steps", 2, seed=0)
    assert [Corpus(c).manifest.splits["train"].rows for c in corpora] == [100, 200]
    out = tmp_path / "results.json"
    argv = ["--datasets-root", str(tmp_path / "data"), "--datasets", "tiny", "--seeds", "0",
            "--slices", "2", "--out", str(out)]  # fmt: skip
    retrain_seeds.main(argv)
    runs = json.loads(out.read_text())["datasets"]["tiny"]["runs"]["0"]
    assert len(runs["cold"]) == 2 and len(runs["warm"]) == 1
    assert all(0.0 < r["P@1"] <= 1.0 for r in runs["cold"] + runs["warm"])
    with pytest.raises(SystemExit):
        retrain_seeds.main(["--no-such-flag"])
