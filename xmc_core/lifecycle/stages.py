"""The lifecycle's stages after a model is trained: MLflow tracking, the version's registration,
the gated promotion and the run report. Evaluation on the train split and the diagnostics are
``families.common``'s ``EVALUATE`` and ``DIAGNOSE``; batch prediction is
:mod:`xmc_core.lifecycle.predict`.

Tracking, registration and promotion change an MLflow store, so each call is keyed on
``run_key`` (the training run's identity: the flow run's id, or a fresh id per ``xmc train``)
besides its inputs: a rerun of the same flow run reuses its MLflow run and its version, a new
run tracks anew.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.evaluation.diagnostics import Diagnostics
from xmc_core.families.common import Metrics
from xmc_core.lifecycle.artifacts import (
    REPORT_FILE,
    TABLE_FILE,
    GateDecision,
    ModelFolder,
    RunReportFiles,
    TrackedRun,
)
from xmc_core.lifecycle.report import gather_report
from xmc_core.stages.graph import Stage
from xmc_core.storage.artifacts import write_meta
from xmc_core.storage.atomic import write_json, write_text

log = logging.getLogger(__name__)


def _evaluation_dirs(root: Path, **splits: Metrics) -> dict[str, Path]:
    """Each split's metrics saved as ``<root>/evaluation-<split>/metrics.json``."""
    out = {}
    for split, metrics in splits.items():
        metrics.save(root / f"evaluation-{split}")
        out[split] = root / f"evaluation-{split}"
    return out


def track(
    model: ModelFolder, corpus: Corpus, evaluation_train: Metrics, evaluation: Metrics,
    diagnostics: Diagnostics, cfg: XmcConfig, timings: dict[str, float],
    links: dict[str, str], run_key: str,
) -> TrackedRun:  # fmt: skip
    """One MLflow run of the training run, with the model logged in it
    (``xmc_core.serving.tracking.track_run``). ``timings``: wall seconds per stage so far;
    ``links``: more tags (the Prefect flow run); ``run_key``: the training run's identity (keys
    only)."""
    from xmc_core.serving.tracking import track_run

    with tempfile.TemporaryDirectory(prefix="xmc-track-") as tmp:
        root = Path(tmp)
        evals = _evaluation_dirs(root, train=evaluation_train, test=evaluation)
        files = diagnostics.save_to(root / "diagnostics")
        tracked = track_run(cfg, model.path, corpus.path, evals, files, timings, links)
    return TrackedRun(tracked)


def register(
    tracked: TrackedRun, model: ModelFolder, corpus: Corpus, evaluation: Metrics, cfg: XmcConfig,
    run_key: str,
) -> TrackedRun:  # fmt: skip
    """The model of the MLflow run ``tracked`` registered as a version of ``registry.model_name``
    (``xmc_core.serving.tracking.register_tracked``; a rerun takes the version it made) ->
    ``tracked`` with its ``version``. ``run_key``: the training run's identity (keys only)."""
    from xmc_core.serving.tracking import register_tracked

    return TrackedRun(
        register_tracked(cfg, tracked.values, model.path, corpus.path, evaluation.values)
    )


def promote_candidate(cfg: XmcConfig, version: str, dataset: str | Path) -> dict[str, Any]:
    """Evaluate ``version`` and the alias holder on ``registry.eval_split`` of the dataset folder
    ``dataset`` and move the alias if the gate passes (when ``registry.enabled`` and
    ``registry.promote``) -> the decision as a dict
    (``xmc_core.serving.registry.store.Decision``). Never retried: a promotion is a decision,
    ``promote_gated`` is safe to rerun by hand."""
    from xmc_core.serving.registry.lineage import for_corpus
    from xmc_core.serving.registry.promotion import format_decision, not_promoted, promote_gated

    cfg = for_corpus(cfg, dataset)  # registry.model_name's {dataset}
    if not cfg.registry.enabled:
        decision = not_promoted(cfg, version, "registry disabled (registry.enabled=false)")
    elif not cfg.registry.promote:
        decision = not_promoted(cfg, version, "promotion disabled (registry.promote=false)")
    else:
        decision = promote_gated(cfg, version, Path(dataset))
    # what happened, in one line: the figures are in the run's summary, state message and report
    log.info("%s", format_decision(decision).splitlines()[0])
    return decision.model_dump()


def gate(tracked: TrackedRun, corpus: Corpus, cfg: XmcConfig) -> GateDecision:
    """The gated promotion of the version ``tracked`` registered (:func:`promote_candidate`)."""
    return GateDecision(promote_candidate(cfg, str(tracked.values["version"]), corpus.path))


def write_report(
    corpus: Corpus, evaluation_train: Metrics, evaluation: Metrics, diagnostics: Diagnostics,
    tracked: TrackedRun | None, decision: GateDecision | None, members: list[Metrics] | None,
    cfg: XmcConfig, title: str, timings: dict[str, float], intake: dict[str, Any] | None,
    run_key: str, out: Path,
) -> None:  # fmt: skip
    """The run report into ``out``: ``report.md``, the metrics table, the diagnostics and their
    plots; attached to the MLflow run when ``tracked``. ``title``: its first line;
    ``intake``: what the retrain flow's intake did (None outside it); ``run_key``: the
    training run's identity (keys only)."""
    out = Path(out)
    diagnostics.save_to(out / "diagnostics")
    report = gather_report(
        cfg, title, corpus.path, {"train": evaluation_train.values, "test": evaluation.values},
        out / "diagnostics", timings, None if tracked is None else tracked.values,
        None if decision is None else decision.values, intake,
        [m.values for m in members or []],
    )  # fmt: skip
    write_text(out / REPORT_FILE, report.markdown)
    write_json(out / TABLE_FILE, report.table)
    write_meta(out, RunReportFiles.__name__, {})
    if tracked is not None:
        from xmc_core.serving.tracking import attach_report

        attach_report(tracked.values, out / REPORT_FILE)


TRACK = Stage(
    "tracking", track, TrackedRun,
    {"model": ModelFolder, "corpus": Corpus, "evaluation_train": Metrics,
     "evaluation": Metrics, "diagnostics": Diagnostics},
    describe=lambda t: f"MLflow run {t.values['run_id']}",
)  # fmt: skip
REGISTER = Stage(
    "registration", register, TrackedRun,
    {"tracked": TrackedRun, "model": ModelFolder, "corpus": Corpus, "evaluation": Metrics},
    describe=lambda t: f"version {t.values['version']} (MLflow run {t.values['run_id']})",
)  # fmt: skip
GATE = Stage("gate", gate, GateDecision, {"tracked": TrackedRun, "corpus": Corpus})
REPORT = Stage(
    "report", write_report, RunReportFiles,
    {"corpus": Corpus, "evaluation_train": Metrics, "evaluation": Metrics,
     "diagnostics": Diagnostics, "tracked": TrackedRun, "decision": GateDecision,
     "members": Metrics},
    writes_folder=True,
)  # fmt: skip
RUN_SCOPED = (TRACK, REGISTER, GATE, REPORT)
"""The stages keyed on the training run itself (``run_key``): each run writes its own."""
