"""Ranking metrics of extreme multi-label classification: P@k, nDCG@k, R@k and PSP@k.

Conventions follow the Extreme Classification Repository (pyxclib) and PECOS:

- ``Y_true``: csr (n_docs, n_labels); every stored nonzero is a relevant label.
- ``Y_pred``: csr (n_docs, n_labels) of scores; every stored entry is a prediction (an explicit
  zero included). A document is ranked by score descending, ties broken by the lower label id.
  A row may hold fewer than k predictions: the missing ranks simply earn nothing. Alternatively
  ``Y_pred`` is an int array (n_docs, k') of label ids already ranked, padded with -1.
- P@k and nDCG@k average over all documents, so a document without relevant labels counts 0.
  R@k averages over documents with at least one relevant label (in the label space or missing).
- Every metric is a fraction in [0, 1]; an average over an empty set is 0.0.

Everything is vectorized over documents: a row-wise sort of ``Y_pred`` (the shared ranking,
:func:`xmc_core.evaluation.ranking.top_k`) and one binary search per (document, rank) pair.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import EvalConfig
from xmc_core.evaluation.ranking import top_k

Predictions = sp.spmatrix | sp.sparray | np.ndarray
Ks = int | Iterable[int]
DEFAULT_BUCKETS = (1, 2, 6, 11, 51, 101, 1001)


@dataclass(frozen=True)
class _Ranked:
    """The top-k of every document joined with the truth.

    ``ids``: int64 (n_docs, k), -1 past the end of a row; ``hits``: bool (n_docs, k);
    ``relevance``: canonical csr (n_docs, n_labels); ``n_relevant``: int64 (n_docs,).
    """

    ids: np.ndarray
    hits: np.ndarray
    relevance: sp.csr_matrix
    n_relevant: np.ndarray


def ranked_labels(Y_pred: Predictions, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best label ids of every document.

    ``Y_pred``: csr (n_docs, n_labels) scores, ranked by score descending then label id
    ascending; or int (n_docs, k') ranked ids, -1 as padding.
    Returns ``ids``: int64 (n_docs, k), -1 where a row has fewer than k predictions, and
    ``valid``: bool (n_docs, k), ``ids >= 0``.
    """
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if sp.issparse(Y_pred):
        return _rank_sparse(_canonical(Y_pred), k)
    return _rank_dense(np.asarray(Y_pred), k)


def precision_at_k(Y_true: sp.spmatrix, Y_pred: Predictions, ks: Ks) -> dict[int, float]:
    """P@k = mean over all docs of |top-k ∩ relevant| / k, for each k in ``ks``.

    ``Y_true``: csr (n_docs, n_labels) binary; ``Y_pred``: see ``ranked_labels``. Documents with
    no relevant label count as 0 (the XMC convention: the denominator is always n_docs).
    """
    ks = _check_ks(ks)
    ranked = _rank_against(Y_true, Y_pred, max(ks))
    return {k: _precision(ranked, k) for k in ks}


def ndcg_at_k(Y_true: sp.spmatrix, Y_pred: Predictions, ks: Ks) -> dict[int, float]:
    """nDCG@k = mean over all docs of DCG@k / iDCG@k, for each k in ``ks``.

    DCG@k = sum_{r=1..k} rel_r / log2(r + 1); iDCG@k is the DCG of min(k, |relevant|) hits.
    ``Y_true``: csr (n_docs, n_labels) binary. Documents with no relevant label contribute 0 and
    still count in the mean, as in pyxclib and PECOS.
    """
    ks = _check_ks(ks)
    ranked = _rank_against(Y_true, Y_pred, max(ks))
    return {k: _ndcg(ranked, k) for k in ks}


def recall_at_k(
    Y_true: sp.spmatrix, Y_pred: Predictions, ks: Ks, n_missing: np.ndarray | None = None
) -> dict[int, float]:
    """R@k = mean of |top-k ∩ relevant| / (|relevant| + n_missing), for each k in ``ks``.

    ``Y_true``: csr (n_docs, n_labels) binary; ``n_missing``: int (n_docs,), relevant labels of
    each document outside the label space (e.g. test labels never seen in training). They can
    never be retrieved, so counting them gives an honest recall. The mean runs over documents
    with at least one relevant label, missing ones included.
    """
    ks = _check_ks(ks)
    ranked = _rank_against(Y_true, Y_pred, max(ks))
    missing = _check_missing(n_missing, ranked.hits.shape[0])
    return {k: _recall(ranked, k, missing) for k in ks}


def propensities(
    train_label_counts: np.ndarray, n_train_docs: int, a: float = 0.55, b: float = 1.5
) -> np.ndarray:
    """Label propensities of Jain et al. (2016), float64 (n_labels,).

    p_l = 1 / (1 + C * exp(-a * log(N_l + b))) with C = (log(N) - 1) * (b + 1) ** a, where
    ``train_label_counts``: (n_labels,) N_l, the training documents of label l, and
    ``n_train_docs``: N. Use ``1 / p`` as the ``inv_propensity`` of ``psp_at_k``.
    """
    counts = np.asarray(train_label_counts, dtype=np.float64)
    if counts.ndim != 1 or (counts < 0).any():
        raise ValueError("train_label_counts must be a 1-d array of non-negative counts")
    if n_train_docs < 1:
        raise ValueError(f"n_train_docs={n_train_docs} must be >= 1")
    c = (np.log(n_train_docs) - 1.0) * (b + 1.0) ** a
    return 1.0 / (1.0 + c * np.exp(-a * np.log(counts + b)))


def psp_at_k(
    Y_true: sp.spmatrix, Y_pred: Predictions, inv_propensity: np.ndarray, ks: Ks
) -> dict[int, float]:
    """Normalized propensity-scored precision PSP@k, a fraction in [0, 1], for each k in ``ks``.

    numerator = sum over docs of sum_{l in top-k} y_l / p_l; denominator = the same for the best
    ranking (the min(k, |relevant|) relevant labels of largest 1 / p_l). Both are summed over all
    documents before dividing, as pyxclib does. ``inv_propensity``: (n_labels,) 1 / p_l.
    """
    ks = _check_ks(ks)
    ranked = _rank_against(Y_true, Y_pred, max(ks))
    return _psp(ranked, _check_inv_propensity(inv_propensity, ranked.relevance.shape[1]), ks)


def recall_by_frequency(
    Y_true: sp.spmatrix,
    Y_pred: Predictions,
    train_label_counts: np.ndarray,
    k: int,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
) -> list[dict]:
    """R@k over the relevant (doc, label) pairs, split by the label's training frequency.

    ``Y_true``: csr (n_docs, n_labels); ``train_label_counts``: (n_labels,). Bucket i holds the
    labels with count in [buckets[i], buckets[i + 1]); the last is [buckets[-1], inf), and
    [0, buckets[0]) is prepended when some label falls below it (e.g. labels with no training
    document). Each dict: ``lo``, ``hi`` (None: unbounded), ``n_labels`` (labels of the label
    space in the bucket), ``n_relevant_pairs`` and ``recall``, the fraction of those pairs
    found in the top-k of their document (0.0 for a bucket without pairs).
    """
    ranked = _rank_against(Y_true, Y_pred, k)
    counts = np.asarray(train_label_counts)
    if counts.shape != (ranked.relevance.shape[1],):
        raise ValueError(f"train_label_counts has shape {counts.shape}, expected (n_labels,)")
    lows = _bucket_lows(buckets, counts)
    bucket_of = np.searchsorted(lows, counts, side="right") - 1
    n_buckets = len(lows)
    n_labels = np.bincount(bucket_of, minlength=n_buckets)
    n_pairs = np.bincount(bucket_of[ranked.relevance.indices], minlength=n_buckets)
    n_hits = np.bincount(bucket_of[ranked.ids[ranked.hits]], minlength=n_buckets)
    highs = [*lows[1:], None]
    return [
        {
            "lo": int(lows[i]),
            "hi": None if highs[i] is None else int(highs[i]),
            "n_labels": int(n_labels[i]),
            "n_relevant_pairs": int(n_pairs[i]),
            "recall": float(n_hits[i] / n_pairs[i]) if n_pairs[i] else 0.0,
        }
        for i in range(n_buckets)
    ]


def evaluate(
    Y_true: sp.spmatrix,
    Y_pred: Predictions,
    cfg: EvalConfig,
    train_label_counts: np.ndarray | None = None,
    n_train_docs: int | None = None,
    n_missing: np.ndarray | None = None,
) -> dict[str, float]:
    """All metrics at ``cfg.ks``: keys "P@k", "nDCG@k", "R@k" and, given the training label
    counts (n_labels,) and document count, "PSP@k"; values are fractions in [0, 1].

    ``Y_true``: csr (n_docs, n_labels); ``n_missing``: (n_docs,), see ``recall_at_k``.
    """
    ks = _check_ks(cfg.ks)
    ranked = _rank_against(Y_true, Y_pred, max(ks))
    missing = _check_missing(n_missing, ranked.hits.shape[0])
    out = {f"P@{k}": _precision(ranked, k) for k in ks}
    out |= {f"nDCG@{k}": _ndcg(ranked, k) for k in ks}
    out |= {f"R@{k}": _recall(ranked, k, missing) for k in ks}
    if train_label_counts is not None:
        if n_train_docs is None:
            raise ValueError("PSP@k needs n_train_docs along with train_label_counts")
        p = propensities(train_label_counts, n_train_docs, cfg.propensity_a, cfg.propensity_b)
        inv = _check_inv_propensity(1.0 / p, ranked.relevance.shape[1])
        out |= {f"PSP@{k}": v for k, v in _psp(ranked, inv, ks).items()}
    return out


_KEY = re.compile(r"(.+)@(\d+)")


def percent(value: float | None) -> str:
    """A fraction as a percentage with two decimals (``79.33%``); ``n/a`` for None or NaN."""
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def metric_line(metrics: Mapping[str, float], names: Sequence[str], sep: str = "  ") -> str:
    """``P@1 79.33%  P@5 38.59%``: the metrics ``names`` that ``metrics`` (fractions) holds, in
    that order; "" when it holds none of them."""
    return sep.join(f"{name} {percent(metrics[name])}" for name in names if name in metrics)


def describe_metrics(metrics: dict[str, float]) -> str:
    """``12 metrics: P, nDCG, R, PSP at k = 1, 3, 5``: what was computed, not the figures (the
    run summary shows those once)."""
    names: dict[str, None] = {}
    ks: set[int] = set()
    for key in metrics:
        match = _KEY.fullmatch(key)
        if match:
            names[match[1]] = None
            ks.add(int(match[2]))
    at = f" at k = {', '.join(map(str, sorted(ks)))}" if ks else ""
    return f"{len(metrics)} metrics: {', '.join(names)}{at}"


def format_metrics(metrics: dict[str, float]) -> str:
    """A compact table in percent, 2 decimals: one row per metric name, one column per k.

    Keys that are not "NAME@k" are listed below the table, one per line.
    """
    table: dict[str, dict[int, float]] = {}
    others: dict[str, float] = {}
    for key, value in metrics.items():
        match = _KEY.fullmatch(key)
        if match:
            table.setdefault(match[1], {})[int(match[2])] = value
        else:
            others[key] = value
    ks = sorted({k for row in table.values() for k in row})
    width = max(len(name) for name in [*table, *others, "(%)"]) + 1
    lines = ["(%)".ljust(width) + "".join(f"{'@' + str(k):>8}" for k in ks)] if table else []
    for name, row in table.items():
        cells = "".join(f"{100 * row[k]:8.2f}" if k in row else f"{'-':>8}" for k in ks)
        lines.append(name.ljust(width) + cells)
    lines += [f"{name.ljust(width)}{100 * value:8.2f}" for name, value in others.items()]
    return "\n".join(lines)


def _precision(ranked: _Ranked, k: int) -> float:
    n_docs = ranked.hits.shape[0]
    return float(ranked.hits[:, :k].sum() / (k * n_docs)) if n_docs else 0.0


def _ndcg(ranked: _Ranked, k: int) -> float:
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = ranked.hits[:, :k] @ discount
    # ideal[j] = iDCG of j hits; ideal[0] is a placeholder 1.0 where dcg is 0 anyway.
    ideal = np.concatenate(([1.0], np.cumsum(discount)))
    idcg = ideal[np.minimum(ranked.n_relevant, k)]
    return float(np.mean(dcg / idcg)) if len(dcg) else 0.0


def _recall(ranked: _Ranked, k: int, n_missing: np.ndarray) -> float:
    denominator = ranked.n_relevant + n_missing
    has = denominator > 0
    found = ranked.hits[has, :k].sum(axis=1)
    return float(np.mean(found / denominator[has])) if has.any() else 0.0


def _psp(ranked: _Ranked, inv_propensity: np.ndarray, ks: list[int]) -> dict[int, float]:
    gains = np.where(ranked.hits, inv_propensity[np.maximum(ranked.ids, 0)], 0.0)
    rel = ranked.relevance
    weighted = sp.csr_matrix((inv_propensity[rel.indices], rel.indices, rel.indptr), rel.shape)
    best_ids, best_valid = _rank_sparse(weighted, max(ks))
    best = np.where(best_valid, inv_propensity[np.maximum(best_ids, 0)], 0.0)
    # column sums then cumsum: the total over documents of the top-k gains, for every k.
    numerator = np.cumsum(gains.sum(axis=0))
    denominator = np.cumsum(best.sum(axis=0))
    return {
        k: float(numerator[k - 1] / denominator[k - 1]) if denominator[k - 1] > 0 else 0.0
        for k in ks
    }


def _rank_against(Y_true: sp.spmatrix, Y_pred: Predictions, k: int) -> _Ranked:
    """Validate shapes, rank ``Y_pred`` to depth k and look every ranked label up in Y_true."""
    if not sp.issparse(Y_true):
        raise TypeError(f"Y_true must be a scipy sparse matrix, got {type(Y_true).__name__}")
    relevance = _canonical(Y_true, drop_zeros=True)
    relevance.data = np.ones_like(relevance.data, dtype=np.float64)
    _check_shapes(relevance.shape, Y_pred)
    ids, valid = ranked_labels(Y_pred, k)
    return _Ranked(ids, _hits(relevance, ids, valid), relevance, np.diff(relevance.indptr))


def _canonical(matrix: sp.spmatrix | sp.sparray, drop_zeros: bool = False) -> sp.csr_matrix:
    """A csr copy with duplicates summed and indices sorted within rows."""
    out = sp.csr_matrix(matrix, copy=True)
    out.sum_duplicates()
    if drop_zeros:
        out.eliminate_zeros()
    return out


def _rank_sparse(scores: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of csr (n_docs, n_labels) rows by :func:`xmc_core.evaluation.ranking.top_k`: ids int64
    (n_docs, k), -1 past a row's end, and valid bool (n_docs, k)."""
    if np.isnan(scores.data).any():
        raise ValueError("Y_pred holds NaN scores")
    ids = top_k(scores, k).padded(k)
    return ids, ids >= 0


def _rank_dense(ranked: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """First k columns of ranked ids (n_docs, k'), -1 padded to (n_docs, k)."""
    if ranked.ndim != 2 or not np.issubdtype(ranked.dtype, np.integer):
        raise ValueError(
            f"dense Y_pred must be an int array (n_docs, k) of ranked label ids, got "
            f"{ranked.dtype} with shape {ranked.shape}"
        )
    if ranked.size and ranked.min() < -1:
        raise ValueError("dense Y_pred: label ids must be >= 0, or -1 as padding")
    ids = np.full((ranked.shape[0], k), -1, dtype=np.int64)
    width = min(k, ranked.shape[1])
    ids[:, :width] = ranked[:, :width]
    ordered = np.sort(ids, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
        raise ValueError("dense Y_pred: a row repeats a label id")
    return ids, ids >= 0


def _hits(relevance: sp.csr_matrix, ids: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """bool (n_docs, k): is ids[i, r] relevant to document i (canonical csr ``relevance``)."""
    n_docs, n_labels = relevance.shape
    if relevance.nnz == 0:
        return np.zeros(ids.shape, dtype=bool)
    rows = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(relevance.indptr))
    true_keys = rows * n_labels + relevance.indices  # sorted: canonical csr is row-major
    query = np.arange(n_docs, dtype=np.int64)[:, None] * n_labels + np.maximum(ids, 0)
    at = np.minimum(np.searchsorted(true_keys, query), len(true_keys) - 1)
    return (true_keys[at] == query) & valid


def _check_shapes(true_shape: tuple[int, int], Y_pred: Predictions) -> None:
    n_docs, n_labels = true_shape
    if sp.issparse(Y_pred):
        if Y_pred.shape != true_shape:
            msg = f"Y_pred has shape {Y_pred.shape}, Y_true {true_shape}: both (n_docs, n_labels)"
            raise ValueError(msg)
        return
    ranked = np.asarray(Y_pred)
    if ranked.ndim != 2 or ranked.shape[0] != n_docs:
        msg = f"dense Y_pred has shape {ranked.shape}, expected ({n_docs}, k) ranked label ids"
        raise ValueError(msg)
    if ranked.size and ranked.max() >= n_labels:
        raise ValueError(f"dense Y_pred holds label id {ranked.max()} >= n_labels={n_labels}")


def _check_ks(ks: Ks) -> list[int]:
    values = [ks] if isinstance(ks, int | np.integer) else list(ks)
    if not values or any(int(k) < 1 for k in values):
        raise ValueError(f"ks={ks!r} must be one or more cut-offs >= 1")
    return list(dict.fromkeys(int(k) for k in values))


def _check_missing(n_missing: np.ndarray | None, n_docs: int) -> np.ndarray:
    if n_missing is None:
        return np.zeros(n_docs, dtype=np.int64)
    missing = np.asarray(n_missing)
    if missing.shape != (n_docs,) or (missing < 0).any():
        raise ValueError(f"n_missing has shape {missing.shape}, expected counts >= 0 ({n_docs},)")
    return missing


def _check_inv_propensity(inv_propensity: np.ndarray, n_labels: int) -> np.ndarray:
    inv = np.asarray(inv_propensity, dtype=np.float64)
    if inv.shape != (n_labels,):
        raise ValueError(f"inv_propensity has shape {inv.shape}, expected ({n_labels},)")
    return inv


def _bucket_lows(buckets: Sequence[int], counts: np.ndarray) -> np.ndarray:
    lows = np.asarray(buckets, dtype=np.int64)
    if lows.ndim != 1 or not len(lows) or lows[0] < 0 or (np.diff(lows) <= 0).any():
        raise ValueError(f"buckets={buckets!r} must be increasing non-negative lower bounds")
    if lows[0] > 0 and (counts < lows[0]).any():
        lows = np.concatenate(([0], lows))
    return lows
