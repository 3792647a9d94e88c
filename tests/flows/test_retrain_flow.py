"""The retrain flow in process: nothing to do without a corpus or a new drop; a merged drop
retrains and reuses the cached per-partition counts of the documents it already had."""

from __future__ import annotations

import json
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
from tasks.report import METRICS_KEY, REPORT_KEY
from tests.corpus.helpers import parquet_drop
from tests.flows.conftest import flow_run_artifacts, flow_run_tags, task_states
from xmc_core.corpus import Corpus

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
        idle = retrain(None, sets, return_state=True)  # trained, nothing new
        assert idle.result()["trained"] is False

        parquet_drop(work / "landing", "b", train.slice(300), test)
        (work / "landing" / "loose.jsonl").write_text("{}\n")  # not a drop: quarantined
        state = retrain(None, sets, return_state=True)
    second = state.result()
    assert second["trained"] and second["intake"]["ingested"] == ["b"]
    assert state.name == "CompletedWithQuarantine" and "loose.jsonl" in state.message
    fingerprint = Corpus(first["intake"]["corpus"]).fingerprint[:16]
    assert idle.message == f"nothing to do: corpus {fingerprint} already trained"
    assert idle.name == "Completed" and flow_run_tags(idle.state_details.flow_run_id) == [
        "nothing-to-do"
    ]
    p1 = json.loads((Path(second["outputs"]["evaluation"]) / "metrics.json").read_text())["P@1"]
    assert state.message == (
        f"P@1 {100 * p1:.2f}% — not registered: tracking disabled (tracking.enabled=false); "
        "1 drop(s) quarantined: loose.jsonl (reasons: artifact xmc-intake-report, REASON.txt "
        "in the quarantine folder)"
    )
    top = state.state_details.flow_run_id
    assert sorted(flow_run_tags(top)) == ["not-registered", "quarantined"]
    assert second["outputs"]["promotion_decision"] == "not-registered"
    assert second["outputs"]["mlflow_run"] == "" and second["outputs"]["model_version"] == ""
    artifacts = flow_run_artifacts(top)  # the report on the retrain run, two subflows up
    assert artifacts[REPORT_KEY].data == Path(second["outputs"]["report"]).read_text()
    assert json.loads(artifacts[METRICS_KEY].data)[0]["test (%)"] == round(100 * p1, 2)
    report = Path(second["outputs"]["report"]).read_text()
    assert "1 drop(s) refused" in report and "not a drop folder" in report
    assert "## Promotion\n\nNot registered: tracking disabled (tracking.enabled=false).\n" in report
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
    assert state.message == (
        f"nothing to do: no training corpus yet (drop one into {work / 'landing'}); "
        "1 drop(s) quarantined: notes.txt (reasons: artifact xmc-intake-report, REASON.txt in "
        "the quarantine folder)"
    )
    assert sorted(flow_run_tags(state.state_details.flow_run_id)) == [
        "nothing-to-do", "quarantined",
    ]  # fmt: skip
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
