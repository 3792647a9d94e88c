"""The leaf-cost search: the sign test, the line search, the choice on real problems, and that
training uses the chosen scale."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import scipy.sparse as sp
from pydantic import ValidationError

from xmc_core.config import RankerConfig
from xmc_core.linear import leaf_cost
from xmc_core.linear.leaf_cost import CostChoice, _search, _z, choose_leaf_cost
from xmc_core.linear.model import fit_level
from xmc_core.linear.solver import train_level
from xmc_core.linear.tree import LabelTree

SCALES = [0.25, 0.5, 1.0, 2.0, 4.0]


def _scores(n_true: int, n: int = 100) -> np.ndarray:
    """Per-document (P@1, P@3) of ``n`` documents: the first ``n_true`` right at rank 1."""
    right = (np.arange(n) < n_true).astype(np.float64)
    return np.stack([right, right / 3], axis=1)


def test_the_t_statistic_is_over_the_summed_scores_of_each_document() -> None:
    old = np.array([[1, 1 / 3], [0, 1 / 3], [0, 0], [1, 2 / 3]])
    new = np.array([[1, 2 / 3], [1, 1 / 3], [0, 1 / 3], [1, 2 / 3]])
    diff = np.array([1 / 3, 1, 1 / 3, 0])  # mean 5/12, sample sd by hand below
    sd = math.sqrt(((diff - 5 / 12) ** 2).sum() / 3)
    assert _z(new, old) == pytest.approx((5 / 12) / (sd / 2))
    assert _z(old, old) == 0.0


def _fake(results: dict[float, int]):
    """(tried, calls, scores): scale 1's scores, the scales evaluated, and a function giving
    ``results[scale]`` documents of 100 right at rank 1."""
    calls: list[float] = []

    def scores(scale: float) -> np.ndarray:
        calls.append(scale)
        return _scores(results[scale])

    return {1.0: _scores(results[1.0])}, calls, scores


def test_the_search_moves_while_the_next_scale_is_clearly_better() -> None:
    tried, calls, scores = _fake({0.25: 0, 0.5: 5, 1.0: 10, 2.0: 30, 4.0: 50})
    assert _search(SCALES, tried, scores) == 4.0
    assert calls == [2.0, 4.0]  # 2 clearly better: 0.5 is not tried; on upwards to the last


def test_a_clear_gain_upwards_is_taken_without_trying_downwards() -> None:
    # 0.5 would gain more than 2 does, but 2 is clearly better than 1: one training fewer
    tried, calls, scores = _fake({0.25: 60, 0.5: 40, 1.0: 10, 2.0: 30, 4.0: 30})
    assert _search(SCALES, tried, scores) == 2.0
    assert calls == [2.0, 4.0]


def test_the_search_stops_at_the_first_scale_without_clear_evidence() -> None:
    # 0.5 gains 20 documents over 1 (t = 4.9); 0.25 gains 3 over 0.5 (t = 1.7 < 2)
    tried, calls, scores = _fake({0.25: 33, 0.5: 30, 1.0: 10, 2.0: 5, 4.0: 0})
    assert _search(SCALES, tried, scores) == 0.5
    assert calls == [2.0, 0.5, 0.25]  # upwards first, then downwards


def test_the_search_keeps_one_when_no_neighbour_is_clearly_better() -> None:
    tried, calls, scores = _fake({0.5: 13, 1.0: 10, 2.0: 12, 0.25: 99, 4.0: 99})
    assert _search(SCALES, tried, scores) == 1.0  # t = 1.7 for 0.5
    assert calls == [2.0, 0.5]


def test_a_search_from_another_scale_evaluates_its_neighbours_first() -> None:
    tried, calls, scores = _fake({0.25: 0, 0.5: 0, 1.0: 10, 2.0: 30, 4.0: 32})
    tried = {2.0: scores(2.0)}
    assert _search(SCALES, tried, scores, start=2.0) == 2.0  # 4 gains 2 documents: t < 2
    assert calls == [2.0, 4.0, 1.0]


def _problem(noise: float, n: int = 4000, d: int = 60, k: int = 4, parents: int = 2):
    """X (n, d) L2-normalized; each document under one of ``parents`` parents, labelled with
    the best of its parent's ``k`` children under a random linear model, a ``noise`` share of
    labels replaced by a random child of the same parent."""
    rng = np.random.default_rng(0)
    X = sp.random(n, d, density=0.3, random_state=0, format="csr", dtype=np.float64)
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1))), dtype=np.float32)
    scores = np.asarray(X @ rng.normal(size=(d, k * parents)))
    parent = rng.integers(0, parents, n)
    own = scores.reshape(n, parents, k)[np.arange(n), parent]
    label = parent * k + np.argmax(own, axis=1)
    flip = rng.random(n) < noise
    label[flip] = parent[flip] * k + rng.integers(0, k, int(flip.sum()))
    Y = sp.csr_matrix((np.ones(n), (np.arange(n), label)), shape=(n, k * parents))
    C = sp.csr_matrix((np.ones(k * parents), (np.arange(k * parents), np.arange(k * parents) // k)))
    M = sp.csr_matrix((np.ones(n), (np.arange(n), parent)), shape=(n, parents))
    return X, Y, C, M


def test_noisy_labels_get_a_smaller_cost_and_clean_ones_keep_theirs() -> None:
    cfg = RankerConfig(leaf_cost_sample=1.0)
    noisy = choose_leaf_cost(*_problem(noise=0.5), cfg)
    assert noisy.scale == 0.5
    assert noisy.held_out[0.5][0] > noisy.held_out[1.0][0] + 3  # held-out P@1 within parents
    assert 700 < noisy.n_docs < 900  # about 20% of 4,000 held out
    again = choose_leaf_cost(*_problem(noise=0.5), cfg)
    assert again.scale == noisy.scale
    assert (again.held_out, again.n_docs) == (noisy.held_out, noisy.n_docs)
    clean = choose_leaf_cost(*_problem(noise=0.0), cfg)
    assert clean.scale == 1.0


def test_a_warm_search_starts_at_the_champions_scale_and_keeps_it_without_clear_evidence() -> None:
    cfg = RankerConfig(leaf_cost_sample=1.0)
    noisy, clean = _problem(noise=0.5), _problem(noise=0.0)
    assert choose_leaf_cost(*noisy, cfg, start=4.0).scale == 0.5  # down to where 1's search ends
    assert choose_leaf_cost(*noisy, cfg, start=0.25).scale == 0.25  # 0.5 is not clearly better
    assert choose_leaf_cost(*clean, cfg, start=2.0).scale == 1.0
    assert choose_leaf_cost(*clean, cfg, start=0.5).scale == 0.5  # 1 is not clearly better
    assert choose_leaf_cost(*clean, cfg, start=3.0).scale == 1.0  # not allowed: searched from 1


def test_a_single_allowed_scale_trains_nothing(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("the search trained with only scale 1 allowed")

    monkeypatch.setattr(leaf_cost, "train_level", boom)
    cfg = RankerConfig(leaf_cost_scales=[1.0])
    assert choose_leaf_cost(*_problem(noise=0.5), cfg) == CostChoice()


def test_the_leaf_level_is_trained_at_the_chosen_scale() -> None:
    X, Y, C, M = _problem(noise=0.5)
    tree = LabelTree(C=[sp.csr_matrix(np.ones((2, 1))), C])
    cfg = RankerConfig(leaf_cost_sample=1.0)
    upper = [fit_level(X, Y, tree, 0, [], cfg, "l3-hinge")[0]]
    W = fit_level(X, Y, tree, 1, upper, cfg, "l3-hinge")[0]
    expected = train_level(X, Y, C, M, cfg.model_copy(update={"Cp": 0.5, "Cn": 0.5}))
    assert abs(W - expected).nnz == 0
    assert abs(W - train_level(X, Y, C, M, cfg)).nnz > 0


@pytest.mark.parametrize("scales", [[0.5, 2.0], [0.0, 1.0], [-1.0, 1.0]])
def test_the_scales_must_be_positive_and_hold_one(scales: list[float]) -> None:
    with pytest.raises(ValidationError, match="leaf_cost_scales"):
        RankerConfig(leaf_cost_scales=scales)


def test_the_search_logs_one_line(monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """The search trains on a sample of the parents: the nodes of the others get no weights by
    design, which is no news (it once logged them as skipped, once per scale tried)."""
    monkeypatch.setattr(leaf_cost, "MIN_PAIRS", 10)  # a sample of the 40 parents, not all
    with caplog.at_level(logging.INFO, logger="xmc_core"):
        choice = choose_leaf_cost(
            *_problem(noise=0.5, parents=40), RankerConfig(leaf_cost_sample=0.3)
        )
    assert len(choice.held_out) == 3  # scale 1 and both neighbours tried
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["leaf level"]
