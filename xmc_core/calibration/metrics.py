"""How well probabilities are calibrated, and what a threshold on them gives.

- :func:`top_k_pairs`: each document's ``k`` best predictions joined with the truth.
- :func:`reliability`: the pairs binned by probability (equal-width bins over [0, 1]): per bin
  the count, the mean probability (confidence) and the share relevant (accuracy).
- :func:`ece` / :func:`ece_at_k`: expected calibration error, the bins' ``|accuracy -
  confidence|`` weighted by their share of the pairs (Naeini et al. 2015; Guo et al. 2017);
  ECE@k over each document's top k.
- :func:`threshold_scores`: precision, recall, micro-F1 and macro-F1 of the labels whose
  probability reaches a threshold. Macro-F1 averages ``2 tp / (2 tp + fp + fn)`` over every label
  of the label space, a label with none of the three counting 0 (LibMultiLabel's convention).

``P``: csr (n_docs, n_labels) probabilities, every stored entry a prediction; ``Y``: csr
(n_docs, n_labels), every stored nonzero relevant. Fractions in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.evaluation.ranking import RankedRows, top_k
from xmc_core.linear.beam import pair_labels

N_BINS = 10
"""Equal-width probability bins of the reliability diagram and ECE."""
DEFAULT_THRESHOLD = 0.5
"""The threshold a calibrated model's F1s are reported at when it has none of its own."""


@dataclass(frozen=True)
class Reliability:
    """Per bin ``b`` of ``[b / n, (b + 1) / n)`` (the last one closed): ``counts`` int64 (n,),
    ``confidence`` and ``accuracy`` float64 (n,), 0 where a bin is empty."""

    counts: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray

    @property
    def ece(self) -> float:
        total = int(self.counts.sum())
        if total == 0:
            return 0.0
        gaps = np.abs(self.accuracy - self.confidence)
        return float(np.dot(self.counts, gaps) / total)


@dataclass(frozen=True)
class Pairs:
    """Each document's top-k predictions, best first, document by document: ``values`` float64
    (their scores or probabilities), ``relevant`` bool, ``ranks`` int64 (0 the best), ``docs``
    and ``labels`` int64, all (n_pairs,)."""

    values: np.ndarray
    relevant: np.ndarray
    ranks: np.ndarray
    docs: np.ndarray
    labels: np.ndarray


def ranked_pairs(P: sp.spmatrix, k: int | None = None) -> tuple[np.ndarray, ...]:
    """The top ``k`` (None: every entry) of every document of ``P``, best first, ties by the
    lower label id (:func:`~xmc_core.evaluation.ranking.top_k`): values float64, ranks, docs
    and labels int64, all (n_pairs,)."""
    ranked = top_k(P, k)
    docs, ranks = row_ranks(ranked)
    return ranked.vals.astype(np.float64), ranks, docs, ranked.cols


def row_ranks(ranked: RankedRows) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's row and its place in the row (0 the best): int64 (n_entries,) each."""
    docs = np.repeat(np.arange(ranked.shape[0]), np.diff(ranked.offsets))
    return docs, np.arange(len(ranked.cols)) - ranked.offsets[docs]


def top_k_pairs(P: sp.spmatrix, Y: sp.spmatrix, k: int) -> Pairs:
    """The top ``k`` of every document of ``P`` (:func:`ranked_pairs`), joined with ``Y``."""
    _check_shapes(P, Y)
    values, ranks, docs, labels = ranked_pairs(P, k)
    return Pairs(values, relevant_pairs(Y, docs, labels), ranks, docs, labels)


def reliability(probs: np.ndarray, relevant: np.ndarray, n_bins: int = N_BINS) -> Reliability:
    """``probs`` (n,) in [0, 1] and ``relevant`` (n,) bool binned (see :class:`Reliability`)."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(relevant, dtype=np.float64)
    if p.shape != y.shape or (p.size and (p.min() < 0.0 or p.max() > 1.0)):
        raise ValueError("probabilities must lie in [0, 1], one per outcome")
    bins = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    counts = np.bincount(bins, minlength=n_bins)
    seen = np.maximum(counts, 1)
    confidence = np.bincount(bins, weights=p, minlength=n_bins) / seen
    accuracy = np.bincount(bins, weights=y, minlength=n_bins) / seen
    return Reliability(counts.astype(np.int64), confidence, accuracy)


def ece(probs: np.ndarray, relevant: np.ndarray, n_bins: int = N_BINS) -> float:
    """Expected calibration error of (probability, outcome) pairs."""
    return reliability(probs, relevant, n_bins).ece


def ece_at_k(P: sp.spmatrix, Y: sp.spmatrix, k: int, n_bins: int = N_BINS) -> float:
    """ECE of every document's top ``k`` predictions."""
    pairs = top_k_pairs(P, Y, k)
    return ece(pairs.values, pairs.relevant, n_bins)


def threshold_scores(
    P: sp.spmatrix, Y: sp.spmatrix, threshold: float | np.ndarray
) -> dict[str, float]:
    """``precision``, ``recall``, ``micro_f1`` and ``macro_f1`` of the predictions of ``P``
    whose probability is at least ``threshold`` (one value, or float (n_labels,) per label)."""
    _check_shapes(P, Y)
    P, Y = sp.csr_matrix(P), sp.csr_matrix(Y)
    Y = sp.csr_matrix((np.ones(Y.nnz), Y.indices, Y.indptr), shape=Y.shape)
    Y.sum_duplicates()
    cut = np.asarray(threshold, dtype=np.float64)
    per_entry = cut if cut.ndim == 0 else cut[P.indices]
    keep = P.data >= per_entry
    rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))[keep]
    cols = P.indices[keep]
    hit = relevant_pairs(Y, rows, cols)
    n_labels = P.shape[1]
    tp = np.bincount(cols[hit], minlength=n_labels).astype(np.float64)
    fp = np.bincount(cols[~hit], minlength=n_labels).astype(np.float64)
    fn = np.bincount(Y.indices, minlength=n_labels) - tp
    denom = 2 * tp + fp + fn
    per_label = np.divide(2 * tp, denom, out=np.zeros(n_labels), where=denom > 0)
    TP, FP, FN = tp.sum(), fp.sum(), fn.sum()
    return {
        "precision": float(TP / (TP + FP)) if TP + FP else 0.0,
        "recall": float(TP / (TP + FN)) if TP + FN else 0.0,
        "micro_f1": float(2 * TP / (2 * TP + FP + FN)) if TP + FP + FN else 0.0,
        "macro_f1": float(per_label.mean()) if n_labels else 0.0,
    }


def relevant_pairs(Y: sp.spmatrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Whether ``Y`` holds each (row, label) pair: bool (n,) (:func:`beam.pair_labels`)."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    return pair_labels(Y, rows, cols) > 0


def _check_shapes(P: sp.spmatrix, Y: sp.spmatrix) -> None:
    if not (sp.issparse(P) and sp.issparse(Y)) or P.shape != Y.shape:
        raise ValueError(
            f"probabilities {getattr(P, 'shape', None)} and truth {getattr(Y, 'shape', None)}: "
            "both csr, one shape"
        )


def calibration_metrics(
    P: sp.spmatrix, Y: sp.spmatrix, ks: list[int], threshold: float | np.ndarray
) -> dict[str, float]:
    """``ECE@k`` of probabilities ``P`` against ``Y`` for each ``k`` of ``ks``, and
    ``precision``, ``recall``, ``micro-F1`` and ``macro-F1`` at ``threshold``
    (:func:`threshold_scores`)."""
    at = threshold_scores(P, Y, threshold)
    names = {"precision": "precision", "recall": "recall", "micro_f1": "micro-F1",
             "macro_f1": "macro-F1"}  # fmt: skip
    return {f"ECE@{k}": ece_at_k(P, Y, k) for k in ks} | {names[n]: v for n, v in at.items()}
