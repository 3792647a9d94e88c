"""The wall time of a flow run's stages from the Prefect API: what the lifecycle's tracking and
report show for a flow's run (``xmc train --track`` times its stages in-process). The MLflow run
itself is ``xmc_core.serving.tracking``, run as the lifecycle's ``tracking`` stage."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentFlowRunId,
)
from prefect.runtime import flow_run as current_flow_run
from prefect.runtime import task_run as current_task_run

from tasks.stage_task import STAGE_TAG

PAGE = 200
"""Task runs read per Prefect API call."""


def stage_timings(flow_run_id: UUID | str | None = None, wait_s: float = 15.0) -> dict[str, float]:
    """Wall seconds per task run name of a flow run and of its subflow runs (recursively).

    ``flow_run_id``: default the current flow run. Task runs with the same name are summed;
    Cached runs count 0; the task runs that stand for subflows are replaced by the subflows'
    own task runs. Task states reach the API asynchronously: this waits up to ``wait_s``
    seconds for every task run (except the calling one) to be final; runs still unfinished
    then count the time they ran so far.
    """
    return stage_summary(flow_run_id, wait_s)[0]


def stage_summary(
    flow_run_id: UUID | str | None = None, wait_s: float = 15.0
) -> tuple[dict[str, float], int, int]:
    """(:func:`stage_timings`, Cached stage task runs, all stage task runs) from one reading
    of the task runs (one wait for them to be final): the stage runs are those tagged
    ``tasks.stage_task.STAGE_TAG``, the Cached ones what an earlier run had done already."""
    timings: dict[str, float] = {}
    runs = _final_task_runs(flow_run_id, wait_s)
    for run in runs:
        timings[run.name] = timings.get(run.name, 0.0) + _seconds(run)
    stages = [r for r in runs if STAGE_TAG in r.tags]
    cached = sum(1 for r in stages if r.state is not None and r.state.name == "Cached")
    return dict(sorted(timings.items())), cached, len(stages)


def _final_task_runs(flow_run_id: UUID | str | None, wait_s: float) -> list[Any]:
    """The task runs of :func:`stage_timings`, but the calling one, once final (or after
    ``wait_s`` seconds)."""
    flow_run_id = flow_run_id or current_flow_run.get_id()
    if flow_run_id is None:
        raise ValueError("stage_timings needs a flow run id outside of a flow run")
    root = UUID(str(flow_run_id))
    calling = current_task_run.get_id()
    deadline = time.monotonic() + wait_s
    with get_client(sync_client=True) as client:
        while True:
            runs = [r for r in task_runs_of_tree(client, root) if str(r.id) != calling]
            if all(_is_final(r) for r in runs) or time.monotonic() > deadline:
                return runs
            time.sleep(0.25)


def task_runs_of_tree(client: SyncPrefectClient, root: UUID) -> list[Any]:
    """Task runs of ``root`` and its subflow runs, minus the subflows' stand-in task runs."""
    runs, stand_ins, queue = [], set(), [root]
    while queue:
        flow_run_id = queue.pop()
        runs += _paged(client.read_task_runs, FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        parent = FlowRunFilterParentFlowRunId(any_=[flow_run_id])
        for sub in _paged(client.read_flow_runs, FlowRunFilter(parent_flow_run_id=parent)):
            queue.append(sub.id)
            if sub.parent_task_run_id is not None:
                stand_ins.add(sub.parent_task_run_id)
    return [r for r in runs if r.id not in stand_ins]


def _paged(read: Any, flt: FlowRunFilter) -> list[Any]:
    out, offset = [], 0
    while True:
        page = read(flow_run_filter=flt, limit=PAGE, offset=offset)
        out += page
        if len(page) < PAGE:
            return out
        offset += PAGE


def _is_final(run: Any) -> bool:
    return run.state is not None and run.state.is_final()


def _seconds(run: Any) -> float:
    """Time spent running (summed over retries); 0 for a Cached run."""
    if run.state is not None and run.state.name == "Cached":
        return 0.0
    seconds = run.total_run_time.total_seconds()
    if seconds <= 0 and run.start_time is not None:
        end = run.end_time or datetime.now(UTC)
        seconds = (end - run.start_time).total_seconds()
    return max(0.0, float(seconds))
