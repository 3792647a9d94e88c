"""The calibration-choices benchmark: its two rejected variants checked by hand, then a tiny real
run on 200 documents (XR-Linear on 80%, four folds of the other 20%)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tests.benchmarks.conftest import BENCHMARKS
from tests.benchmarks.test_families import write_lines_dataset

_path = BENCHMARKS / "calibration_choices.py"
_spec = importlib.util.spec_from_file_location("calibration_choices", _path)
assert _spec is not None and _spec.loader is not None
choices = importlib.util.module_from_spec(_spec)
sys.modules["calibration_choices"] = choices
_spec.loader.exec_module(choices)


def test_the_block_ends_map_is_flat_across_each_block() -> None:
    m = choices.EndsIsotonic.fit(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 1, 0, 1]))
    # blocks {1} -> 0, {2, 3} -> 0.5, {4} -> 1: knots at both ends of the pooled block
    assert m.x.tolist() == [1.0, 2.0, 3.0, 4.0] and m.y.tolist() == [0.0, 0.5, 0.5, 1.0]
    assert m(np.array([1.5, 2.5, 3.5])).tolist() == [0.25, 0.5, 0.75]


def test_a_kept_threshold_sits_at_the_lowest_probability_it_keeps() -> None:
    # label 0: 0.9 and 0.8 relevant, 0.3 not: the best F1 keeps 0.8 (halfway: 0.55)
    P = sp.csr_matrix(np.array([[0.9, 0.6, 0.2], [0.8, 0.4, 0.0], [0.3, 0.0, 0.7]]))
    Y = sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]]))
    assert choices.kept_per_label(P, Y, 0.5, 1).tolist() == [0.8, 0.4, 0.2]


def test_a_tiny_run_scores_every_variant(tmp_path: Path) -> None:
    write_lines_dataset(tmp_path / "data" / "tiny")
    out = tmp_path / "choices.json"
    choices.main(
        ["--datasets-root", str(tmp_path / "data"), "--datasets", "tiny", "--out", str(out)]
    )
    got = json.loads(out.read_text())["datasets"]["tiny"]
    assert set(got["maps"]) == set(choices.MAPS)
    for figures in got["maps"].values():
        assert 0 <= figures["ECE@1"] <= 1 and 0 <= figures["ECE@5"] <= 1
        assert 0 < figures["Brier@5"] < 1
    assert "global" in got["thresholds"] and len(got["thresholds"]) == 9
    assert all(0 <= f["micro-F1"] <= 1 for f in got["thresholds"].values())


def test_a_grouped_dataset_compares_a_carve_of_documents_with_one_of_groups(
    tmp_path: Path,
) -> None:
    src = write_lines_dataset(tmp_path / "data" / "tiny")
    (src / "train_ids.txt").write_text("".join(f"doc-{i}\tgroup-{i // 2}\n" for i in range(200)))
    out = tmp_path / "choices.json"
    argv = ["--datasets-root", str(tmp_path / "data"), "--datasets", "tiny", "--parts", "groups"]
    choices.main([*argv, "--out", str(out)])
    got = json.loads(out.read_text())["datasets"]["tiny"]
    assert list(got) == ["carve by group"]  # only the part asked for
    rows = got["carve by group"]
    assert set(rows) == {f"{p}, carve of {by}" for p in choices.GROUP_PRESETS
                         for by in ("documents", "groups")}  # fmt: skip
    for figures in rows.values():
        assert set(figures) == {"P@1 carve", "P@1 held-out groups", "ECE@1", "ECE@5"}
        assert all(0 <= v <= 1 for v in figures.values())
