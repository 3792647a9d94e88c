"""Ranking metrics: hand-computed cases, then randomized checks against a per-document reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import EvalConfig
from xmc_core.evaluation.metrics import (
    evaluate,
    format_metrics,
    ndcg_at_k,
    precision_at_k,
    propensities,
    psp_at_k,
    ranked_labels,
    recall_at_k,
    recall_by_frequency,
)

# 3 docs x 5 labels.
#   doc 0: relevant {0, 2}; scores {3: .9, 0: .5, 2: .5, 4: .1} -> ranking 3, 0, 2, 4
#          (0 and 2 tie at .5: the lower label id 0 comes first)
#   doc 1: relevant {1};    scores {1: .7}                   -> ranking 1 (one prediction only)
#   doc 2: relevant {};     scores {0: .3, 1: .2, 2: .1}     -> ranking 0, 1, 2
Y_TRUE = sp.csr_matrix(
    np.array(
        [
            [1, 0, 1, 0, 0],
            [0, 1, 0, 0, 0],
            [0, 0, 0, 0, 0],
        ],
        dtype=np.float32,
    )
)
Y_PRED = sp.csr_matrix(
    np.array(
        [
            [0.5, 0.0, 0.5, 0.9, 0.1],
            [0.0, 0.7, 0.0, 0.0, 0.0],
            [0.3, 0.2, 0.1, 0.0, 0.0],
        ]
    )
)
INV_LOG2_3 = 1 / math.log2(3)  # 0.6309297535714575


def test_ranked_labels_breaks_ties_by_lower_label_id_and_pads_short_rows() -> None:
    ids, valid = ranked_labels(Y_PRED, 5)
    assert ids.tolist() == [[3, 0, 2, 4, -1], [1, -1, -1, -1, -1], [0, 1, 2, -1, -1]]
    assert (valid == (ids >= 0)).all()
    assert ids.dtype == np.int64


def test_ranked_labels_tie_order_does_not_depend_on_storage_order() -> None:
    # labels 4, 1, 3 all score 2.0, stored out of order and with a duplicate entry summed
    scores = sp.csr_matrix(
        (np.array([2.0, 1.0, 2.0, 1.5, 0.5]), np.array([4, 1, 3, 1, 0]), np.array([0, 5])),
        shape=(1, 5),
    )
    ids, _ = ranked_labels(scores, 4)
    assert ids.tolist() == [[1, 3, 4, 0]]  # label 1 sums to 2.5; 3 and 4 tie at 2.0


def test_precision_hand_computed() -> None:
    # P@1: hits at rank 1 are doc0 no (3), doc1 yes (1), doc2 no -> (0 + 1 + 0) / 3
    # P@3: doc0 top-3 {3, 0, 2} has 2 hits -> 2/3; doc1 1 hit -> 1/3 (k stays 3 for a short
    #      row); doc2 has no relevant label and counts 0 -> (2/3 + 1/3 + 0) / 3 = 1/3
    p = precision_at_k(Y_TRUE, Y_PRED, [1, 3])
    assert p == pytest.approx({1: 1 / 3, 3: 1 / 3})


def test_ndcg_hand_computed() -> None:
    # doc0 @3: hits at ranks 2, 3 -> DCG = 1/log2(3) + 1/log2(4) = 0.63093 + 0.5 = 1.13093
    #          2 relevant -> iDCG = 1/log2(2) + 1/log2(3) = 1 + 0.63093 = 1.63093
    #          nDCG = 1.13093 / 1.63093 = 0.69343
    # doc1 @3: hit at rank 1 -> DCG = 1; iDCG over min(3, 1) = 1 item = 1 -> 1
    # doc2: no relevant label -> 0, still averaged in: (0.69343 + 1 + 0) / 3 = 0.56448
    # @1: only doc1 hits at rank 1 -> (0 + 1 + 0) / 3
    doc0 = (INV_LOG2_3 + 0.5) / (1 + INV_LOG2_3)
    assert doc0 == pytest.approx(0.6934264036)
    assert ndcg_at_k(Y_TRUE, Y_PRED, [1, 3]) == pytest.approx({1: 1 / 3, 3: (doc0 + 1) / 3})


def test_recall_averages_over_docs_with_a_relevant_label() -> None:
    # doc2 has no relevant label and is left out: R@1 = (0/2 + 1/1) / 2, R@3 = (2/2 + 1/1) / 2
    assert recall_at_k(Y_TRUE, Y_PRED, [1, 3]) == pytest.approx({1: 0.5, 3: 1.0})


def test_recall_counts_missing_labels_in_the_denominator() -> None:
    # doc0: 2 + 1 missing -> R@3 = 2/3; doc1: 1 + 0 -> 1; doc2: 0 + 2 missing -> 0 and now counts
    # R@1 = (0 + 1 + 0) / 3; R@3 = (2/3 + 1 + 0) / 3 = 5/9
    r = recall_at_k(Y_TRUE, Y_PRED, [1, 3], n_missing=np.array([1, 0, 2]))
    assert r == pytest.approx({1: 1 / 3, 3: 5 / 9})


def test_psp_with_hand_chosen_propensities() -> None:
    inv_p = np.array([2.0, 1.0, 4.0, 1.0, 1.0])
    # @1: num = doc0 top-1 {3} 0 + doc1 {1} 1 + doc2 0 = 1
    #     den = doc0 best relevant {2} 4 + doc1 {1} 1 = 5             -> 1/5
    # @2: num = doc0 {3, 0} 2 + doc1 1 = 3; den = doc0 {2, 0} 4 + 2 + doc1 1 = 7 -> 3/7
    # @3: num = doc0 {3, 0, 2} 2 + 4 + doc1 1 = 7; den = 7            -> 1
    psp = psp_at_k(Y_TRUE, Y_PRED, inv_p, [1, 2, 3])
    assert psp == pytest.approx({1: 0.2, 2: 3 / 7, 3: 1.0})


def test_propensity_formula_against_hand_value() -> None:
    # N = 1000, N_l = 10, a = 0.55, b = 1.5:
    # C = (ln 1000 - 1) * 2.5 ** 0.55 = 5.907755 * 1.655263 = 9.778889
    # exp(-0.55 * ln(11.5)) = 11.5 ** -0.55 = 0.260985
    # p = 1 / (1 + 9.778889 * 0.260985) = 1 / 3.552147 = 0.281520
    p = propensities(np.array([10, 0]), 1000)
    assert p[0] == pytest.approx(0.28151988, rel=1e-7)
    assert p[1] < p[0]  # rarer labels are less likely to be tagged


def test_explicit_zero_in_y_true_is_not_relevant() -> None:
    y_true = Y_TRUE.copy()
    y_true.data[0] = 0.0  # doc0 label 0 stored as an explicit zero
    assert precision_at_k(y_true, Y_PRED, 3)[3] == pytest.approx((1 / 3 + 1 / 3) / 3)


def test_dense_ranked_ids_give_the_same_metrics_as_scores() -> None:
    dense = np.array([[3, 0, 2], [1, -1, -1], [0, 1, 2]])
    inv_p = np.arange(1.0, 6.0)
    assert precision_at_k(Y_TRUE, dense, [1, 3]) == precision_at_k(Y_TRUE, Y_PRED, [1, 3])
    assert ndcg_at_k(Y_TRUE, dense, [1, 3]) == ndcg_at_k(Y_TRUE, Y_PRED, [1, 3])
    assert psp_at_k(Y_TRUE, dense, inv_p, [1, 5]) == psp_at_k(Y_TRUE, Y_PRED, inv_p, [1, 5])


@pytest.mark.parametrize(
    "call",
    [
        lambda: precision_at_k(Y_TRUE, Y_PRED[:2], 1),
        lambda: precision_at_k(Y_TRUE, sp.csr_matrix((3, 6)), 1),
        lambda: precision_at_k(Y_TRUE, np.array([[5], [0], [0]]), 1),
        lambda: precision_at_k(Y_TRUE, np.array([[0], [0]]), 1),
        lambda: precision_at_k(Y_TRUE, np.array([[0, 0], [1, 2], [1, 2]]), 2),
        lambda: precision_at_k(Y_TRUE, Y_PRED, [0]),
        lambda: recall_at_k(Y_TRUE, Y_PRED, 1, n_missing=np.zeros(2)),
        lambda: psp_at_k(Y_TRUE, Y_PRED, np.ones(4), 1),
        lambda: precision_at_k(Y_TRUE, sp.csr_matrix(np.full((3, 5), np.nan)), 1),
        lambda: evaluate(Y_TRUE, Y_PRED, EvalConfig(), train_label_counts=np.ones(5)),
    ],
    ids=[
        "n_docs",
        "n_labels",
        "dense id out of range",
        "dense n_docs",
        "dense repeat",
        "k=0",
        "n_missing shape",
        "inv_propensity shape",
        "nan score",
        "psp without n_train_docs",
    ],
)
def test_bad_inputs_raise_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()


def test_recall_by_frequency_hand_computed() -> None:
    # train counts 0, 1, 3, 10, 2000 -> buckets [0,1) [1,2) [2,6) [6,11) ... [1001, inf)
    # relevant pairs: (0, 0) label 0, (0, 2) label 2, (1, 1) label 1; top-1 finds only (1, 1)
    rows = recall_by_frequency(Y_TRUE, Y_PRED, np.array([0, 1, 3, 10, 2000]), k=1)
    bounds = [(r["lo"], r["hi"]) for r in rows]
    lows = [0, 1, 2, 6, 11, 51, 101, 1001]
    assert bounds == list(zip(lows, [*lows[1:], None], strict=True))
    assert [r["n_labels"] for r in rows] == [1, 1, 1, 1, 0, 0, 0, 1]
    assert [r["n_relevant_pairs"] for r in rows] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert [r["recall"] for r in rows] == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # no label without training documents -> no [0, 1) bucket
    assert recall_by_frequency(Y_TRUE, Y_PRED, np.full(5, 3), k=3)[0]["lo"] == 1


def test_evaluate_collects_every_metric_and_formats_percent() -> None:
    counts = np.array([5, 1, 0, 40, 2])
    cfg = EvalConfig(ks=[1, 3])
    metrics = evaluate(Y_TRUE, Y_PRED, cfg, counts, 100, n_missing=np.array([1, 0, 2]))
    assert list(metrics) == ["P@1", "P@3", "nDCG@1", "nDCG@3", "R@1", "R@3", "PSP@1", "PSP@3"]
    inv_p = 1 / propensities(counts, 100, cfg.propensity_a, cfg.propensity_b)
    assert metrics["PSP@3"] == pytest.approx(psp_at_k(Y_TRUE, Y_PRED, inv_p, 3)[3])
    assert metrics["R@3"] == pytest.approx(5 / 9)
    assert "PSP@1" not in evaluate(Y_TRUE, Y_PRED, cfg)
    table = format_metrics(metrics)
    assert table.splitlines()[0].split() == ["(%)", "@1", "@3"]
    assert table.splitlines()[1].split() == ["P", "33.33", "33.33"]


# ---- randomized cross-checks against a plain per-document implementation ----


def reference_metrics(y_true, y_pred, k, inv_p, n_missing) -> dict[str, float]:
    """P@k, nDCG@k, R@k, PSP@k by looping over documents: the definitions, written plainly."""
    n_docs = y_true.shape[0]
    p = ndcg = 0.0
    recalls = []
    psp_num = psp_den = 0.0
    for i in range(n_docs):
        relevant = set(y_true[i].indices[y_true[i].data != 0].tolist())
        row = y_pred[i]
        top = [lab for _, lab in sorted(zip(-row.data, row.indices, strict=True))][:k]
        hits = [lab in relevant for lab in top]
        p += sum(hits) / k
        dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
        idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
        ndcg += dcg / idcg if relevant else 0.0
        if len(relevant) + n_missing[i] > 0:
            recalls.append(sum(hits) / (len(relevant) + n_missing[i]))
        psp_num += sum(inv_p[lab] for lab, h in zip(top, hits, strict=True) if h)
        psp_den += sum(sorted((inv_p[lab] for lab in relevant), reverse=True)[:k])
    return {
        "P": p / n_docs,
        "nDCG": ndcg / n_docs,
        "R": float(np.mean(recalls)),
        "PSP": psp_num / psp_den,
    }


def random_problem(seed: int, n_docs: int, n_labels: int, max_pred: int):
    rng = np.random.default_rng(seed)
    y_true = sp.csr_matrix(
        (rng.random((n_docs, n_labels)) < 3 / n_labels) & (rng.random((n_docs, 1)) < 0.85)
    ).astype(np.float64)
    scores = np.zeros((n_docs, n_labels))
    for i in range(n_docs):  # test data only: the library itself never loops over documents
        labels = rng.choice(n_labels, size=rng.integers(0, max_pred + 1), replace=False)
        scores[i, labels] = rng.integers(-2, 5, size=len(labels)) / 4 + 0.01  # many ties
    y_pred = sp.csr_matrix(scores)
    return y_true, y_pred, rng.random(n_labels) * 5 + 1, rng.integers(0, 3, size=n_docs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_problem_matches_the_reference(seed: int) -> None:
    y_true, y_pred, inv_p, n_missing = random_problem(seed, n_docs=50, n_labels=30, max_pred=12)
    ks = [1, 3, 5, 10]
    got = {
        "P": precision_at_k(y_true, y_pred, ks),
        "nDCG": ndcg_at_k(y_true, y_pred, ks),
        "R": recall_at_k(y_true, y_pred, ks, n_missing=n_missing),
        "PSP": psp_at_k(y_true, y_pred, inv_p, ks),
    }
    for k in ks:
        want = reference_metrics(y_true, y_pred, k, inv_p, n_missing)
        for name, value in want.items():
            assert got[name][k] == pytest.approx(value, abs=1e-12), (name, k)


def test_rows_of_very_different_lengths_rank_like_the_reference() -> None:
    # row lengths from 0 to 400 span several padded length classes
    y_true, y_pred, inv_p, n_missing = random_problem(7, n_docs=40, n_labels=400, max_pred=400)
    ids, valid = ranked_labels(y_pred, 8)
    for i in range(40):
        row = y_pred[i]
        want = [lab for _, lab in sorted(zip(-row.data, row.indices, strict=True))][:8]
        assert ids[i, valid[i]].tolist() == want
    want = reference_metrics(y_true, y_pred, 8, inv_p, n_missing)
    assert ndcg_at_k(y_true, y_pred, 8)[8] == pytest.approx(want["nDCG"], abs=1e-12)


def test_ndcg_matches_scikit_learn_when_conventions_agree() -> None:
    # scikit-learn ranks every label (dense scores) and averages tied permutations, so compare
    # only with distinct scores on every label and every document holding a relevant label.
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    y_true = (rng.random((40, 20)) < 0.2).astype(np.float64)
    y_true[np.arange(40), rng.integers(0, 20, size=40)] = 1.0
    scores = rng.permuted(np.tile(np.arange(1.0, 21.0), (40, 1)), axis=1)
    for k in (1, 3, 5):
        want = metrics.ndcg_score(y_true, scores, k=k)
        got = ndcg_at_k(sp.csr_matrix(y_true), sp.csr_matrix(scores), k)[k]
        assert got == pytest.approx(want, abs=1e-12)
