"""Thresholds tuned on the carve, checked by hand on three documents and three labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.calibration import thresholds
from xmc_core.calibration.metrics import threshold_scores
from xmc_core.calibration.thresholds import Thresholds, _candidate_f1s
from xmc_core.errors import ArtifactError

# doc 0: label 0 (0.9, relevant), 1 (0.6), 2 (0.2, relevant); doc 1: 0 (0.8, relevant), 1 (0.4,
# relevant); doc 2: 0 (0.3), 2 (0.7, relevant)
P = sp.csr_matrix(np.array([[0.9, 0.6, 0.2], [0.8, 0.4, 0.0], [0.3, 0.0, 0.7]]))
Y = sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]]))


def test_the_global_threshold_maximizes_the_objective() -> None:
    # micro-F1 by threshold: 0.9 1/3, 0.8 4/7, 0.7 3/4, 0.6 2/3, 0.4 4/5, 0.3 8/11, 0.2 5/6
    micro = Thresholds.tune(P, Y, "micro_f1")
    assert micro.value == 0.2 and micro.per_label is None
    assert micro.carve["micro_f1"] == pytest.approx(10 / 12)
    # macro-F1 at 0.2: (4/5 + 2/3 + 1) / 3; at 0.4: (1 + 2/3 + 2/3) / 3
    macro = Thresholds.tune(P, Y, "macro_f1")
    assert macro.value == 0.2 and macro.carve["macro_f1"] == pytest.approx((0.8 + 2 / 3 + 1) / 3)
    # without doc 0's label 2, micro-F1 is best at 0.4 (4/5 against 8/11 at 0.3)
    P2 = P.copy().tolil()
    P2[0, 2] = 0
    assert Thresholds.tune(sp.csr_matrix(P2), Y, "sum").value == 0.4


def test_per_label_thresholds_maximize_each_labels_f1() -> None:
    # label 0: F1 2/3 at 0.9, 1 at 0.8, 4/5 at 0.3; label 1: 0 at 0.6, 2/3 at 0.4; label 2:
    # 2/3 at 0.7, 1 at 0.2. Each threshold lies halfway to the label's next lower probability
    # (label 0: 0.8 and 0.3), at the kept one where none is lower (labels 1 and 2)
    t = Thresholds.tune(P, Y, "macro_f1", per_label=True, min_positives=1)
    assert t.per_label.tolist() == [0.55, 0.4, 0.2]
    assert t.of(np.array([1, 0])).tolist() == [0.4, 0.55]
    rare = Thresholds.tune(P, Y, "macro_f1", per_label=True, min_positives=2)
    assert rare.per_label.tolist() == [0.55, rare.value, 0.2]  # label 1 has one relevant doc


def test_a_threshold_keeps_every_pair_of_equal_probability() -> None:
    # label 0: 0.9 relevant, then 0.5 twice (one relevant): the cut is above or below both
    P3 = sp.csr_matrix(np.array([[0.9], [0.5], [0.5], [0.1]]))
    Y3 = sp.csr_matrix(np.array([[1], [1], [0], [0]]))
    t = Thresholds.tune(P3, Y3, "macro_f1", per_label=True, min_positives=1)
    # F1 at 0.9: 2/3; at 0.5: 4/5 (no cut between); halfway to 0.1
    assert t.per_label.tolist() == [pytest.approx(0.3)]


def test_thresholds_save_and_load(tmp_path: Path) -> None:
    t = Thresholds.tune(P, Y, "sum", per_label=True, min_positives=1)
    t.save(tmp_path / "t")
    back = Thresholds.load(tmp_path / "t", n_labels=3)
    assert back.value == t.value and back.per_label.tolist() == t.per_label.tolist()
    assert back.objective == "sum" and back.carve == t.carve
    with pytest.raises(ArtifactError, match="per_label holds"):
        Thresholds.load(tmp_path / "t", n_labels=4)
    Thresholds(objective="sum", value=0.3).save(tmp_path / "g")
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["per_label"] is False and Thresholds.load(tmp_path / "g").of(np.array([2])) == 0.3


@pytest.mark.parametrize("block", [4096, 5])
def test_every_candidate_is_scored_as_threshold_scores_scores_it(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thresholds, "LABEL_BLOCK", block)  # 5: labels counted in three blocks
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((40, 12)) < 0.4, rng.integers(1, 9, (40, 12)) / 8.0, 0.0)
    dense[:, 11] = 0.0  # a label never predicted
    P, Y = sp.csr_matrix(dense), sp.csr_matrix(rng.random((40, 12)) < 0.25)
    candidates = np.unique(P.data)
    micro, macro = _candidate_f1s(P, Y, candidates)
    for j, t in enumerate(candidates):
        want = threshold_scores(P, Y, float(t))
        assert micro[j] == pytest.approx(want["micro_f1"], abs=1e-12)
        assert macro[j] == pytest.approx(want["macro_f1"], abs=1e-12)
