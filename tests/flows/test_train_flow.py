"""The train flow with XR-Linear: a P@1 floor, a failure at level 2 resumes at level 2, and a
champion replaced only by a model of its own lineage (the issue's repro, with the retrain
deployment's flow), each top-level flow run showing its outcome (state message, tags, report
artifacts, MLflow links)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow import MlflowClient

import xmc_core.families.common as family_stages
from flows.runtime import configured, prefect_api
from flows.train import train, train_pipeline
from tasks.report import METRICS_KEY, REPORT_KEY
from tests.corpus.helpers import parquet_drop
from tests.flows.conftest import flow_run_artifacts, flow_run_tags, task_states
from tests.flows.test_deployments import BY_NAME, deployment_params, flow_of
from xmc_core.app.describe import describe_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.lineage import describe, lineage_of
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
    computed = ("train-level-2", "train-level-3", "zero-shot-rankers", "assemble-model")
    computed += ("evaluate",)  # the embedded corpus names labels no training document has
    computed += ("evaluate-train", "diagnose")  # the lifecycle's stages, after the model's
    flow_run = state.state_details.flow_run_id
    states = task_states(flow_run, expect=frozenset(computed), stages=int(outputs["stages"]))
    # what the run's summary counts: the stage tasks, those Cached; not synthesize-corpus (no
    # stage: it reuses its folder without a Prefect cache) nor the tracking tasks after them
    assert int(outputs["stages_cached"]) == list(states.values()).count("Cached") > 10
    assert int(outputs["stages"]) - int(outputs["stages_cached"]) == len(computed), states
    assert all(states[name] == "Completed" for name in computed)
    metrics = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())
    assert metrics["P@1"] >= 0.6, metrics  # the embedded corpus is learnable (~0.8 at scale 1)


def reuters_like(tmp_path: Path, small_corpus: Path) -> tuple[Path, Path]:
    """A dataset folder ``reuters`` (half the small corpus's training documents, imported) and a
    landing drop holding the other half: what the retrain deployment grows it with."""
    train = pq.read_table(small_corpus / "train.parquet")
    test = pq.read_table(small_corpus / "test.parquet")
    src = parquet_drop(tmp_path / "export", "reuters", train.slice(0, 200), test)
    ingest("parquet", src, tmp_path / "datasets" / "reuters", IngestOptions(rows_per_group=100))
    parquet_drop(tmp_path / "work" / "landing", "reuters-2026-12", train.slice(200), test)
    return tmp_path / "datasets" / "reuters", tmp_path / "work"


def test_a_champion_is_replaced_only_by_a_model_of_its_own_lineage(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's repro: the synthetic demo (`make train`), a reuters dataset (the nightly
    deployment), the retrain deployment growing it by a drop, the synthetic demo again: each
    dataset has its own model and champion; a model registered under another's name is refused.
    Each run's outcome is on its flow run. The deployments run with their own parameters."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # tracking under work_dir
    reuters, work = reuters_like(tmp_path, small_corpus)
    small = [f"work_dir={work}", "dask.n_workers=1", *SETS[2:]]
    demo = [*small, "data.synthetic_scale=0.05", "data.rows_per_group=150"]
    nightly = deployment_params("nightly", *small, f"data.dataset={reuters}")
    with prefect_api():
        synthetic = train(None, demo, return_state=True)
        first = flow_of(BY_NAME["nightly"])(**nightly, return_state=True)
        grown = flow_of(BY_NAME["retrain"])(**deployment_params("retrain", *nightly["overrides"]))
        again = train(None, demo, return_state=True)  # all cached: the same model
        shared = train(None, [*demo, "registry.model_name=xmc-reuters"], return_state=True)
    cfg = XmcConfig.load(None, [f"work_dir={work}"])
    client = MlflowClient(tracking_uri=cfg.tracking_uri(), registry_uri=cfg.tracking_uri())
    champion = {m.name: str(m.aliases["champion"]) for m in client.search_registered_models()}
    assert champion == {"xmc-reuters": "2", "xmc-synthetic": "1"}
    outputs = first.result()
    run_id = outputs["mlflow_run"]
    assert outputs["model_version"] == "1" and outputs["mlflow_url"] == "" and len(run_id) == 32
    assert outputs["corpus"] == str(reuters.resolve())
    assert synthetic.result()["promotion_reason"] == (
        "version 1 promoted to xmc-synthetic@champion (no champion before)"
    )
    assert outputs["promotion_reason"] == (
        "version 1 promoted to xmc-reuters@champion (no champion before)"
    )
    assert len(XmcModel.load(Path(outputs["model"])).labels) == 54  # what `xmc predict` loads
    p1 = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())["P@1"]
    # the model folder is the one `xmc train` writes, and so is the one MLflow serves
    folder = Path(outputs["model"])
    assert folder.parent == work / "models" and not (folder / RESULT_FILE).exists()
    described = describe_model(folder)
    trained_on = {k: v for k, v in described["trained_on"].items() if k != "trained_at"}
    assert trained_on == {
        "dataset": str(reuters.resolve()),
        "dataset_fingerprint": Corpus(reuters).fingerprint,
    }
    assert described["config"]["data"]["dataset"] == str(reuters)
    assert described["metrics"] == {"test": json.loads(
        (Path(outputs["evaluation"]) / "metrics.json").read_text()
    )}  # fmt: skip
    served = local_model_dir("models:/xmc-reuters/1", cfg)  # what `xmc inspect` reads
    assert sorted(p.name for p in served.iterdir()) == sorted(p.name for p in folder.iterdir())
    assert describe_model(served)["trained_on"] == described["trained_on"]
    assert "  cache " not in outputs["summary"]  # nothing was cached the first time
    assert first.message == (
        f"P@1 {100 * p1:.2f}% — version 1 promoted to xmc-reuters@champion (no champion "
        f"before); MLflow run {run_id}"
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
    tags = client.get_run(run_id).data.tags
    assert tags["prefect.flow_run_id"] == str(top) and tags["prefect.flow_run_name"]
    assert tags["prefect.subflow_run_id"] != str(top)  # the train-pipeline subflow run

    retrained = grown["outputs"]  # the drop grew the reuters corpus: the same lineage, compared
    assert grown["intake"]["ingested"] == ["reuters-2026-12"]
    metrics = json.loads((Path(retrained["evaluation"]) / "metrics.json").read_text())
    assert metrics["P@1"] >= 0.6, metrics  # the small corpus is learnable
    assert retrained["promotion_reason"].startswith(
        "version 2 promoted to xmc-reuters@champion (was version 1 at "
    )
    lineage = describe(lineage_of(reuters).model_copy(update={"drops": 1}))
    version = client.get_model_version("xmc-reuters", "2")
    assert (
        version.tags["xmc.lineage.name"] == "reuters" and version.tags["xmc.lineage.drops"] == "1"
    )
    assert f"Lineage: {lineage};" in version.description

    again_out = again.result()
    assert again_out["model_version"] == "1" and again_out["mlflow_run"] != run_id
    assert again_out["model"] == synthetic.result()["model"]  # the same folder, published once
    stages = int(again_out["stages"])  # every stage task, all Cached: the summary says so
    assert again_out["stages_cached"] == again_out["stages"] and stages >= 10
    assert (
        f"  cache     {stages} of {stages} stages reused from earlier runs (their inputs unchanged)"
    ) in again_out["summary"].splitlines()
    assert again_out["promotion_decision"] == "already-champion"
    assert again.message == (
        f"{again.message.split(' — ')[0]} — version 1 already holds xmc-synthetic@champion; "
        f"MLflow run {again_out['mlflow_run']}"
    )
    again_tags = flow_run_tags(again.state_details.flow_run_id)
    assert "kept-champion" in again_tags and "promoted" not in again_tags

    refused = shared.result()  # an explicit name: the synthetic model under reuters' name
    assert refused["model_version"] == "3" and refused["promotion_decision"] == "refused"
    assert refused["promotion_reason"].startswith(
        "version 3 refused by xmc-reuters@champion: trained on synthetic (from "
    )
    assert refused["promotion_reason"].endswith(
        f"the champion (version 2) on {lineage}: other labels, not compared"
    )
    assert refused["promotion_fix"].endswith("xmc promote 3 --set registry.model_name=xmc-reuters")
    assert f"; fix: {refused['promotion_fix']}; MLflow run " in shared.message
    assert "other-lineage" in flow_run_tags(shared.state_details.flow_run_id)
    assert refused["summary"].splitlines()[-1] == f"  fix       {refused['promotion_fix']}"
