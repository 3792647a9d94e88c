"""Publishing the run report (the lifecycle's ``report`` stage wrote it): a copy under
``<work_dir>/reports/<flow run id>/`` (``report.md`` with its plots beside it), and the
Markdown and the metrics table as Prefect artifacts of the flow run that publishes it and of its
top-level flow run. The report is in the MLflow run already (the stage attached it)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from uuid import UUID

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import ArtifactCreate
from prefect.runtime import flow_run as current_flow_run
from prefect.runtime import task_run as current_task_run

from xmc_core.evaluation.run_report import percent_table
from xmc_core.lifecycle.artifacts import REPORT_FILE, RunReportFiles
from xmc_core.storage.atomic import atomic_dir

REPORT_KEY = "xmc-run-report"
METRICS_KEY = "xmc-metrics"


def report_path(work_dir: str | Path) -> Path:
    """``<work_dir>/reports/<flow run id, or a timestamp outside a flow>/report.md``."""
    run_id = current_flow_run.get_id() or time.strftime("%Y%m%d-%H%M%S")
    return Path(work_dir).resolve() / "reports" / str(run_id) / REPORT_FILE


@task(name="publish-report", task_run_name="publish-report", cache_policy=NO_CACHE)
def publish_report(report_dir: str, work_dir: str) -> str:
    """Publish the report folder ``report_dir`` (see the module) -> the path of its
    ``report.md`` under ``<work_dir>/reports/``."""
    report = RunReportFiles.load(report_dir)
    path = report_path(work_dir)
    with atomic_dir(path.parent, overwrite=True) as tmp:
        shutil.copytree(report.folder, tmp, dirs_exist_ok=True)
    publish_artifacts(report)
    get_run_logger().info("run report: %s", path)
    return str(path)


def publish_artifacts(report: RunReportFiles) -> list[str]:
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
