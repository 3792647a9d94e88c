"""The deployable model: raw text in, ranked labels out, for every family.

A folder holding the TF-IDF vectorizer, the label index, the family's **encoder** (documents ->
the ranker's input) and **ranker** (see :mod:`xmc_core.model.contract`), and the training label
counts (for propensity-scored metrics). ``meta.json`` names the family and each part's class;
:mod:`xmc_core.model.registry` maps them back, so loading never branches on the family. No
pickle anywhere.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.calibration.calibrator import Calibrator
from xmc_core.errors import XmcError
from xmc_core.evaluation.ranking import RankedRows, top_k
from xmc_core.features.labels import LabelIndex
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.model import registry
from xmc_core.model.contract import Encoder, Ranker
from xmc_core.model.layout import CALIBRATION_DIR, MODEL_FORMAT, model_layout, vectorizer_class
from xmc_core.model.model_folder import write_records
from xmc_core.storage.artifacts import load_arrays, read_meta, save_arrays, write_meta
from xmc_core.storage.atomic import atomic_dir

if TYPE_CHECKING:
    from xmc_core.config import EvalConfig, XmcConfig
    from xmc_core.corpus import Corpus
    from xmc_core.features.matrices import GivenFeatures
    from xmc_core.features.split_features import SplitFeatures

log = logging.getLogger(__name__)


class TfidfEncoder:
    """The encoder of a TF-IDF-only family: the ranker's input is the TF-IDF rows."""

    uses_text = False

    def transform(self, X: sp.csr_matrix, texts: Any = None) -> sp.csr_matrix:
        return X

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_meta(folder, "TfidfEncoder", {})

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> TfidfEncoder:
        read_meta(folder, "TfidfEncoder")
        return cls()


class XmcModel:
    """``vectorizer`` + ``labels`` + ``encoder`` + ``ranker`` of family ``family``;
    ``label_counts``: (n_labels,) training frequency; ``n_train_docs``: training documents.
    ``vectorizer``: TF-IDF, or :class:`~xmc_core.features.matrices.GivenFeatures` for a model
    trained on feature matrices (it predicts from features only). ``start``: how its training
    started, when it was a warm start (``xmc_core.families.warm``: the champion it started
    from and what it reused); None: from nothing (cold). ``calibrator``: its scores' map to
    probabilities (:mod:`xmc_core.calibration`), None: uncalibrated (a model trained without a
    carve, or saved before xmc calibrated)."""

    def __init__(
        self,
        family: str,
        vectorizer: TfidfVectorizer | GivenFeatures,
        labels: LabelIndex,
        encoder: Encoder,
        ranker: Ranker,
        label_counts: np.ndarray,
        n_train_docs: int,
        start: dict[str, Any] | None = None,
        calibrator: Calibrator | None = None,
    ) -> None:
        if len(labels) != ranker.n_labels or len(label_counts) != len(labels):
            raise ValueError(
                f"{len(labels)} label names, {ranker.n_labels} ranker labels, "
                f"{len(label_counts)} label counts"
            )
        self.family = family
        self.vectorizer = vectorizer
        self.labels = labels
        self.encoder = encoder
        self.ranker = ranker
        self.label_counts = label_counts
        self.n_train_docs = n_train_docs
        self.start = start
        self.calibrator = calibrator
        self._cut_logged = False

    def with_encoder(self, encoder: Encoder) -> XmcModel:
        """This model with another encoder (e.g. the same weights on another runtime)."""
        return XmcModel(
            self.family, self.vectorizer, self.labels, encoder, self.ranker, self.label_counts,
            self.n_train_docs, self.start, self.calibrator,
        )  # fmt: skip

    def with_calibrator(self, calibrator: Calibrator | None) -> XmcModel:
        """This model with its scores mapped to probabilities by ``calibrator``."""
        return XmcModel(
            self.family, self.vectorizer, self.labels, self.encoder, self.ranker,
            self.label_counts, self.n_train_docs, self.start, calibrator,
        )  # fmt: skip

    def probabilities(self, scores: sp.csr_matrix) -> sp.csr_matrix:
        """``scores`` csr (n_docs, n_labels) of this model with each score replaced by its
        probability (the rank: the entry's place in its row, best first)."""
        return self.calibrated().probabilities(scores, self.label_counts)

    def ranked_probabilities(self, ranked: RankedRows) -> np.ndarray:
        """The probability of each entry of ``ranked`` (its scores, rows best first)."""
        return self.calibrated().ranked_probabilities(ranked, self.label_counts)

    def cut(self, threshold: float | None = None) -> tuple[float | np.ndarray | None, bool]:
        """The threshold predictions are cut at (``threshold``; else the one tuned on the
        carve, float or float64 (n_labels,) per label; else ``predict.threshold``; None: no
        cut) and ``predict.at_least_one``."""
        own = self.ranker.predict_cfg
        tuned = None if self.calibrator is None else self.calibrator.thresholds
        if threshold is None and tuned is not None:
            return (tuned.value if tuned.per_label is None else tuned.per_label), own.at_least_one
        return (own.threshold if threshold is None else threshold), own.at_least_one

    def calibrated(self) -> Calibrator:
        """The calibrator; an uncalibrated model is an error saying how to get one."""
        if self.calibrator is None:
            raise XmcError(
                "this model is uncalibrated: it has scores, not probabilities\n"
                "  fix: retrain it with calibration.enabled=true on a corpus large enough for "
                "the carve (calibration.min_docs)"
            )
        return self.calibrator

    def features(self, X: sp.csr_matrix, texts: list[str | None] | pa.Array) -> sp.csr_matrix:
        """The ranker's input: the encoder's transform of TF-IDF rows ``X`` and ``texts``."""
        return self.encoder.transform(X, texts)

    def predict_features(
        self, X: sp.csr_matrix, topk: int | None = None, beam_size: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of encoded documents (:meth:`features`)."""
        return self.ranker.predict(X, beam_size=beam_size, topk=topk)

    @property
    def takes_text(self) -> bool:
        """Whether the model featurizes raw text (False: trained on given feature matrices)."""
        from xmc_core.features.matrices import GivenFeatures  # here: an import cycle otherwise

        return not isinstance(self.vectorizer, GivenFeatures)

    def predict(
        self,
        texts: list[str | None] | pa.Array,
        topk: int | None = None,
        beam_size: int | None = None,
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels) of raw texts (each cut to ``predict.max_doc_chars``)."""
        texts = self.capped(texts)
        X = self.features(self.vectorizer.transform(texts), texts)
        return self.predict_features(X, topk, beam_size)

    def encode_split(self, corpus: Corpus, split: str) -> SplitFeatures:
        """One split of a dataset folder as this model's input (its vectorizer and labels,
        then its encoder)."""
        from xmc_core.features import stages
        from xmc_core.features.split_features import SplitFeatures

        tok = self.vectorizer.tokenizer
        parts = [
            stages.featurize_partition(
                corpus, ref, stages.count_partition(corpus, ref, tok), self.vectorizer, self.labels
            )
            for ref in corpus.partitions(split)
        ]
        return self.encode(SplitFeatures.concat(parts), corpus, split)

    def encode(self, feats: SplitFeatures, corpus: Corpus, split: str) -> SplitFeatures:
        """``feats`` (TF-IDF of ``split``) as this model's input; reads the texts only for an
        encoder that uses them."""
        if not self.encoder.uses_text:  # e.g. TF-IDF itself, or Astec's bag of embeddings
            X = self.features(feats.X, [])
            return feats if X is feats.X else feats.with_X(X)
        texts = corpus.read_split(split, ["text"]).column("text")
        return feats.with_X(self.features(feats.X, texts))

    def evaluate(
        self,
        split: SplitFeatures,
        cfg: EvalConfig,
        beam_size: int | None = None,
        topk: int | None = None,
    ) -> dict[str, float]:
        """P@k, nDCG@k, R@k and PSP@k on an encoded split (predicting the top max(ks, topk),
        at least 10); when the split holds labels the model has no training document of (in
        its index or not): ``R@5 unseen``, ``R@10 unseen``, ``P@1 seen`` and ``P@5 seen``
        (:mod:`xmc_core.evaluation.unseen`); for a calibrated model, ``ECE@k`` and the F1s at
        its threshold (:func:`~xmc_core.calibration.metrics.calibration_metrics`)."""
        from xmc_core.calibration.metrics import DEFAULT_THRESHOLD, calibration_metrics
        from xmc_core.evaluation.metrics import evaluate
        from xmc_core.evaluation.unseen import RECALL_KS, unseen_metrics

        k = max([*cfg.ks, topk or self.ranker.predict_cfg.topk, *RECALL_KS])
        scores = self.predict_features(split.X, topk=k, beam_size=beam_size)
        out = evaluate(split.Y, scores, cfg, self.label_counts, self.n_train_docs)
        if split.unknown_labels or not self.label_counts.all():
            out |= unseen_metrics(split.Y, scores, self.label_counts, split.unknown_labels)
        if self.calibrator is not None:
            threshold = self.cut()[0]
            cut = DEFAULT_THRESHOLD if threshold is None else threshold
            out |= calibration_metrics(self.probabilities(scores), split.Y, cfg.ks, cut)
        return out

    def capped(self, texts: list[str | None] | pa.Array) -> list[str | None] | pa.Array:
        """``texts`` with each cut to its first ``predict.max_doc_chars`` characters (the
        first cut is logged, once per model object: once per run)."""
        cap = self.ranker.predict_cfg.max_doc_chars
        if cap is None:
            return texts
        if isinstance(texts, pa.Array | pa.ChunkedArray):
            n_long = pc.sum(pc.greater(pc.utf8_length(texts), cap)).as_py() or 0
            capped = pc.utf8_slice_codeunits(texts, 0, cap) if n_long else texts
        else:
            n_long = sum(1 for t in texts if t is not None and len(t) > cap)
            capped = (
                [t[:cap] if t is not None and len(t) > cap else t for t in texts]
                if n_long
                else texts
            )
        if n_long and not self._cut_logged:
            self._cut_logged = True
            log.warning(
                "%d document(s) longer than predict.max_doc_chars=%d characters: each is cut to "
                "its first %d characters (logged once per run)",
                n_long, cap, cap,
            )  # fmt: skip
        return capped if n_long else texts

    def top_labels(self, scores: sp.csr_matrix) -> list[list[tuple[str, float]]]:
        """Each row of a prediction csr (n_docs, n_labels) as ``[(label, score), ...]``, best
        first (ties: lower label id, see :func:`xmc_core.evaluation.ranking.top_k`)."""
        ranked = top_k(scores)
        pairs = list(zip(self.labels.decode(ranked.cols), ranked.vals.tolist(), strict=True))
        return [pairs[lo:hi] for lo, hi in pairwise(ranked.offsets.tolist())]

    def save(self, folder: str | Path) -> None:
        """``vectorizer/``, ``labels/``, ``encoder/``, ``ranker/``, ``label_counts.npz``,
        ``meta.json`` (family, the parts' classes)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.vectorizer.save(folder / "vectorizer")
        self.labels.save(folder / "labels")
        self.encoder.save(folder / "encoder")
        self.ranker.save(folder / "ranker")
        save_arrays(folder / "label_counts.npz", counts=self.label_counts)
        if self.calibrator is not None:
            self.calibrator.save(folder / CALIBRATION_DIR)
        fields = {
            "model_format": MODEL_FORMAT,
            "family": self.family,
            "encoder": type(self.encoder).__name__,
            "ranker": type(self.ranker).__name__,
            "n_train_docs": self.n_train_docs,
            "n_labels": len(self.labels),
        }
        if not isinstance(self.vectorizer, TfidfVectorizer):  # absent: TF-IDF (older folders)
            fields["vectorizer"] = type(self.vectorizer).__name__
        if self.start is not None:  # absent: a cold start (or saved before xmc recorded it)
            fields["start"] = self.start
        if self.calibrator is not None:  # absent: uncalibrated (or saved before xmc calibrated)
            fields["calibration"] = CALIBRATION_DIR
        write_meta(folder, "XmcModel", fields)

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> XmcModel:
        """Read a folder written by :meth:`save` (``device``: where an encoder's network runs;
        a format-1 folder of an older xmc loads too)."""
        folder = Path(folder)
        layout = model_layout(folder)
        vectorizer_cls = vectorizer_class(folder, layout["vectorizer"])
        encoder_cls = registry.part_class(layout["encoder"], folder / "meta.json")
        ranker_cls = registry.part_class(layout["ranker"], folder / "meta.json")
        encoder_dir = layout["encoder_dir"]  # None: a format-1 XR-Linear model (no encoder/)
        encoder = (
            encoder_cls() if encoder_dir is None else encoder_cls.load(folder / encoder_dir, device)
        )
        labels = LabelIndex.load(folder / "labels")
        return cls(
            layout["family"],
            vectorizer_cls.load(folder / "vectorizer"),
            labels,
            encoder,
            ranker_cls.load(folder / "ranker"),
            load_arrays(folder / "label_counts.npz")["counts"],
            layout["n_train_docs"],
            layout.get("start"),
            _load_calibrator(folder, layout, len(labels)),
        )


def save_model_folder(
    model_dir: str | Path,
    model: XmcModel,
    cfg: XmcConfig,
    metrics: dict[str, dict[str, float]],
    overwrite: bool = False,
    records: dict[str, Any] | None = None,
) -> None:
    """A model folder, atomically: the model and its records
    (:func:`~xmc_core.model.model_folder.write_records`: ``config.yaml``, ``metrics.json``
    from ``metrics``: ``{split: {name: value}}``, ``{}`` when none, and ``records``: more JSON
    files, file name -> content, e.g. ``training.json``)."""
    with atomic_dir(Path(model_dir), overwrite=overwrite) as tmp:
        model.save(tmp)
        write_records(tmp, cfg, metrics, records)


class ModelRanker:
    """An ``XmcModel`` folder's ranker, training label counts and calibrator (None:
    uncalibrated), loaded without its encoder (for work on already-encoded splits:
    diagnostics)."""

    def __init__(
        self, ranker: Ranker, label_counts: np.ndarray, calibrator: Calibrator | None = None
    ) -> None:
        self.ranker, self.label_counts, self.calibrator = ranker, label_counts, calibrator

    @classmethod
    def load(cls, folder: str | Path) -> ModelRanker:
        folder = Path(folder)
        ranker, counts = load_ranker(folder)
        return cls(ranker, counts, _load_calibrator(folder, model_layout(folder), len(counts)))


def load_ranker(folder: str | Path) -> tuple[Ranker, np.ndarray]:
    """The ranker and the training label counts (n_labels,) of an ``XmcModel`` folder,
    without its encoder (for work on already-encoded splits, e.g. diagnostics)."""
    folder = Path(folder)
    layout = model_layout(folder)
    ranker = registry.part_class(layout["ranker"], folder / "meta.json").load(folder / "ranker")
    return ranker, load_arrays(folder / "label_counts.npz")["counts"]


def _load_calibrator(
    folder: Path, layout: dict[str, Any], n_labels: int | None = None
) -> Calibrator | None:
    """The calibrator a model folder's meta.json names (its thresholds for ``n_labels``
    labels), or None (uncalibrated)."""
    if layout.get("calibration") is None:
        return None
    return Calibrator.load(folder / CALIBRATION_DIR, n_labels)
