"""Tracking and reporting of a training run: a tiny flow evaluates and diagnoses a small trained
model, then logs it to MLflow (SQLite under a temporary work_dir) and publishes the report."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from prefect.runtime import flow_run

from flows.runtime import configured, prefect_api
from flows.stage_runner import PrefectRunner
from tasks.lineage import flow_run_links
from tasks.report import METRICS_KEY, REPORT_KEY, publish_report
from tasks.timings import stage_timings
from tests.model_helpers import featurize, train_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.lineage import describe, lineage_of
from xmc_core.evaluation.plots import TITLES
from xmc_core.families.common import EVALUATE
from xmc_core.features.split_features import SplitFeatures
from xmc_core.lifecycle.artifacts import ModelFolder
from xmc_core.lifecycle.graph import RunContext, lifecycle_graph
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.registry.lineage import for_corpus
from xmc_core.serving.tracking import flatten_config, metric_key

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=5000"]
SPLITS = ("train", "test")


@task(name="sub-task", task_run_name="sub-task")
def sub_task() -> int:
    return 1


@flow(name="tracking-subflow")
def subflow() -> int:
    return sub_task()


@flow(name="tracking-test")
def tracking_flow(cfg: XmcConfig, outputs: dict[str, str]) -> dict[str, Any]:
    """What the train flow does after training: the lifecycle graph (evaluate on train,
    diagnose, track, gate, report) as cached tasks, then the report published."""
    run = PrefectRunner(str(cfg.work_dir))
    model = run.source(XmcModel, outputs["model"])
    test = run.source(SplitFeatures, outputs["test"])
    handles = {
        "corpus": run.source(Corpus, outputs["corpus"]), "model": model,
        "model_train": run.source(SplitFeatures, outputs["train"]), "model_test": test,
        "evaluation": run(EVALUATE, label="evaluate-test", model=model, split=test, cfg=cfg.eval),
    }  # fmt: skip
    subflow()
    seen: dict[str, float] = {}

    def timings() -> dict[str, float]:
        seen.update(stage_timings())
        return dict(seen)

    ctx = RunContext(str(flow_run.get_id()), "tiny", timings, flow_run_links())
    done = lifecycle_graph(run, handles, run.source(ModelFolder, outputs["model"]), cfg, ctx)
    report = publish_report(run.path(done["report"]), run.work_dir)
    return {
        "timings": seen, "tracking": run.value(done["tracked"]).values, "report": report,
        "diagnostics": run.path(done["diagnostics"]),
        "eval_dirs": {
            "train": run.path(done["evaluation_train"]), "test": run.path(handles["evaluation"]),
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def run(
    small_corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[XmcConfig, dict[str, str], Any]]:
    work = tmp_path_factory.mktemp("tracking")
    cfg = XmcConfig.load(None, [f"work_dir={work}", *SETS, "tracking.run_name=tiny"])
    cfg = for_corpus(cfg, small_corpus)  # xmc-synthetic, the model name tracking registers
    feats = featurize(Corpus(small_corpus), cfg)
    outputs = {"corpus": str(small_corpus)}
    for name, part in (("train", feats.train), ("test", feats.test)):
        part.save(work / name)
        outputs[name] = str(work / name)
    train_model(feats, cfg, Corpus(small_corpus)).save(work / "model")
    outputs["model"] = str(work / "model")
    saved = os.environ.pop("MLFLOW_TRACKING_URI", None)
    try:
        with prefect_api():
            state = configured(tracking_flow, cfg, use_dask=False)(cfg, outputs, return_state=True)
        assert state.is_completed(), state.message
        assert "MLFLOW_TRACKING_URI" not in os.environ  # nothing leaks out of the task
        yield cfg, outputs, state
    finally:
        if saved is not None:
            os.environ["MLFLOW_TRACKING_URI"] = saved


def mlflow_client(cfg: XmcConfig) -> Any:
    from mlflow import MlflowClient

    uri = cfg.tracking_uri()
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_run_records_config_metrics_and_tags(run: tuple) -> None:
    cfg, outputs, state = run
    result = state.result()
    tracking = result["tracking"]
    assert tracking["version"] == "1"
    assert cfg.tracking_uri().startswith("sqlite:///") and str(cfg.work_dir) in cfg.tracking_uri()
    mlrun = mlflow_client(cfg).get_run(tracking["run_id"])
    assert mlrun.info.run_name == "tiny" and mlrun.info.status == "FINISHED"
    assert mlrun.info.artifact_uri.startswith((cfg.mlflow_dir() / "artifacts").as_uri())
    params = mlrun.data.params
    assert params == flatten_config(cfg)
    assert params["tree.branching"] == "4" and params["eval.ks"] == "[1, 3, 5]"
    assert params["tracking.uri"] == "null" and params["work_dir"] == str(cfg.work_dir)
    for split, folder in result["eval_dirs"].items():
        metrics = json.loads((Path(folder) / "metrics.json").read_text())
        for name, value in metrics.items():
            assert mlrun.data.metrics[metric_key(f"{split}.{name}")] == pytest.approx(value)
    assert "test.P_at_1" in mlrun.data.metrics
    assert mlrun.data.metrics["time.diagnose_s"] >= 0
    tags = mlrun.data.tags
    assert tags["xmc.config_fingerprint"] == cfg.fingerprint()
    assert tags["xmc.data_fingerprint"] == Corpus(outputs["corpus"]).fingerprint
    assert len(tags["xmc.code_version"]) == 64
    assert tags["xmc.model_kind"] == "xr_linear"
    flow_run_id = str(state.state_details.flow_run_id)
    assert tags["prefect.flow_run_id"] == flow_run_id  # the top-level flow run: this one
    assert tags["prefect.flow_run_name"] and "prefect.subflow_run_id" not in tags
    assert tags["prefect.flow_run_url"].endswith(f"/runs/flow-run/{flow_run_id}")
    assert tags["prefect.flow_run_url"].startswith("http")


def test_run_records_the_corpus_as_dataset_inputs(run: tuple) -> None:
    cfg, outputs, state = run
    mlrun = mlflow_client(cfg).get_run(state.result()["tracking"]["run_id"])
    corpus = Corpus(outputs["corpus"])
    found = {}
    for given in mlrun.inputs.dataset_inputs:
        context = {t.key: t.value for t in given.tags}["mlflow.data.context"]
        found[context] = given.dataset
    assert set(found) == {"training", "evaluation"}
    assert (
        found["training"].name == "synthetic/train" and found["evaluation"].name == "synthetic/test"
    )
    assert found["training"].digest == corpus.fingerprint[:32]
    assert json.loads(found["training"].source) == {"uri": str(Path(outputs["corpus"]).resolve())}
    profile = json.loads(found["evaluation"].profile)
    assert profile["rows"] == 120 and profile["fingerprint"] == corpus.fingerprint


def test_registered_version_has_a_description(run: tuple) -> None:
    cfg, outputs, state = run
    tracking = state.result()["tracking"]
    version = mlflow_client(cfg).get_model_version(cfg.registry.model_name, tracking["version"])
    text = version.description
    p1 = json.loads((Path(state.result()["eval_dirs"]["test"]) / "metrics.json").read_text())["P@1"]
    assert cfg.registry.model_name == "xmc-synthetic"
    assert text.startswith("xr_linear model trained on `synthetic` (corpus fingerprint `")
    lineage = lineage_of(outputs["corpus"])
    assert f"Lineage: {describe(lineage)}; only a version of this lineage is compared" in text
    assert version.tags["xmc.lineage.name"] == "synthetic" == lineage.name
    assert version.tags["xmc.lineage.root"] == lineage.root == Corpus(outputs["corpus"]).fingerprint
    assert (
        version.tags["xmc.dataset"] == "synthetic" and version.tags["xmc.model_kind"] == "xr_linear"
    )

    assert f"Test split: P@1 {100 * p1:.2f}%, P@5 " in text
    assert f"MLflow run: `{tracking['run_id']}`." in text
    flow_run_id = str(state.state_details.flow_run_id)
    assert "Prefect flow run: [" in text and f"/runs/flow-run/{flow_run_id})." in text


def test_run_holds_artifacts_and_the_model(run: tuple) -> None:
    cfg, _, state = run
    tracking = state.result()["tracking"]
    client = mlflow_client(cfg)
    run_id = tracking["run_id"]

    def listed(path: str | None = None) -> set[str]:
        return {a.path for a in client.list_artifacts(run_id, path)}

    assert {"config.yaml", "evaluation", "plots", "report"} <= listed()
    assert {"evaluation/diagnostics.json", "evaluation/train", "evaluation/test"} <= listed(
        "evaluation"
    )
    plots = listed("plots")
    assert {"plots/k_curves.png", "plots/beam_recall.png", "plots/training_loss.png"} <= plots
    assert "plots/recall_by_frequency.png" in plots
    assert listed("report") == {"report/report.md"}
    model = client.get_model_version(cfg.registry.model_name, tracking["version"])
    assert model.run_id == run_id
    assert tracking["model_uri"].startswith("models:/")


def test_stage_timings_cover_the_tasks(run: tuple) -> None:
    _, _, state = run
    timings = state.result()["timings"]
    assert {"evaluate-train", "evaluate-test", "diagnose", "sub-task"} <= set(timings)
    assert not any(name.startswith("tracking-subflow") for name in timings)  # its stand-in run
    assert all(seconds >= 0 for seconds in timings.values())
    assert timings["diagnose"] > 0
    again = stage_timings(state.state_details.flow_run_id)  # after the run: every task is final
    assert {"log-training-run", "publish-report"} <= set(again)


def test_report_published_as_file_and_prefect_artifacts(run: tuple) -> None:
    cfg, _, state = run
    result = state.result()
    flow_run_id = state.state_details.flow_run_id
    report = Path(result["report"])
    assert report == cfg.work_dir / "reports" / str(flow_run_id) / "report.md"
    markdown = report.read_text()
    assert "## Metrics" in markdown and "| P@1 |" in markdown
    assert "**promoted** to `@champion`" in markdown
    assert result["tracking"]["run_id"] in markdown
    assert "To see the run: `mlflow ui --backend-store-uri sqlite:///" in markdown
    assert "mlflow-artifacts:" not in markdown and "file://" not in markdown
    plots = json.loads((Path(result["diagnostics"]) / "diagnostics.json").read_text())["plots"]
    for name, file in plots.items():  # every plot embedded byte for byte
        png = (Path(result["diagnostics"]) / "plots" / file).read_bytes()
        assert 0 < len(png) < 100_000, (file, len(png))
        image = f"![{TITLES[name]}](data:image/png;base64,{base64.b64encode(png).decode()})"
        assert image in markdown
    assert markdown.count("](data:image/png;base64,") == len(plots) == 4
    titles = [markdown.index(f"### {TITLES[n]}\n") for n in TITLES if n in plots]
    assert titles == sorted(titles)  # in the order of TITLES: P@k first
    flt = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        artifacts = {a.key: a for a in client.read_artifacts(artifact_filter=flt)}
    assert artifacts[REPORT_KEY].type == "markdown"
    assert artifacts[REPORT_KEY].data == markdown
    assert artifacts[METRICS_KEY].type == "table"
    rows = json.loads(artifacts[METRICS_KEY].data)
    assert set(rows[0]) == {"metric", "train (%)", "test (%)", "champion (%)"}
    train, test = (
        json.loads((Path(result["eval_dirs"][s]) / "metrics.json").read_text())["P@1"]
        for s in SPLITS
    )
    assert rows[0]["metric"] == "P@1" and rows[0]["test (%)"] == round(100 * test, 2)
    assert rows[0]["train (%)"] == round(100 * train, 2) and rows[0]["champion (%)"] is None
    assert f"| P@1 | {100 * train:.2f} | {100 * test:.2f} |" in markdown


def test_diagnostics_folder(run: tuple) -> None:
    _, _, state = run
    folder = Path(state.result()["diagnostics"])
    summary = json.loads((folder / "diagnostics.json").read_text())
    assert set(summary["k_curves"]) == set(SPLITS)
    assert len(summary["beam_recall"]["test"]) == len(summary["training_loss"]["train"]) >= 2
    for file in summary["plots"].values():
        assert (folder / "plots" / file).read_bytes()[:4] == b"\x89PNG"


def test_params_and_metric_keys_follow_mlflow_rules(tmp_path: Path) -> None:
    long_path = tmp_path / ("x" * 600)
    flat = flatten_config(XmcConfig.load(None, [f"data.dataset={long_path}"]))
    assert len(flat["data.dataset"]) == 500 and flat["data.dataset"].endswith("...")
    assert flat["model.kind"] == "xr_linear" and flat["predict.topk"] == "20"
    assert metric_key("test.P@1") == "test.P_at_1"
    assert metric_key("time.embed #1_s") == "time.embed _1_s"
