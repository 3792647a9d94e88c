"""A model's probabilities: score maps fitted on a validation carve, chosen on it.

:meth:`Calibrator.fit` takes the carve's top-k predictions (scores of a model that never trained
on those documents) and the carve's true labels, and fits every candidate on one half of the
carve's documents (seeded): an isotonic or a Platt map (:mod:`.maps`), one for all predictions
or one per group, by rank (the best, the 2nd-3rd, the rest) or by the label's training-document
count (:data:`FREQUENCY_EDGES`). The candidate with the lowest Brier score on the other half
wins and is fitted again on the whole carve. A group with fewer than :data:`MIN_GROUP_PAIRS`
pairs to fit on uses the map of all predictions. Every map is monotone in the score, so within a
group the order of the labels is kept.

A calibrator can carry the thresholds tuned on the same carve (:mod:`.thresholds`). Saved as a
folder: ``meta.json`` (the maps' JSON, the grouping, what the choice saw) and ``thresholds/``
when tuned, no pickle; :meth:`Calibrator.load` checks what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp

from xmc_core.calibration.maps import IsotonicMap, PlattMap, ScoreMap, map_from_dict
from xmc_core.calibration.metrics import row_ranks, top_k_pairs
from xmc_core.calibration.thresholds import Thresholds
from xmc_core.evaluation.ranking import RankedRows, top_k
from xmc_core.storage.artifacts import meta_fields, read_meta, write_meta

Grouping = Literal["none", "rank", "frequency"]
GROUPINGS: tuple[Grouping, ...] = ("none", "rank", "frequency")
KINDS = (IsotonicMap, PlattMap)
RANK_EDGES = (1, 3)
"""Group boundaries by rank (0 the best): rank 0, ranks 1-2, ranks 3 and on."""
FREQUENCY_EDGES = (1, 11, 101)
"""Group boundaries by the label's training documents: 0, 1-10, 11-100, 101 and more."""
MIN_GROUP_PAIRS = 50
"""Pairs a group needs to get its own map."""
THRESHOLDS_DIR = "thresholds"


@dataclass(frozen=True)
class Calibrator:
    """``grouping``: how predictions are grouped; ``maps``: one per group (index 0 .. the
    number of groups - 1), None where the group uses ``fallback``, the map of all predictions;
    ``choice``: the held-out Brier score of every candidate, ``"{kind}/{grouping}"``;
    ``thresholds``: tuned on the carve (None: not tuned)."""

    grouping: Grouping
    fallback: ScoreMap
    maps: tuple[ScoreMap | None, ...] = ()
    choice: dict[str, float] = field(default_factory=dict)
    thresholds: Thresholds | None = None

    @classmethod
    def fit(
        cls, scores: sp.spmatrix, Y: sp.spmatrix, k: int, label_docs: np.ndarray, seed: int = 0
    ) -> Calibrator:
        """Fit on the carve: ``scores`` csr (n_docs, n_labels) the model's predictions, ``Y``
        csr (n_docs, n_labels) the truth, ``k`` predictions per document, ``label_docs`` int
        (n_labels,) each label's training documents."""
        pairs = top_k_pairs(scores, Y, k)
        if not len(pairs.values):
            raise ValueError("no prediction on the calibration carve: nothing to fit")
        if len(label_docs) != scores.shape[1]:
            raise ValueError(f"{len(label_docs)} label counts for {scores.shape[1]} labels")
        s, y = pairs.values, pairs.relevant.astype(np.float64)
        counts = np.asarray(label_docs)[pairs.labels]
        groups = {g: _groups(g, pairs.ranks, counts) for g in GROUPINGS}
        half = np.random.default_rng([seed & (2**63 - 1), 0xCA1]).random(scores.shape[0]) < 0.5
        fit_on, held = half[pairs.docs], ~half[pairs.docs]
        choice: dict[str, float] = {}
        if fit_on.any() and held.any():
            for kind in KINDS:
                for g in GROUPINGS:
                    c = _fitted(kind, g, s[fit_on], y[fit_on], groups[g][fit_on])
                    p = c._apply(s[held], groups[g][held])
                    choice[f"{kind.kind}/{g}"] = float(np.mean((p - y[held]) ** 2))
        best = min(choice, key=choice.__getitem__) if choice else "isotonic/none"
        kind = IsotonicMap if best.startswith("isotonic") else PlattMap
        grouping: Grouping = best.split("/")[1]  # type: ignore[assignment]
        chosen = _fitted(kind, grouping, s, y, groups[grouping])
        return cls(chosen.grouping, chosen.fallback, chosen.maps, choice)

    def probabilities(self, scores: sp.spmatrix, label_docs: np.ndarray) -> sp.csr_matrix:
        """csr (n_docs, n_labels) with the entries of ``scores``, each score replaced by its
        probability (the rank is the entry's place in its row, best first)."""
        ranked = top_k(scores)
        probs = self.ranked_probabilities(ranked, label_docs)
        docs, _ = row_ranks(ranked)
        return sp.csr_matrix((probs, (docs, ranked.cols)), shape=scores.shape)

    def ranked_probabilities(self, ranked: RankedRows, label_docs: np.ndarray) -> np.ndarray:
        """The probability of every entry of ``ranked`` (rows best first, as
        :func:`~xmc_core.evaluation.ranking.top_k` ranks them): float64 (n_entries,)."""
        if len(label_docs) != ranked.shape[1]:
            raise ValueError(f"{len(label_docs)} label counts for {ranked.shape[1]} labels")
        _, ranks = row_ranks(ranked)
        counts = np.asarray(label_docs)[ranked.cols]
        return self._apply(ranked.vals.astype(np.float64), _groups(self.grouping, ranks, counts))

    def _apply(self, s: np.ndarray, group: np.ndarray) -> np.ndarray:
        out = self.fallback(s)
        for g, m in enumerate(self.maps):
            if m is not None and (group == g).any():
                out[group == g] = m(s[group == g])
        return out

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.thresholds is not None:
            self.thresholds.save(folder / THRESHOLDS_DIR)
        write_meta(folder, "Calibrator", {
            "grouping": self.grouping,
            "fallback": self.fallback.to_dict(),
            "maps": [None if m is None else m.to_dict() for m in self.maps],
            "choice": self.choice, "thresholds": self.thresholds is not None,
        })  # fmt: skip

    @classmethod
    def load(cls, folder: str | Path, n_labels: int | None = None) -> Calibrator:
        """Read a folder :meth:`save` wrote (``n_labels``: the model's, which per-label
        thresholds must match)."""
        meta = read_meta(folder, "Calibrator")
        with meta_fields(folder):
            grouping = meta["grouping"]
            if grouping not in GROUPINGS:
                raise ValueError(f"grouping {grouping!r} is not one of {GROUPINGS}")
            maps = tuple(None if m is None else map_from_dict(m) for m in meta["maps"])
            if len(maps) != _n_groups(grouping):
                raise ValueError(f"{len(maps)} maps for grouping {grouping}")
            choice = {str(k): float(v) for k, v in dict(meta["choice"]).items()}
            tuned = None
            if meta.get("thresholds"):
                tuned = Thresholds.load(Path(folder) / THRESHOLDS_DIR, n_labels)
            return cls(grouping, map_from_dict(meta["fallback"]), maps, choice, tuned)


def _fitted(
    kind: type[IsotonicMap] | type[PlattMap], grouping: Grouping, s: np.ndarray, y: np.ndarray,
    group: np.ndarray,
) -> Calibrator:  # fmt: skip
    """A calibrator of one map ``kind`` per group of ``grouping`` fitted on the pairs."""
    fallback = kind.fit(s, y)
    maps = tuple(
        kind.fit(s[group == g], y[group == g]) if (group == g).sum() >= MIN_GROUP_PAIRS else None
        for g in range(_n_groups(grouping))
    )
    return Calibrator(grouping, fallback, maps)


def _n_groups(grouping: Grouping) -> int:
    return {"none": 0, "rank": len(RANK_EDGES) + 1, "frequency": len(FREQUENCY_EDGES) + 1}[grouping]


def _groups(grouping: Grouping, ranks: np.ndarray, label_docs: np.ndarray) -> np.ndarray:
    """Each pair's group under ``grouping``: int64 (n,)."""
    if grouping == "rank":
        return np.searchsorted(RANK_EDGES, ranks, side="right").astype(np.int64)
    if grouping == "frequency":
        return np.searchsorted(FREQUENCY_EDGES, label_docs, side="right").astype(np.int64)
    return np.zeros(len(ranks), dtype=np.int64)
