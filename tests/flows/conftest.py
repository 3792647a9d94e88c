"""A small synthetic dataset for the flow tests (the Prefect test server: ``tests/conftest.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
)
from prefect.events.worker import EventsWorker

from tasks.stage_task import STAGE_TAG
from tasks.timings import task_runs_of_tree
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("corpus") / "synthetic"
    spec = SyntheticSpec(
        n_train=400, n_test=120, n_domains=3, topics_per_domain=3, labels_per_topic=6
    )
    write_synthetic_dataset(dest, spec, rows_per_group=150)
    return dest


def task_states(
    flow_run_id: UUID,
    timeout: float = 60.0,
    expect: frozenset[str] = frozenset(),
    stages: int = 0,
) -> dict[str, str]:
    """Task run name -> final state name of one flow run.

    Task runs report their states as events that the server applies asynchronously: flush the
    client's event worker, then poll until every task run named in ``expect`` exists, so do at
    least ``stages`` stage task runs (``STAGE_TAG``), and every task run is in a final state (a
    run the server has not created yet would be missing).
    """
    flt = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    return _final_states(lambda c: c.read_task_runs(flow_run_filter=flt), timeout, expect, stages)


def tree_task_states(
    flow_run_id: UUID, expect: frozenset[str] = frozenset(), timeout: float = 60.0
) -> dict[str, str]:
    """:func:`task_states` of a flow run and its subflow runs (the subflows' stand-in runs left
    out: :func:`tasks.timings.task_runs_of_tree`)."""
    return _final_states(lambda c: task_runs_of_tree(c, flow_run_id), timeout, expect, 0)


def _final_states(
    read: Callable[[Any], list[Any]], timeout: float, expect: frozenset[str], stages: int
) -> dict[str, str]:
    """Poll ``read(client)`` after draining the event workers, as :func:`task_states` says."""
    EventsWorker.drain_all(timeout=timeout)
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            runs = read(client)
            states = {run.name: run.state_name for run in runs}
            final = all(r.state is not None and r.state.is_final() for r in runs)
            counted = sum(STAGE_TAG in r.tags for r in runs) >= stages
            if final and counted and expect <= states.keys():
                return states
            if time.monotonic() > deadline:
                raise TimeoutError(states)
            time.sleep(0.2)


def featurize_tasks(parts: dict[str, int]) -> frozenset[str]:
    """The task runs of one featurize pipeline over a corpus of ``parts`` row groups per split,
    for ``task_states(expect=...)``."""
    per_part = {
        f"{stage}-{split}-{i}"
        for split, n in parts.items()
        for i in range(n)
        for stage in ("count", "featurize")
    }
    assembled = {f"assemble-{split}" for split in parts}
    return frozenset({"fit-vocabulary", "label-index", "label-features", *assembled, *per_part})


def flow_run_artifacts(flow_run_id: UUID | str) -> dict[str, Any]:
    """The artifacts of one flow run by key (the newest of a key)."""
    flt = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(str(flow_run_id))]))
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=flt)
    return {a.key: a for a in sorted(found, key=lambda a: a.created)}


def flow_run_tags(flow_run_id: UUID | str) -> list[str]:
    """The tags of one flow run, as the API has them now."""
    with get_client(sync_client=True) as client:
        return list(client.read_flow_run(UUID(str(flow_run_id))).tags)
