"""The ``train`` flow, the main job: the configured family's stage graph (corpus -> features ->
label tree -> one ranker task per tree level -> model -> evaluation on the test split; the same
graph ``xmc train`` runs in-process), then diagnostics, MLflow, promotion and the run report.

    python -m flows.train [--config cfg.yaml] [--set data.dataset=PATH] [--set key=value ...]

Without ``data.dataset`` it trains on the embedded synthetic corpus. Every task is cached on its
inputs, so a run that failed at tree level 2 resumes at level 2. With
``model.kind=xr_transformer`` the matcher levels run in the ``matcher`` subflow: in this process,
or on the deployment named by ``XMC_MATCHER_DEPLOYMENT`` (a GPU work pool, see ``prefect.yaml``).
"""

from __future__ import annotations

import json
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
from xmc_core.evaluation.diagnostics import MAX_DOCS
from xmc_core.evaluation.outcome import promotion_outcome
from xmc_core.evaluation.report import features_summary, read_json
from xmc_core.families.common import DIAGNOSE, EVALUATE, METRICS_FILE
from xmc_core.families.train import check_corpus, check_dataset, train_graph
from xmc_core.model.model_folder import publish_model_folder


@flow(name="train-pipeline", log_prints=True)
def train_pipeline(cfg: XmcConfig, intake: dict[str, Any] | None = None) -> dict[str, str]:
    """The family's stage graph (``xmc_core.families.train.train_graph``) as cached tasks, then
    the lifecycle stages; returns the artifact folders.

    ``intake``: what the retrain flow's intake did, shown in the run report (None: not shown).
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
    handles = train_graph(
        run, run.source(Corpus, corpus_dir), cfg,
        on_featurized=lambda feats: print(features_summary(run.paths(feats))),
    )  # fmt: skip
    outputs = run.paths(handles)
    outputs["model"] = model_folder(outputs, cfg, work)
    outputs.update(lifecycle_stages(outputs, cfg, work, intake))
    return outputs


def model_folder(outputs: dict[str, str], cfg: XmcConfig, work: str) -> str:
    """The model folder a person gets (the one ``xmc train`` writes: the model stage's
    artifact, its config, test metrics and dataset; no cache record), published under
    ``<work_dir>/models/`` (:func:`~xmc_core.model.model_folder.publish_model_folder`)."""
    metrics = {"test": read_json(Path(outputs["evaluation"]) / METRICS_FILE)}
    corpus = Corpus(outputs["corpus"])
    return str(publish_model_folder(Path(outputs["model"]), work, cfg, metrics, corpus))


def lifecycle_stages(
    outputs: dict[str, str], cfg: XmcConfig, work: str, intake: dict[str, Any] | None = None
) -> dict[str, str]:
    """Train-split evaluation and diagnostics, MLflow tracking and registration, the gated
    promotion, the run report (Prefect artifacts) -> more outputs: ``mlflow_run`` (id),
    ``mlflow_url`` (the run's page on a tracking server), ``model_version`` ("" for each when
    not tracked or registered), ``promotion_decision`` (``promoted``, ``kept``,
    ``already-champion``, ``refused``, ``not-promoted``, ``not-registered``),
    ``promotion_reason`` (one line), ``promotion_fix`` (one line for a refusal, else ""),
    ``stages`` and ``stages_cached`` (the task runs so far, and those Cached)."""
    from tasks.registry import promote_candidate
    from tasks.report import publish_report
    from tasks.tracking import cached_stages, log_training_run, stage_timings
    from xmc_core.serving.registry.lineage import for_corpus

    train_split, test_split = outputs["model_train"], outputs["model_test"]
    run = PrefectRunner(work)
    evaluate = run(
        EVALUATE, label="evaluate-train", model=outputs["model"], split=train_split, cfg=cfg.eval
    )
    eval_dirs = {"train": run.path(evaluate), "test": outputs["evaluation"]}
    checkpoints = json.loads(outputs["matcher_levels"]) if "matcher_levels" in outputs else None
    diagnostics = run.path(
        run(
            DIAGNOSE, label="diagnose", model=outputs["model"], train=train_split,
            test=test_split, checkpoints=checkpoints, eval_cfg=cfg.eval, max_docs=MAX_DOCS,
        )
    )  # fmt: skip
    timings = stage_timings(flow_run.get_id())
    cached, stages = cached_stages(flow_run.get_id())
    tracking: dict[str, Any] = {}
    if cfg.tracking.enabled:
        tracking = log_training_run(cfg, outputs, timings, diagnostics, eval_dirs)
    decision = None
    if tracking.get("version") and cfg.registry.promote:
        named = for_corpus(cfg, outputs["corpus"])  # registry.model_name's {dataset}
        decision = promote_candidate(named, tracking["version"], outputs["corpus"])
    report = publish_report(
        cfg, outputs, timings, tracking, decision, diagnostics, eval_dirs, intake
    )
    promotion, reason = promotion_outcome(cfg, decision)
    return {
        "evaluation_train": eval_dirs["train"], "diagnostics": diagnostics, "report": report,
        "mlflow_run": str(tracking.get("run_id") or ""),
        "mlflow_url": str(tracking.get("run_url") or ""),
        "model_version": str(tracking.get("version") or ""),
        "promotion_decision": promotion, "promotion_reason": reason,
        "stages": str(stages), "stages_cached": str(cached),
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
