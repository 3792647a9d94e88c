"""Thresholds tuned on the calibration carve: the probability a label needs to be returned.

:meth:`Thresholds.tune` takes the carve's probabilities (a calibrated model's top-k predictions
of documents it did not train on) and their truth, and picks the one threshold that maximizes
micro-F1, macro-F1 or their sum (``objective``) over candidate thresholds: the carve's
probabilities themselves, at most :data:`MAX_CANDIDATES` of them (evenly spaced quantiles).
``per_label``: each label with at least ``min_positives`` relevant carve documents gets its
own threshold too, the one that maximizes its own F1 (the best for macro-F1, label by label,
as LibMultiLabel's ``train_thresholding`` tunes per label); the other labels keep the global
one. A label whose best F1 on the carve is 0 keeps the global threshold. A label's own
threshold lies halfway between the lowest carve probability it keeps and the highest it drops
(the same decisions on the carve; a threshold at the kept probability itself is the highest
that F1 allows, and missed the label's next documents more often on validation carves:
``benchmarks/notes/2026-11-29-issue-37-calibration.md``).

Macro-F1 and micro-F1 follow :func:`~xmc_core.calibration.metrics.threshold_scores`: the
carve's relevant labels outside the predictions count as misses. Saved as a folder
(``meta.json``; the per-label thresholds in ``per_label.npz``), no pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp

from xmc_core.calibration.metrics import relevant_pairs, threshold_scores
from xmc_core.config import CalibrationConfig
from xmc_core.storage.artifacts import load_arrays, meta_fields, read_meta, save_arrays, write_meta

Objective = Literal["micro_f1", "macro_f1", "sum"]
OBJECTIVES: tuple[Objective, ...] = ("micro_f1", "macro_f1", "sum")
MAX_CANDIDATES = 200
"""Candidate global thresholds: the carve's distinct probabilities, thinned to this many."""
PER_LABEL_FILE = "per_label.npz"
LABEL_MIN_DOCS: int = CalibrationConfig.model_fields["label_min_docs"].default


@dataclass(frozen=True)
class Thresholds:
    """``objective``: what was maximized; ``value``: the global threshold; ``per_label``:
    float64 (n_labels,), each label's threshold (None: the global one for every label);
    ``carve``: the objective's figures on the carve at ``value``."""

    objective: Objective
    value: float
    per_label: np.ndarray | None = None
    carve: dict[str, float] | None = None

    def of(self, labels: np.ndarray) -> np.ndarray | float:
        """The threshold of each label id of ``labels``, or the global one."""
        return self.value if self.per_label is None else self.per_label[labels]

    @classmethod
    def tune(
        cls, P: sp.spmatrix, Y: sp.spmatrix, objective: Objective, per_label: bool = False,
        min_positives: int = LABEL_MIN_DOCS,
    ) -> Thresholds:  # fmt: skip
        """Tune on probabilities ``P`` csr (n_docs, n_labels) against ``Y`` csr (n_docs,
        n_labels) (see the module docstring)."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
        P = sp.csr_matrix(P)
        best, figures = _global(P, Y, objective)
        if not per_label:
            return cls(objective, best, None, figures)
        own = _per_label(P, Y, best, min_positives)
        return cls(objective, best, own, figures)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.per_label is not None:
            save_arrays(folder / PER_LABEL_FILE, thresholds=self.per_label)
        write_meta(folder, "Thresholds", {
            "objective": self.objective, "value": self.value,
            "per_label": self.per_label is not None, "carve": self.carve or {},
        })  # fmt: skip

    @classmethod
    def load(cls, folder: str | Path, n_labels: int | None = None) -> Thresholds:
        """Read a folder :meth:`save` wrote (``n_labels``: the per-label array's length is
        checked against it)."""
        folder = Path(folder)
        meta = read_meta(folder, "Thresholds")
        with meta_fields(folder):
            objective = meta["objective"]
            if objective not in OBJECTIVES:
                raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
            value = float(meta["value"])
            per_label = None
            if meta["per_label"]:
                per_label = load_arrays(folder / PER_LABEL_FILE)["thresholds"].astype(np.float64)
                if per_label.ndim != 1 or (n_labels is not None and len(per_label) != n_labels):
                    raise ValueError(f"per_label holds {per_label.shape}, not ({n_labels},)")
            for v in [value, *(per_label if per_label is not None else [])]:
                if not 0.0 <= v <= 1.0:
                    raise ValueError(f"threshold {v} is not a probability")
            carve = {str(k): float(v) for k, v in dict(meta["carve"]).items()}
            return cls(objective, value, per_label, carve)


def _global(P: sp.csr_matrix, Y: sp.spmatrix, objective: Objective) -> tuple[float, dict]:
    """The candidate threshold with the best ``objective`` on (P, Y), and its figures (ties:
    the higher threshold: fewer labels for the same figure). Every candidate is scored at once:
    each label's hits and misses above each candidate, from one pass over the entries."""
    candidates = np.unique(P.data)
    if len(candidates) > MAX_CANDIDATES:
        candidates = np.unique(np.quantile(P.data, np.linspace(0, 1, MAX_CANDIDATES)))
    if not len(candidates):
        return 0.5, {}
    micro, macro = _candidate_f1s(P, Y, candidates)
    value = {"micro_f1": micro, "macro_f1": macro, "sum": micro + macro}[objective]
    best = float(candidates[len(value) - 1 - int(np.argmax(value[::-1]))])  # ties: the higher
    return best, threshold_scores(P, Y, best)


LABEL_BLOCK = 4096
"""Labels counted together when every candidate is scored: bounds the (labels, candidates)
count arrays to a few MB whatever the label space."""


def _candidate_f1s(
    P: sp.csr_matrix, Y: sp.spmatrix, candidates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Micro-F1 and macro-F1 of the entries of ``P`` at each of the ascending ``candidates``
    (as :func:`~xmc_core.calibration.metrics.threshold_scores` counts them): float64 (m,)
    each. A label with no entry has no hit at any candidate: it adds 0 to macro-F1's sum."""
    m, n_labels = len(candidates), P.shape[1]
    hit, all_positives = _entry_hits(P, Y)
    top = np.searchsorted(candidates, P.data, side="right") - 1  # kept at candidates 0..top
    seen, label = np.unique(P.indices[top >= 0], return_inverse=True)
    top, hit = top[top >= 0], hit[top >= 0]
    positives = all_positives[seen].astype(np.float64)
    TP, FP, f1_sum = np.zeros(m), np.zeros(m), np.zeros(m)
    for lo in range(0, len(seen), LABEL_BLOCK):
        n = min(LABEL_BLOCK, len(seen) - lo)
        block = (label >= lo) & (label < lo + n)
        at, block_hit = (label[block] - lo) * m + top[block], hit[block]
        tp, fp = (_kept_counts(at[h], n, m) for h in (block_hit, ~block_hit))
        denom = tp + fp + positives[lo : lo + n, None]  # 2 tp + fp + fn
        f1_sum += np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0).sum(axis=0)
        TP, FP = TP + tp.sum(axis=0), FP + fp.sum(axis=0)
    micro_denom = TP + FP + float(all_positives.sum())
    micro = np.divide(2 * TP, micro_denom, out=np.zeros(m), where=micro_denom > 0)
    return micro, (f1_sum / n_labels if n_labels else np.zeros(m))


def _entry_hits(P: sp.csr_matrix, Y: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """Whether each stored entry of ``P`` is relevant in ``Y`` (bool, P.nnz) and each label's
    relevant documents (int64, n_labels), every stored entry of ``Y`` counted once (as
    :func:`~xmc_core.calibration.metrics.threshold_scores` counts them)."""
    Yc = sp.csr_matrix((np.ones(Y.nnz), Y.indices, Y.indptr), shape=Y.shape)
    Yc.sum_duplicates()
    rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
    hit = relevant_pairs(Yc, rows, P.indices)
    return hit, np.bincount(Yc.indices, minlength=P.shape[1])


def _kept_counts(at: np.ndarray, n: int, m: int) -> np.ndarray:
    """float64 (n, m): for entries at flat positions ``at`` (label * m + highest candidate that
    keeps them), how many each label keeps at each candidate (those at it or above)."""
    counts = np.bincount(at, minlength=n * m).reshape(n, m)
    return np.cumsum(counts[:, ::-1], axis=1)[:, ::-1].astype(np.float64)


def _per_label(P: sp.csr_matrix, Y: sp.spmatrix, fallback: float, min_positives: int) -> np.ndarray:
    """Each label's F1-best threshold on the carve, ``fallback`` for labels with fewer than
    ``min_positives`` relevant carve documents or no hit among their predictions."""
    n_labels = P.shape[1]
    out = np.full(n_labels, fallback, dtype=np.float64)
    if not P.nnz:
        return out
    hit, positives = _entry_hits(P, Y)
    labels, probs, hit = P.indices.astype(np.int64), P.data.astype(np.float64), hit.astype(float)
    order = np.lexsort((-probs, labels))  # by label, then the most probable first
    labels, probs, hit = labels[order], probs[order], hit[order]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    sizes = np.diff(np.r_[starts, len(labels)])
    first = np.repeat(starts, sizes)
    tp = np.cumsum(hit)
    tp -= np.repeat(np.r_[0.0, tp][starts], sizes)  # hits from the label's first pair on
    kept = np.arange(len(labels)) - first + 1  # tp + fp at a threshold of this probability
    f1 = 2 * tp / (kept + positives[labels])  # 2 tp / (2 tp + fp + fn)
    last_of_tie = np.r_[(labels[1:] != labels[:-1]) | (probs[1:] != probs[:-1]), True]
    f1[~last_of_tie] = -1.0  # a threshold keeps every pair of an equal probability
    best = np.maximum.reduceat(f1, starts)
    eligible = (best > 0) & (positives[labels[starts]] >= min_positives)
    for s, e in zip(starts[eligible], (starts + sizes)[eligible], strict=True):
        kept_to = s + int(np.argmax(f1[s:e]))  # ties: the higher threshold
        below = probs[kept_to + 1] if kept_to + 1 < e else probs[kept_to]
        halfway = (probs[kept_to] + below) / 2.0
        out[labels[s]] = halfway if halfway > below else probs[kept_to]
    return out
