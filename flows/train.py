"""The ``train`` flow, the main job: the configured family's stage graph (corpus -> features ->
label tree -> one ranker task per tree level -> model -> evaluation on the test split; the same
graph ``xmc train`` runs in-process), then the lifecycle stages (``xmc train --track``'s):
train-split evaluation, diagnostics, MLflow tracking and registration, promotion, the report.

    python -m flows.train [--config cfg.yaml] [--set data.dataset=PATH] [--set key=value ...]

Without ``data.dataset`` it trains on the embedded synthetic corpus. Every task is cached on its
inputs, so a run that failed at tree level 2 resumes at level 2. With
``model.kind=xr_transformer`` the matcher levels run in the ``matcher`` subflow: in this process,
or on the deployment named by ``XMC_MATCHER_DEPLOYMENT`` (a GPU work pool, see ``prefect.yaml``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import State

from flows.console import SUMMARY_MARK
from flows.runtime import config_flow_main, configured
from flows.stage_runner import PrefectRunner
from tasks.corpus import synthesize_corpus
from tasks.outcome import train_state
from xmc_core.app.entry import run_command
from xmc_core.app.summary import flow_summary
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.evaluation.outcome import promotion_outcome
from xmc_core.evaluation.report import features_summary, read_json
from xmc_core.families.common import METRICS_FILE
from xmc_core.families.train import check_corpus, check_dataset, train_graph
from xmc_core.families.warm import WarmBase, started
from xmc_core.lifecycle.artifacts import ModelFolder
from xmc_core.lifecycle.graph import RunContext, lifecycle_graph
from xmc_core.model.model_folder import publish_model_folder


@flow(name="train-pipeline", log_prints=True)
def train_pipeline(
    cfg: XmcConfig, intake: dict[str, Any] | None = None, start: dict[str, Any] | None = None
) -> dict[str, str]:
    """The family's stage graph (``xmc_core.families.train.train_graph``) as cached tasks, then
    the lifecycle stages (``xmc_core.lifecycle.graph``, the ones ``xmc train --track`` runs);
    returns the artifact folders and, for a retrain, ``start``: how it started, in words
    (warm and what it reused, or cold and why; also in the report and the MLflow run).

    ``intake``: what the retrain flow's intake did, shown in the run report (None: not shown);
    ``start``: the retrain flow's start plan (``StartPlan.to_dict``; None: cold).
    """
    work = str(Path(cfg.work_dir).resolve())
    if cfg.data.dataset is not None:
        corpus_dir = str(Path(cfg.data.dataset).resolve())
    else:
        corpus_dir = synthesize_corpus(
            cfg.data.synthetic_scale, cfg.data.synthetic_seed, cfg.data.rows_per_group, work
        )
    check_corpus(Corpus(corpus_dir), cfg)
    run = PrefectRunner(work, level_cluster=cfg.dask)  # levels on dask.address when set
    base = (start or {}).get("base")
    handles = train_graph(
        run, run.source(Corpus, corpus_dir), cfg,
        on_featurized=lambda feats: print(features_summary(run.paths(feats))),
        warm=None if base is None else WarmBase.from_dict(base),
    )  # fmt: skip
    outputs = run.paths(handles)
    outputs["model"] = model_folder(outputs, cfg, work)
    tags: dict[str, str] = {}
    if start is not None:  # a retrain: the report and the MLflow run say how it started
        outputs["start"], tags = started(str(start["reason"]), outputs["model"])
        intake = {**(intake or {}), "start": outputs["start"]}
    outputs.update(lifecycle_stages(run, handles, outputs["model"], cfg, intake, tags))
    return outputs


def model_folder(outputs: dict[str, str], cfg: XmcConfig, work: str) -> str:
    """The model folder a person gets (the one ``xmc train`` writes: the model stage's
    artifact, its config, test metrics and dataset; no cache record), published under
    ``<work_dir>/models/`` (:func:`~xmc_core.model.model_folder.publish_model_folder`)."""
    metrics = {"test": read_json(Path(outputs["evaluation"]) / METRICS_FILE)}
    corpus = Corpus(outputs["corpus"])
    return str(publish_model_folder(Path(outputs["model"]), work, cfg, metrics, corpus))


def lifecycle_stages(
    run: PrefectRunner, handles: dict[str, Any], model_dir: str, cfg: XmcConfig,
    intake: dict[str, Any] | None = None, tags: dict[str, str] | None = None,
) -> dict[str, str]:  # fmt: skip
    """The lifecycle graph as cached tasks (train-split evaluation, diagnostics, MLflow tracking
    with the registration, the gated promotion, the report), keyed on this flow run, then the
    report published (Prefect artifacts); ``tags``: more MLflow tags of the run (a retrain's
    start) -> more outputs: ``evaluation_train``,
    ``diagnostics``, ``report`` (folders; ``report``: its ``report.md`` under ``reports/``),
    ``mlflow_run`` (id), ``mlflow_url`` (the run's page on a tracking server),
    ``model_version`` ("" for each when not tracked or registered), ``promotion_decision``
    (``promoted``, ``kept``, ``already-champion``, ``refused``, ``not-promoted``,
    ``not-registered``), ``promotion_reason`` (one line), ``promotion_fix`` (one line for a
    refusal, else ""), ``stages`` and ``stages_cached`` (the stage task runs before the
    tracking, and those Cached)."""
    from tasks.lineage import flow_run_links
    from tasks.report import publish_report
    from tasks.timings import stage_summary

    counted: dict[str, int] = {}

    def timings() -> dict[str, float]:  # one wait for the task runs to be final, not two
        seconds, counted["cached"], counted["stages"] = stage_summary(flow_run.get_id())
        return seconds

    ctx = RunContext(
        run_key=str(flow_run.get_id()), name=cfg.tracking.run_name or str(flow_run.get_name()),
        timings=timings, intake=intake,
        links={**flow_run_links(), **(tags or {})} if cfg.tracking.enabled else {},
    )  # fmt: skip
    done = lifecycle_graph(run, handles, run.source(ModelFolder, model_dir), cfg, ctx)
    tracked = {} if done["tracked"] is None else run.value(done["tracked"]).values
    decision = None if done["decision"] is None else run.value(done["decision"]).values
    promotion, reason = promotion_outcome(cfg, decision)
    return {
        "evaluation_train": run.path(done["evaluation_train"]),
        "diagnostics": run.path(done["diagnostics"]),
        "report": publish_report(run.path(done["report"]), run.work_dir),
        "mlflow_run": str(tracked.get("run_id") or ""),
        "mlflow_url": str(tracked.get("run_url") or ""),
        "model_version": str(tracked.get("version") or ""),
        "promotion_decision": promotion, "promotion_reason": reason,
        "stages": str(counted["stages"]), "stages_cached": str(counted["cached"]),
        "promotion_fix": str((decision or {}).get("fix") or ""),
    }  # fmt: skip


@flow(name="train", log_prints=True)
def train(
    config_path: str | None = None, overrides: list[str] | None = None
) -> dict[str, str] | State:
    """Load the config, then run the pipeline on the configured Dask runner; the run logs its
    summary (:mod:`xmc_core.app.summary`; the command line prints it last) and ends Completed
    with a message saying the outcome (``P@1 79.33% — version 3 promoted to
    xmc-synthetic@champion; MLflow run ...``), tagged with it; its result is the outputs dict,
    ``summary`` included."""
    start = time.perf_counter()
    cfg = XmcConfig.load(config_path, overrides)
    outputs = configured(train_pipeline, cfg)(cfg)
    summary = flow_summary(outputs, cfg.model.kind, time.perf_counter() - start).format()
    get_run_logger().info("%s", summary, extra={SUMMARY_MARK: True})
    return train_state(cfg, {**outputs, "summary": summary})


def check_inputs(cfg: XmcConfig) -> None:
    """Before Prefect starts: ``data.dataset`` (when given) is a dataset folder whose kind
    ``model.kind`` can train on (its manifest alone is read)."""
    if cfg.data.dataset is not None:
        check_dataset(cfg.data.dataset, cfg)


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Command line: run the train flow."""
    return config_flow_main(train, __doc__ or "", argv, check=check_inputs)


if __name__ == "__main__":
    sys.exit(run_command(main))
