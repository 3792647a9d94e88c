"""Diagnostics of a trained model beyond the headline metrics: what to look at when it is off.

- :func:`k_curves`: P@k and nDCG@k for every k up to ``kmax`` (where does precision fall off?).
- :func:`beam_recall_per_level`: per tree level, the share of relevant (doc, node) pairs whose
  node survives the beam (a low value at level t means the beam loses labels there, and no
  ranker below can recover them).
- :func:`training_loss_per_level`: per tree level, the ranker loss over the level's
  teacher-forced (doc, node) pairs (train vs test: over-fitting per level).
- :func:`matcher_loss_history`: XR-Transformer's matcher loss curve per level, read from the
  checkpoints' ``meta.json`` (no torch).
- :func:`reliability_of`: a calibrated model's reliability diagram of its top-k probabilities
  (per probability bin, the mean probability against the share relevant).

Everything is plain numpy / scipy on a loaded ranker; :class:`Diagnostics` gathers them for a
trained model (the per-level ones for a tree ranker) and saves them with their plots.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xmc_core.calibration.metrics import reliability, top_k_pairs
from xmc_core.config import EvalConfig, RankerConfig
from xmc_core.evaluation.metrics import Predictions, ndcg_at_k, precision_at_k, recall_by_frequency
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.beam import beam_search, beam_to_csr, cost_ranges, labelled_child_scores
from xmc_core.linear.levels import binarize, level_targets
from xmc_core.linear.model import XRLinearModel
from xmc_core.storage.artifacts import read_meta, write_meta
from xmc_core.storage.atomic import write_json

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from xmc_core.calibration.calibrator import Calibrator
    from xmc_core.model.contract import Ranker

PAIRS_PER_CHUNK = 1 << 21
"""Soft cap on the (document, node) pairs :func:`training_loss_per_level` scores at a time."""


def k_curves(Y_true: sp.spmatrix, scores: Predictions, kmax: int) -> dict[str, list]:
    """P@k and nDCG@k for k = 1..kmax.

    ``Y_true``: csr (n_docs, n_labels) binary; ``scores``: csr (n_docs, n_labels) or ranked ids
    (n_docs, k'), see :func:`xmc_core.evaluation.metrics.ranked_labels`. Returns ``{"k": [1..kmax],
    "P": [...], "nDCG": [...]}``, fractions in [0, 1].
    """
    if kmax < 1:
        raise ValueError(f"kmax={kmax} must be >= 1")
    ks = list(range(1, kmax + 1))
    precision = precision_at_k(Y_true, scores, ks)
    ndcg = ndcg_at_k(Y_true, scores, ks)
    return {"k": ks, "P": [precision[k] for k in ks], "nDCG": [ndcg[k] for k in ks]}


def beam_recall_per_level(
    ranker: XRLinearModel, X: sp.csr_matrix, Y: sp.csr_matrix, beam_size: int
) -> list[float]:
    """:func:`beam_recall_and_scores`' recalls."""
    return beam_recall_and_scores(ranker, X, Y, beam_size)[0]


def beam_recall_and_scores(
    ranker: XRLinearModel, X: sp.csr_matrix, Y: sp.csr_matrix, beam_size: int
) -> tuple[list[float], sp.csr_matrix]:
    """Per ranker level t: |relevant (doc, node) pairs in the beam| / |relevant pairs|.

    Runs the model's own beam search (its post-processor and bias) keeping ``beam_size`` nodes
    at every level, the last one included (there: the recall of the labels in the top
    ``beam_size``). ``X``: csr (n_docs, n_features) the model's input; ``Y``: csr (n_docs,
    n_labels). A node is relevant when it covers a relevant label. Returns one fraction per
    level (0.0 for a level without relevant pairs), and the search's scores: csr (n_docs,
    n_labels), what ``ranker.predict(X, topk=beam_size)`` gives.
    """
    _check_inputs(ranker, X, Y)
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be >= 1")
    targets = level_targets(sp.csr_matrix(Y), ranker.tree_.C)
    post, bias = ranker.predict_cfg.post_processor, ranker.ranker.bias
    recalls: list[float] = []

    def record(t: int, ids: np.ndarray, scores: np.ndarray) -> None:
        kept = binarize(beam_to_csr(ids, np.ones_like(scores), ranker.chunks_[t].n_nodes))
        relevant = targets[t]
        found = relevant.multiply(kept).sum()
        recalls.append(float(found / relevant.nnz) if relevant.nnz else 0.0)

    widths = [beam_size] * len(ranker.chunks_)
    scores = beam_search(X, ranker.chunks_, widths, post, bias, on_level=record)
    return recalls, scores


def training_loss_per_level(
    ranker: XRLinearModel,
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    cfg: RankerConfig | None = None,
    pairs_per_chunk: int = PAIRS_PER_CHUNK,
) -> list[float]:
    """Per ranker level: the mean loss over its teacher-forced (doc, node) pairs.

    The pairs of level t are (i, j) with j a child of one of document i's relevant parents
    (every node of level 0); the label is +1 when j is relevant to i, else -1, and the score
    ``x_i . W[:-1, j] + bias * W[-1, j]`` with the saved weights. The loss is ``cfg.loss``
    (default: the model's): squared hinge ``max(0, 1 - y s)^2`` or logistic
    ``log(1 + exp(-y s))``, unweighted (no Cp/Cn, no regularizer). ``X``: csr (n_docs,
    n_features); ``Y``: csr (n_docs, n_labels). Only the pairs are scored (the beam search's
    kernel with the relevant parents as the beam), documents in chunks of at most
    ``pairs_per_chunk`` pairs, so time and memory follow the pairs, not documents x nodes.
    0.0 for a level without pairs.
    """
    _check_inputs(ranker, X, Y)
    loss = (cfg or ranker.ranker).loss
    X = sp.csr_matrix(X, dtype=np.float32)
    targets = level_targets(sp.csr_matrix(Y), ranker.tree_.C)
    totals = np.zeros(len(targets))
    counts = np.zeros(len(targets), dtype=np.int64)
    for t, level in enumerate(ranker.chunks_):
        parents = _parents(targets, t, X.shape[0])
        n_pairs = parents @ np.diff(level.child_ptr).astype(np.int64)
        for a, b in cost_ranges(n_pairs, pairs_per_chunk):
            _, scores, y = labelled_child_scores(
                X[a:b], level, parents[a:b], targets[t][a:b], ranker.ranker.bias
            )
            totals[t] += _loss(scores * y, loss).sum()
            counts[t] += scores.size
    return [float(s / n) if n else 0.0 for s, n in zip(totals, counts, strict=True)]


def _parents(targets: list[sp.csr_matrix], t: int, n_docs: int) -> sp.csr_matrix:
    """csr (n_docs, K_t) binary: each document's relevant parents at level t (the root: all)."""
    if t == 0:
        return sp.csr_matrix(np.ones((n_docs, 1), dtype=np.int64))
    parents = binarize(targets[t - 1]).astype(np.int64)
    parents.sort_indices()
    return parents


@dataclass(frozen=True)
class MatcherLevelRecord:
    """A matcher checkpoint folder as the diagnostics read it: only its ``meta.json`` (the loss
    history), so torch is never imported."""

    folder: Path

    @classmethod
    def load(cls, folder: str | Path) -> MatcherLevelRecord:
        read_meta(Path(folder), "MatcherLevel", verify=False)
        return cls(Path(folder))


def matcher_loss_history(
    checkpoint_dirs: Sequence[str | Path],
) -> dict[int, list[tuple[int, float]]]:
    """The training loss of every matcher level: ``{level: [(step, loss), ...]}``.

    Read from each checkpoint folder's ``meta.json`` (``history.records``, one record every
    ``matcher.eval_every`` steps, ``loss`` the mean since the previous record). Levels are the
    tree levels the checkpoints were trained at; a level trained for 0 steps has an empty list.
    """
    history: dict[int, list[tuple[int, float]]] = {}
    for folder in checkpoint_dirs:
        meta = read_meta(Path(folder), "MatcherLevel", verify=False)
        records = meta.get("history", {}).get("records", [])
        history[int(meta["level"])] = [
            (int(r["step"]), float(r["loss"])) for r in records if "loss" in r
        ]
    return dict(sorted(history.items()))


def _check_inputs(ranker: XRLinearModel, X: sp.spmatrix, Y: sp.spmatrix) -> None:
    if X.shape[1] != ranker.n_features_:
        raise ValueError(f"X has {X.shape[1]} features, the model {ranker.n_features_}")
    if Y.shape != (X.shape[0], ranker.n_labels):
        raise ValueError(f"Y has shape {Y.shape}, expected ({X.shape[0]}, {ranker.n_labels})")


def _loss(margins: np.ndarray, kind: str) -> np.ndarray:
    """Per-pair loss of margins ``y * s``."""
    if kind == "logistic":
        return np.logaddexp(0.0, -margins)
    return np.square(np.maximum(0.0, 1.0 - margins))


def reliability_of(P: sp.spmatrix, Y: sp.spmatrix, k: int) -> dict[str, Any]:
    """The reliability diagram of the top ``k`` probabilities of every document of ``P``:
    ``k``, ``ece`` and, per bin, ``counts``, ``confidence`` and ``accuracy``."""
    pairs = top_k_pairs(P, Y, k)
    r = reliability(pairs.values, pairs.relevant)
    return {"k": k, "ece": r.ece, "counts": r.counts.tolist(),
            "confidence": r.confidence.tolist(), "accuracy": r.accuracy.tolist()}  # fmt: skip


DIAGNOSTICS_FILE = "diagnostics.json"
PLOTS_DIR = "plots"
MAX_DOCS = 20_000
"""Documents per split the diagnostics look at (a seeded sample beyond it)."""
MIN_KMAX = 10
"""The k-curves reach at least this k (or the largest ``eval.ks``)."""


@dataclass(frozen=True)
class Diagnostics:
    """A trained model's diagnostics as JSON-ready data (``report``), with its plots.

    Every ranker gets the k-curves and the recall by label frequency per split; a tree ranker
    (XR-Linear, the final ranker of XR-Transformer) also the beam recall and the ranker loss per
    tree level; an XR-Transformer the matcher's loss history.
    """

    report: dict[str, Any]
    folder: Path | None = field(default=None, compare=False)
    """Where it was loaded from (None: computed in this process)."""

    @classmethod
    def compute(
        cls,
        ranker: Ranker,
        label_counts: np.ndarray,
        splits: Mapping[str, SplitFeatures],
        eval_cfg: EvalConfig,
        matcher_checkpoints: Sequence[str | Path] = (),
        max_docs: int = MAX_DOCS,
        calibrator: Calibrator | None = None,
    ) -> Diagnostics:
        """``splits``: the model's input (for XR-Transformer the embedded splits), sampled to
        at most ``max_docs`` documents each (seeded); ``calibrator``: a calibrated model's
        (its reliability diagram)."""
        beam_size = ranker.predict_cfg.beam_size
        kmax = max(MIN_KMAX, *eval_cfg.ks)
        k_recall = max(eval_cfg.ks)
        tree = isinstance(ranker, XRLinearModel)
        out: dict[str, Any] = {
            "beam_size": beam_size if tree else None,
            "loss": ranker.ranker.loss if tree else None,
            "kmax": kmax, "recall_k": k_recall, "n_docs": {}, "k_curves": {},
            "recall_by_frequency": {}, "beam_recall": {}, "training_loss": {},
            "reliability": {},
        }  # fmt: skip
        if not tree:
            log.info("diagnostics: beam recall and loss per level skipped: the ranker has no tree")
        for split, feats in splits.items():
            rows = sample_rows(feats.X.shape[0], max_docs)
            if len(rows) < feats.X.shape[0]:
                log.info(
                    "diagnostics: %s split sampled, %s of %s documents", split,
                    f"{len(rows):,}", f"{feats.X.shape[0]:,}",
                )  # fmt: skip
            X, Y = feats.X[rows], feats.Y[rows]
            if tree and beam_size == kmax:  # one beam search gives the recalls and top-k
                recalls, scores = beam_recall_and_scores(ranker, X, Y, beam_size)
                out["beam_recall"][split] = recalls
            else:
                scores = ranker.predict(X, topk=kmax)
            out["n_docs"][split] = len(rows)
            out["k_curves"][split] = k_curves(Y, scores, kmax)
            out["recall_by_frequency"][split] = recall_by_frequency(
                Y, scores, label_counts, k_recall
            )
            if calibrator is not None:
                P = calibrator.probabilities(scores, label_counts)
                out["reliability"][split] = reliability_of(P, Y, k_recall)
            if isinstance(ranker, XRLinearModel):
                if split not in out["beam_recall"]:
                    out["beam_recall"][split] = beam_recall_per_level(ranker, X, Y, beam_size)
                out["training_loss"][split] = training_loss_per_level(ranker, X, Y)
        history = matcher_loss_history(matcher_checkpoints)
        out["matcher_loss"] = {str(level): points for level, points in history.items()}
        return cls(out)

    def save(self, folder: str | Path) -> None:
        """``diagnostics.json`` (with the plot file names), ``plots/*.png`` and a ``meta.json``
        (its checksum keys the lifecycle stages that read the diagnostics)."""
        from xmc_core.evaluation.plots import write_plots

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        report = {**self.report, "plots": write_plots(self.report, folder / PLOTS_DIR)}
        write_json(folder / DIAGNOSTICS_FILE, report)
        write_meta(folder, "Diagnostics", {})

    @classmethod
    def load(cls, folder: str | Path) -> Diagnostics:
        path = Path(folder) / DIAGNOSTICS_FILE
        return cls(json.loads(path.read_text(encoding="utf-8")), Path(folder))

    def save_to(self, folder: Path) -> Path:
        """The diagnostics as files in ``folder``: a copy of the folder it was loaded from (its
        plots as they are), else saved (:meth:`save`) -> ``folder``."""
        if self.folder is None:
            self.save(folder)
        else:
            shutil.copytree(self.folder, folder)
        return folder


def sample_rows(n_docs: int, max_docs: int) -> np.ndarray:
    """All rows, or ``max_docs`` of them drawn with a fixed seed, sorted."""
    if n_docs <= max_docs:
        return np.arange(n_docs)
    return np.sort(np.random.default_rng(0).choice(n_docs, max_docs, replace=False))


def describe_diagnostics(report: dict[str, Any]) -> str:
    """``beam recall per level: train 100.0/99.9%, test 99.2/76.8%; loss per level: train
    0.0300/0.0332``: the per-level figures, rounded."""

    def per_split(values: dict[str, list[float]], fmt: str) -> str:
        return ", ".join(
            f"{split} " + "/".join(format(v, fmt) for v in levels)
            for split, levels in values.items()
        )

    parts = []
    if report.get("beam_recall"):
        parts.append(f"beam recall per level: {per_split(report['beam_recall'], '.1%')}")
    if report.get("training_loss"):
        parts.append(f"loss per level: {per_split(report['training_loss'], '.4f')}")
    return "; ".join(parts) or "no per-level figures"
