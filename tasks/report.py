"""The run report task: Markdown and a metrics table as Prefect artifacts (of the flow run that
publishes it and of its top-level flow run), a ``report.md`` file under ``<work_dir>/reports/``
and in the MLflow run."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import ArtifactCreate
from prefect.runtime import flow_run as current_flow_run
from prefect.runtime import task_run as current_task_run

from tasks.tracking import split_metrics
from xmc_core.config import XmcConfig
from xmc_core.evaluation.outcome import promotion_outcome
from xmc_core.evaluation.plots import TITLES
from xmc_core.evaluation.report import read_json
from xmc_core.evaluation.run_report import RunReport, build_report, percent_table, png_data_uri
from xmc_core.model import registry
from xmc_core.storage.atomic import write_text

REPORT_KEY = "xmc-run-report"
METRICS_KEY = "xmc-metrics"
REPORT_FILE = "report.md"
MLFLOW_REPORT_DIR = "report"


def gather_report(
    cfg: XmcConfig,
    outputs: Mapping[str, str],
    timings: Mapping[str, float],
    tracking: Mapping[str, Any],
    decision: Mapping[str, Any] | None,
    diagnostics_dir: str,
    eval_dirs: Mapping[str, str],
    intake: Mapping[str, Any] | None = None,
) -> RunReport:
    """Read what the report shows (manifest, metrics, diagnostics) and build it."""
    diagnostics = Path(diagnostics_dir)
    summary = read_json(diagnostics / "diagnostics.json")
    plots = []
    order = [*TITLES]
    named = summary.get("plots", {})
    for name in sorted(named, key=lambda n: (order.index(n) if n in order else len(order), n)):
        file = named[name]
        local = diagnostics / "plots" / file
        image = png_data_uri(local.read_bytes()) if local.is_file() else ""
        plots.append({"title": TITLES.get(name, name), "image": image, "local": str(local)})
    manifest_file = Path(outputs["corpus"]) / "manifest.json"
    run = dict(tracking) if tracking else None
    if run is not None:
        run.setdefault("tracking_uri", cfg.tracking_uri())
        run["url"] = run.get("run_url")
    name = cfg.tracking.run_name or current_flow_run.get_name() or "run"
    return build_report(
        f"xmc {cfg.model.kind} training run {name}",
        split_metrics(eval_dirs),
        manifest=read_json(manifest_file) if manifest_file.is_file() else None,
        timings=timings,
        decision=decision,
        plots=plots,
        run=run,
        diagnostics=summary,
        intake=intake,
        no_decision=promotion_outcome(cfg, None)[1] if decision is None else "",
        members=member_metrics(cfg, outputs),
    )


def member_metrics(cfg: XmcConfig, outputs: Mapping[str, str]) -> list[dict[str, Any]]:
    """An ensemble's members' test metrics (``outputs["member_evaluations"]``: a JSON list of
    their evaluation folders), each with the member's label; [] for other families."""
    folders = json.loads(outputs.get("member_evaluations") or "[]")
    if not folders:
        return []
    labels = [member.label for member, _ in registry.trained_families(cfg)]
    return [
        {"member": label, "metrics": read_json(Path(folder) / "metrics.json")}
        for label, folder in zip(labels, folders, strict=True)
    ]


def report_path(work_dir: str | Path) -> Path:
    """``<work_dir>/reports/<flow run id, or a timestamp outside a flow>/report.md``."""
    run_id = current_flow_run.get_id() or time.strftime("%Y%m%d-%H%M%S")
    return Path(work_dir).resolve() / "reports" / str(run_id) / REPORT_FILE


@task(name="publish-report", task_run_name="publish-report", cache_policy=NO_CACHE)
def publish_report(
    cfg: XmcConfig,
    outputs: dict[str, str],
    timings: dict[str, float],
    tracking: dict[str, Any],
    decision: dict[str, Any] | None,
    diagnostics_dir: str,
    eval_dirs: dict[str, str],
    intake: dict[str, Any] | None = None,
) -> str:
    """Build the run report and publish it: Prefect artifacts ``xmc-run-report`` (Markdown) and
    ``xmc-metrics`` (table in percent: metric, train, test, champion) of this flow run and of
    its top-level flow run (:func:`publish_artifacts`), ``report.md`` in the MLflow run
    (``report/``, when ``tracking`` holds a run) and under ``<work_dir>/reports/``.

    ``tracking``: what ``log_training_run`` returned (``{}`` when tracking is off);
    ``decision``: the promotion decision as a dict, or None; ``intake``: the retrain flow's
    intake (drops ingested and refused), None outside it. Returns the report's path.
    """
    log = get_run_logger()
    report = gather_report(
        cfg, outputs, timings, tracking, decision, diagnostics_dir, eval_dirs, intake
    )
    path = write_text(report_path(cfg.work_dir), report.markdown)
    publish_artifacts(report)
    if tracking.get("run_id"):
        from mlflow import MlflowClient

        uri = tracking.get("tracking_uri") or cfg.tracking_uri()
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.log_artifact(tracking["run_id"], str(path), MLFLOW_REPORT_DIR)
    log.info("run report: %s", path)
    return str(path)


def publish_artifacts(report: RunReport) -> list[str]:
    """The report's Prefect artifacts (``xmc-run-report``, ``xmc-metrics``) on the current flow
    run and, when that is a subflow, on its top-level flow run too, where a user looks first
    -> the ids of the flow runs that got them."""
    targets = [str(current_flow_run.get_id())]
    root = current_flow_run.root_flow_run_id
    if root and str(root) not in targets:
        targets.append(str(root))
    table = json.dumps(percent_table(report.table))
    artifacts = [
        ("markdown", REPORT_KEY, report.markdown, "xmc run report"),
        ("table", METRICS_KEY, table, "metrics per split, in percent"),
    ]
    task_run_id = current_task_run.get_id()
    with get_client(sync_client=True) as client:
        for flow_run_id in targets:
            for kind, key, data, description in artifacts:
                own = flow_run_id == targets[0] and task_run_id is not None
                client.create_artifact(
                    artifact=ArtifactCreate(
                        type=kind, key=key, data=data, description=description,
                        flow_run_id=UUID(flow_run_id),
                        task_run_id=UUID(task_run_id) if own else None,
                    )
                )  # fmt: skip
    return targets
