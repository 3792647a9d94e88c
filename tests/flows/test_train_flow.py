"""The train flow with XR-Linear: a P@1 floor, a failure at level 2 resumes at level 2, and the
top-level flow run shows the outcome (state message, tags, report artifacts, MLflow links)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import xmc_core.families.common as family_stages
from flows.runtime import configured, prefect_api
from flows.train import train, train_pipeline
from tasks.report import METRICS_KEY, REPORT_KEY
from tests.flows.conftest import flow_run_artifacts, flow_run_tags, task_states
from xmc_core.app.describe import describe_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.resolve import local_model_dir
from xmc_core.storage.work_dir import RESULT_FILE

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = [
    "data.synthetic_scale=0.25",
    "data.rows_per_group=600",
    "tree.branching=4",
    "tree.max_leaf_size=8",
    "tfidf.max_features=20000",
]


def run(work: Path) -> tuple[object, dict[str, str]]:
    cfg = XmcConfig.load(None, [f"work_dir={work}", *SETS])
    with prefect_api():
        state = configured(train_pipeline, cfg, use_dask=False)(cfg, return_state=True)
    levels = frozenset({"train-level-0", "train-level-1", "train-level-2"})
    return state, task_states(state.state_details.flow_run_id, expect=levels)


def test_failure_at_level_two_resumes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fit_level = family_stages.fit_level

    def crash_at_level_two(*args: object, **kwargs: object) -> object:
        if args[3] == 2:
            raise RuntimeError("simulated crash at level 2")
        return real_fit_level(*args, **kwargs)

    monkeypatch.setattr(family_stages, "fit_level", crash_at_level_two)
    state, states = run(tmp_path)
    assert state.is_failed()
    assert states["train-level-0"] == "Completed" and states["train-level-1"] == "Completed"
    assert states["train-level-2"] == "Failed"

    monkeypatch.setattr(family_stages, "fit_level", real_fit_level)
    state, states = run(tmp_path)
    assert state.is_completed(), state.message
    assert states["train-level-0"] == "Cached" and states["train-level-1"] == "Cached"
    assert states["train-level-2"] == "Completed"
    assert states["evaluate"] == "Completed"
    outputs = state.result()
    # what the run's summary counts: the stage tasks, those Cached; not synthesize-corpus (no
    # stage: it reuses its folder without a Prefect cache) nor the tracking tasks after them
    assert int(outputs["stages_cached"]) == list(states.values()).count("Cached") > 10
    computed = ("train-level-2", "train-level-3", "assemble-model", "evaluate")
    computed += ("evaluate-train", "diagnose")  # the lifecycle's stages, after the model's
    assert int(outputs["stages"]) - int(outputs["stages_cached"]) == len(computed), states
    assert all(states[name] == "Completed" for name in computed)
    metrics = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())
    assert metrics["P@1"] >= 0.6, metrics  # the embedded corpus is learnable (~0.8 at scale 1)


def test_the_top_level_run_shows_the_outcome(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # tracking under work_dir
    sets = [f"work_dir={tmp_path}", f"data.dataset={small_corpus}", "dask.n_workers=1", *SETS[2:]]
    cfg = XmcConfig.load(None, sets)
    with prefect_api():
        first = train(None, sets, return_state=True)
        again = train(None, sets, return_state=True)  # the same model: version 1 again
    outputs = first.result()
    run_id, target = outputs["mlflow_run"], f"{cfg.registry.model_name}@{cfg.registry.alias}"
    assert outputs["model_version"] == "1" and outputs["mlflow_url"] == "" and len(run_id) == 32
    assert outputs["promotion_decision"] == "promoted"
    assert outputs["promotion_reason"] == f"version 1 promoted to {target} (no champion before)"
    assert len(XmcModel.load(Path(outputs["model"])).labels) == 54  # what `xmc predict` loads
    p1 = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())["P@1"]
    # the model folder is the one `xmc train` writes, and so is the one MLflow serves
    folder = Path(outputs["model"])
    assert folder.parent == tmp_path / "models" and not (folder / RESULT_FILE).exists()
    described = describe_model(folder)
    trained_on = {k: v for k, v in described["trained_on"].items() if k != "trained_at"}
    assert trained_on == {
        "dataset": str(small_corpus.resolve()),
        "dataset_fingerprint": Corpus(small_corpus).fingerprint,
    }
    assert described["config"] == cfg.model_dump(mode="json")
    assert described["metrics"] == {"test": json.loads(
        (Path(outputs["evaluation"]) / "metrics.json").read_text()
    )}  # fmt: skip
    served = local_model_dir(f"models:/{target}", cfg)  # what `xmc inspect` reads
    assert sorted(p.name for p in served.iterdir()) == sorted(p.name for p in folder.iterdir())
    assert describe_model(served)["trained_on"] == described["trained_on"]
    assert "  cache " not in outputs["summary"]  # nothing was cached the first time
    assert first.message == (
        f"P@1 {100 * p1:.2f}% — version 1 promoted to {target} (no champion before); "
        f"MLflow run {run_id}"
    )
    top = first.state_details.flow_run_id
    assert "promoted" in flow_run_tags(top)
    artifacts = flow_run_artifacts(top)  # on the train flow run itself, not only its subflow
    assert artifacts[REPORT_KEY].type == "markdown" and artifacts[METRICS_KEY].type == "table"
    report = artifacts[REPORT_KEY].data
    assert report == Path(outputs["report"]).read_text()
    assert report.count("](data:image/png;base64,") == 4 and "mlflow-artifacts:" not in report
    rows = json.loads(artifacts[METRICS_KEY].data)
    assert rows[0]["metric"] == "P@1" and rows[0]["test (%)"] == round(100 * p1, 2)

    from mlflow import MlflowClient

    tags = MlflowClient(tracking_uri=cfg.tracking_uri()).get_run(run_id).data.tags
    assert tags["prefect.flow_run_id"] == str(top) and tags["prefect.flow_run_name"]
    assert tags["prefect.subflow_run_id"] != str(top)  # the train-pipeline subflow run

    again_out = again.result()
    assert again_out["model_version"] == "1" and again_out["mlflow_run"] != run_id
    assert again_out["model"] == outputs["model"]  # the same folder, published once
    stages = int(again_out["stages"])  # every stage task, all Cached: the summary says so
    assert again_out["stages_cached"] == again_out["stages"] and stages >= 10
    assert (
        f"  cache     {stages} of {stages} stages reused from earlier runs (their inputs unchanged)"
    ) in again_out["summary"].splitlines()
    assert again_out["promotion_decision"] == "already-champion"
    assert again.message == (
        f"P@1 {100 * p1:.2f}% — version 1 already holds {target}; "
        f"MLflow run {again_out['mlflow_run']}"
    )
    again_tags = flow_run_tags(again.state_details.flow_run_id)
    assert "kept-champion" in again_tags and "promoted" not in again_tags
