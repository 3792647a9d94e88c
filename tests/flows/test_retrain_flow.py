"""The retrain flow in process: nothing to do without a corpus or a new drop; a merged drop
retrains and reuses the cached per-partition counts of the documents it already had."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactCollectionFilter,
    ArtifactCollectionFilterKey,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
)

from flows.retrain import retrain
from flows.runtime import prefect_api
from tasks.landing import INTAKE_KEY
from tests.corpus.helpers import parquet_drop
from tests.flows.conftest import task_states

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_retrain_takes_in_drops_and_reuses_unchanged_partitions(
    tmp_path: Path, small_corpus: Path
) -> None:
    train = pq.read_table(small_corpus / "train.parquet")
    test = pq.read_table(small_corpus / "test.parquet")
    work = tmp_path / "work"
    sets = [
        f"work_dir={work}", "data.rows_per_group=150", "tree.branching=4",
        "tree.max_leaf_size=8", "tracking.enabled=false", "dask.n_workers=1",
    ]  # fmt: skip
    with prefect_api():
        assert retrain(None, sets)["trained"] is False  # no corpus yet

        parquet_drop(work / "landing", "a", train.slice(0, 300), test)
        first = retrain(None, sets)
        assert first["trained"] and first["intake"]["ingested"] == ["a"]
        assert retrain(None, sets)["trained"] is False  # trained, nothing new

        parquet_drop(work / "landing", "b", train.slice(300), test)
        (work / "landing" / "loose.jsonl").write_text("{}\n")  # not a drop: quarantined
        state = retrain(None, sets, return_state=True)
    second = state.result()
    assert second["trained"] and second["intake"]["ingested"] == ["b"]
    assert state.name == "CompletedWithQuarantine" and "loose.jsonl" in state.message
    report = Path(second["outputs"]["report"]).read_text()
    assert "1 drop(s) refused" in report and "not a drop folder" in report
    assert second["intake"]["corpus"] != first["intake"]["corpus"]
    states = {}
    with get_client(sync_client=True) as client:
        flt = FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[state.state_details.flow_run_id])
        )
        for pipeline in client.read_flow_runs(flow_run_filter=flt):
            sub = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[pipeline.id]))
            for run in client.read_flow_runs(flow_run_filter=sub):
                states |= task_states(run.id, expect=frozenset({"count-train-2"}))
    # 300 + 100 train docs in groups of 150: the first two groups are the ones of drop a
    assert states["count-train-0"] == "Cached" and states["count-train-1"] == "Cached"
    assert states["count-train-2"] == "Completed" and states["count-test-0"] == "Cached"
    assert states["train-level-0"] == "Completed"
    archived = sorted(p.name for p in (work / "landing-archive").glob("*/*"))
    assert archived == ["a", "b"]


def test_a_run_that_quarantines_a_drop_says_so_in_its_state_and_an_artifact(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    (work / "landing").mkdir(parents=True)
    (work / "landing" / "notes.txt").write_text("not a drop\n")
    with prefect_api():
        state = retrain(None, [f"work_dir={work}", "tracking.enabled=false"], return_state=True)
    assert state.is_completed() and state.name == "CompletedWithQuarantine"
    assert "1 drop(s) quarantined: notes.txt" in state.message
    result = state.result()
    assert result["trained"] is False
    assert [q["name"] for q in result["intake"]["quarantined"]] == ["notes.txt"]
    with get_client(sync_client=True) as client:
        artifact = client.read_latest_artifacts(
            artifact_filter=ArtifactCollectionFilter(
                key=ArtifactCollectionFilterKey(any_=[INTAKE_KEY])
            )
        )[0]
    assert "notes.txt" in artifact.data and "not a drop folder" in artifact.data
