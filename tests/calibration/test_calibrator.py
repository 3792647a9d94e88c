"""The calibrator: fitted and chosen on a carve, it turns scores into probabilities that match
how often a prediction is right; saved and loaded, it gives the same probabilities."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.calibration.calibrator import MIN_GROUP_PAIRS, Calibrator
from xmc_core.calibration.maps import PlattMap
from xmc_core.calibration.metrics import ece_at_k
from xmc_core.errors import ArtifactError

N_LABELS = 40


def carve(seed: int, n_docs: int = 3000, k: int = 5) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Top-k scores in (0, 1) per document, each prediction relevant with probability score**2
    (raw scores overconfident), on labels drawn at random."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n_docs), k)
    cols = np.concatenate([rng.choice(N_LABELS, k, replace=False) for _ in range(n_docs)])
    s = rng.uniform(0.01, 1.0, n_docs * k)
    hit = rng.uniform(size=n_docs * k) < s**2
    S = sp.csr_matrix((s, (rows, cols)), shape=(n_docs, N_LABELS))
    Y = sp.csr_matrix((np.ones(hit.sum()), (rows[hit], cols[hit])), shape=(n_docs, N_LABELS))
    return S, Y


LABEL_DOCS = np.arange(N_LABELS) * 5  # 0, 5, ..., 195 training documents


def test_probabilities_from_the_carve_are_calibrated_on_new_documents() -> None:
    cal = Calibrator.fit(*carve(0), k=5, label_docs=LABEL_DOCS)
    assert len(cal.choice) == 6 and min(cal.choice.values()) < 0.2
    S, Y = carve(1)
    assert ece_at_k(S, Y, 5) > 0.15  # the raw scores
    P = cal.probabilities(S, LABEL_DOCS)
    assert (P.indices == S.indices).all() and (P.indptr == S.indptr).all()
    assert ece_at_k(P, Y, 5) < 0.03


def test_the_same_carve_and_seed_give_the_same_choice() -> None:
    S, Y = carve(0)
    a = Calibrator.fit(S, Y, 5, LABEL_DOCS, seed=3)
    b = Calibrator.fit(S, Y, 5, LABEL_DOCS, seed=3)
    assert a.choice == b.choice and a.grouping == b.grouping
    assert (a.probabilities(S, LABEL_DOCS) != b.probabilities(S, LABEL_DOCS)).nnz == 0


def test_each_rank_group_has_its_map_and_a_small_group_falls_back() -> None:
    cal = Calibrator("rank", PlattMap(0.0, 0.0), (PlattMap(0.0, 2.0), None, PlattMap(0.0, -2.0)))
    # one document ranks labels 3, 1, 0, 2: groups rank 0, ranks 1-2 (no map), ranks 3-
    S = sp.csr_matrix(np.array([[0.1, 0.5, 0.05, 0.9]]))
    P = cal.probabilities(S, LABEL_DOCS[:4]).toarray()[0]
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    assert P[[3, 1, 0, 2]] == pytest.approx([sig(2.0), 0.5, 0.5, sig(-2.0)])
    tiny = carve(2, n_docs=MIN_GROUP_PAIRS // 5)  # fewer pairs than a group needs
    fitted = Calibrator.fit(*tiny, k=5, label_docs=LABEL_DOCS)
    assert all(m is None for m in fitted.maps)


def test_save_load_gives_the_same_probabilities_and_bad_folders_are_refused(
    tmp_path: Path,
) -> None:
    S, Y = carve(0)
    cal = Calibrator.fit(S, Y, 5, LABEL_DOCS)
    cal.save(tmp_path / "cal")
    again = Calibrator.load(tmp_path / "cal")
    assert again.grouping == cal.grouping and again.choice == cal.choice
    P, Q = cal.probabilities(S, LABEL_DOCS), again.probabilities(S, LABEL_DOCS)
    assert (P != Q).nnz == 0
    bad = Calibrator("rank", PlattMap(1.0, 0.0), (PlattMap(1.0, 0.0),))  # 1 map, 3 groups
    bad.save(tmp_path / "bad")
    with pytest.raises(ArtifactError, match="maps for grouping"):
        Calibrator.load(tmp_path / "bad")


def test_a_carve_without_predictions_or_with_other_labels_is_refused() -> None:
    S, Y = carve(0)
    with pytest.raises(ValueError, match="nothing to fit"):
        Calibrator.fit(sp.csr_matrix(S.shape), Y, 5, LABEL_DOCS)
    with pytest.raises(ValueError, match="label counts"):
        Calibrator.fit(S, Y, 5, LABEL_DOCS[:3])
    with pytest.raises(ValueError, match="label counts"):
        Calibrator.fit(S, Y, 5, LABEL_DOCS).probabilities(S, LABEL_DOCS[:3])
