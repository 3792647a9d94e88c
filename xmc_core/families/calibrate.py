"""Calibration as a stage of every family: the carve before featurization, the calibrator after
the family's stages.

:data:`CARVE` holds a share of the training documents out of training
(:mod:`xmc_core.corpus.carve`): the family trains on the rest. :data:`CALIBRATE` predicts the
held-out documents with the trained model (they reach it as any new document would: raw text
or given features, through its own vectorizer and encoder; a run on feature matrices holds rows
out instead, ``families.matrices``), fits a
:class:`~xmc_core.calibration.calibrator.Calibrator` on its top ``predict.topk`` predictions
and returns the model with it. A corpus whose carve would hold fewer than
``calibration.min_docs`` documents is not carved; its model is uncalibrated, and says so.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from xmc_core.calibration.calibrator import Calibrator
from xmc_core.calibration.thresholds import Thresholds
from xmc_core.config import CalibrationConfig, PredictConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.carve import Carve, carve_share, write_carve
from xmc_core.errors import InputError
from xmc_core.features.split_features import SplitFeatures
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import Runner, Stage

log = logging.getLogger(__name__)


def carve(corpus: Corpus, cfg: CalibrationConfig, out: Path) -> None:
    """Write the :class:`~xmc_core.corpus.carve.Carve` of ``corpus`` into ``out``."""
    write_carve(corpus.path, out, cfg.fraction, cfg.max_docs, cfg.seed, cfg.by_group)


def calibrate(
    model: XmcModel, cfg: CalibrationConfig, predict: PredictConfig, carve: Carve | None = None,
    held: SplitFeatures | None = None,
) -> XmcModel:  # fmt: skip
    """``model`` with a calibrator fitted on its top ``predict.topk`` predictions of the held-out
    documents (``carve``: a corpus's, featurized here by the model; ``held``: feature rows, the
    matrices' carve), and the thresholds of ``predict.threshold_policy`` tuned on them when it is
    not ``fixed``."""
    if carve is not None:
        split = model.encode_split(carve.held, "train")
    elif held is not None:
        split = held.with_X(model.features(held.X, []))  # given features: no text to read
    else:
        raise ValueError("calibrate needs the carve or the held-out rows")
    k = predict.topk
    scores = model.predict_features(split.X, topk=k)
    calibrator = Calibrator.fit(scores, split.Y, k, model.label_counts, cfg.seed)
    if predict.threshold_policy != "fixed":
        P = calibrator.probabilities(scores, model.label_counts)
        tuned = Thresholds.tune(
            P, split.Y, predict.threshold_policy, predict.threshold_per_label, cfg.label_min_docs
        )
        calibrator = replace(calibrator, thresholds=tuned)
    return model.with_calibrator(calibrator)


def describe_carve(c: Carve) -> str:
    held, kept = (x.manifest.splits["train"].rows for x in (c.held, c.training))
    return f"{held} training documents held out for calibration, {kept} to train on"


def describe_calibrated(model: XmcModel) -> str:
    c = model.calibrator
    if c is None:
        return "uncalibrated"
    chosen = f"{c.fallback.kind}/{c.grouping}"
    line = f"{chosen} map, held-out Brier score {c.choice.get(chosen, float('nan')):.4f}"
    t = c.thresholds
    if t is not None:
        own = "" if t.per_label is None else f", {int((t.per_label != t.value).sum())} labels' own"
        line += f"; threshold {t.value:.3f} for {t.objective}{own}"
    return line


CARVE = Stage(
    "carve", carve, Carve, {"corpus": Corpus}, writes_folder=True, describe=describe_carve
)
CALIBRATE = Stage(
    "calibrate", calibrate, XmcModel, {"model": XmcModel, "carve": Carve, "held": SplitFeatures},
    describe=describe_calibrated,
)  # fmt: skip


def check_carve(n_train: int, cfg: XmcConfig, where: Path | None) -> bool:
    """Whether the carve of ``n_train`` training documents calibrates: ``calibration.enabled``,
    and about ``calibration.min_docs`` held out (the share of
    :func:`~xmc_core.corpus.carve.carve_share`; said once when too few); a threshold without
    one is an error naming ``where`` (the dataset), before any work."""
    c = cfg.calibration
    n = int(carve_share(n_train, c.fraction, c.max_docs) * n_train) if c.enabled else 0
    if cfg.predict.thresholded and n < c.min_docs:
        what = (
            f"predict.threshold={cfg.predict.threshold}" if cfg.predict.threshold is not None
            else f"predict.threshold_policy={cfg.predict.threshold_policy}"
        )  # fmt: skip
        raise InputError(
            where,
            f"{what} needs a calibrated model, and "
            + ("calibration.enabled is false" if not c.enabled else f"the carve would hold out "
               f"about {n} training documents, fewer than calibration.min_docs={c.min_docs}"),
            "leave the threshold unset, or calibrate: calibration.enabled=true with a "
            "larger calibration.fraction (or a lower calibration.min_docs)",
        )  # fmt: skip
    if c.enabled and n < c.min_docs:
        log.info(
            "calibration: the carve would hold out about %d training documents, fewer than "
            "calibration.min_docs=%d: the model is trained on every one and is uncalibrated",
            n, c.min_docs,
        )  # fmt: skip
    return c.enabled and n >= c.min_docs


def carved(run: Runner, corpus: Any, cfg: XmcConfig) -> tuple[Any, Any]:
    """The corpus to train on and the carve's handle (None: no carve, the corpus itself)."""
    source = run.value(corpus)
    if not check_carve(source.manifest.splits["train"].rows, cfg, source.path):
        return corpus, None
    held = run(CARVE, corpus=corpus, cfg=cfg.calibration)
    return run.source(Corpus, str(run.value(held).training.path)), held


def calibrated(
    run: Runner, outs: dict[str, Any], held: dict[str, Any] | None, cfg: XmcConfig
) -> dict[str, Any]:
    """A family graph's handles ``outs`` with its ``model`` calibrated on ``held``:
    ``{"carve": handle}`` (a corpus's carve) or ``{"held": handle}`` (feature rows); None:
    ``outs`` as they are."""
    if held is None:
        return outs
    return {**outs, "model": run(CALIBRATE, model=outs["model"], cfg=cfg.calibration,
                                  predict=cfg.predict, **held)}  # fmt: skip
