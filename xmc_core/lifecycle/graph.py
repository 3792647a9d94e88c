"""The lifecycle graph: what follows a trained model, for ``xmc train --track`` (in-process)
and the ``train`` flow (cached tasks) alike: evaluation on the train split, diagnostics, the
MLflow run, the version's registration, the gated promotion and the run report."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.evaluation.diagnostics import MAX_DOCS
from xmc_core.families.common import DIAGNOSE, EVALUATE
from xmc_core.lifecycle.artifacts import ModelFolder
from xmc_core.lifecycle.stages import GATE, REGISTER, REPORT, TRACK
from xmc_core.stages.graph import InProcessRunner, Runner


@dataclass(frozen=True)
class RunContext:
    """What the lifecycle takes from whoever runs it.

    ``run_key``: the training run's identity (the flow run id; a fresh id per ``xmc train``):
    keys the stages that change an MLflow store, so each run tracks anew; ``name``: the run's
    name in the report's title; ``timings``: wall seconds per stage so far (called once, after
    the diagnostics); ``links``: more MLflow tags (the Prefect flow run); ``intake``: the
    retrain flow's intake, shown in the report (None outside it).
    """

    run_key: str
    name: str
    timings: Callable[[], dict[str, float]]
    links: dict[str, str] = field(default_factory=dict)
    intake: dict[str, Any] | None = None


def lifecycle_graph(
    run: Runner, handles: dict[str, Any], model_folder: Any, cfg: XmcConfig, ctx: RunContext
) -> dict[str, Any]:
    """The lifecycle stages on a trained family graph's ``handles`` (``corpus``, ``model``,
    ``model_train``, ``model_test``, ``evaluation``, optionally ``matcher_levels`` and
    ``member_evaluations``) and the handle of the saved ``model_folder`` -> the handles of
    ``evaluation_train``, ``diagnostics``, ``tracked`` (the registration's when the registry is
    on, else the tracking's) and ``decision`` (None when not run) and ``report``."""
    model, train, test = handles["model"], handles["model_train"], handles["model_test"]
    evaluation_train = run(EVALUATE, label="evaluate-train", model=model, split=train, cfg=cfg.eval)
    diagnostics = run(
        DIAGNOSE, label="diagnose", model=model, train=train, test=test,
        checkpoints=handles.get("matcher_levels"), eval_cfg=cfg.eval, max_docs=MAX_DOCS,
    )  # fmt: skip
    timings = ctx.timings()
    common = {
        "corpus": handles["corpus"], "evaluation_train": evaluation_train,
        "evaluation": handles["evaluation"], "diagnostics": diagnostics, "cfg": cfg,
        "timings": timings,
    }  # fmt: skip
    tracked = decision = None
    if cfg.tracking.enabled:
        tracked = run(
            TRACK, label="log-training-run", model=model_folder, links=ctx.links,
            run_key=ctx.run_key, **common,
        )  # fmt: skip
        if cfg.registry.enabled:
            tracked = run(
                REGISTER, label="register-version", tracked=tracked, model=model_folder,
                corpus=handles["corpus"], evaluation=handles["evaluation"], cfg=cfg,
                run_key=ctx.run_key,
            )  # fmt: skip
        version = run.value(tracked).values.get("version")
        if version and cfg.registry.promote:
            decision = run(
                GATE, label=f"promote-version-{version}", tracked=tracked,
                corpus=handles["corpus"], cfg=cfg,
            )  # fmt: skip
    title = f"xmc {cfg.model.kind} training run {ctx.name}"
    report = run(
        REPORT, label="run-report", tracked=tracked, decision=decision,
        members=handles.get("member_evaluations"), title=title, intake=ctx.intake,
        run_key=ctx.run_key, **common,
    )  # fmt: skip
    return {
        "evaluation_train": evaluation_train, "diagnostics": diagnostics, "tracked": tracked,
        "decision": decision, "report": report,
    }  # fmt: skip


def lifecycle_in_process(
    run: InProcessRunner, handles: dict[str, Any], model_dir: Path, cfg: XmcConfig
) -> dict[str, Any]:
    """``xmc train --track``: :func:`lifecycle_graph` on the runner that trained the model (its
    handles, its stage times) and the model folder saved at ``model_dir`` -> the objects
    (``tracked``, ``decision``: None when not run)."""
    ctx = RunContext(
        run_key=uuid.uuid4().hex, name=cfg.tracking.run_name or Path(model_dir).name,
        timings=lambda: dict(run.timings),
    )  # fmt: skip
    done = lifecycle_graph(run, handles, run.source(ModelFolder, str(model_dir)), cfg, ctx)
    return {name: None if h is None else run.value(h) for name, h in done.items()}
