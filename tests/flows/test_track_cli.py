"""``xmc train --track`` runs the lifecycle stages the train flow runs (``xmc_core.lifecycle``):
on one tiny dataset, each into its own MLflow store, the two give the same MLflow run (params,
metrics, tags, artifact names, the registered version; ids, times and paths aside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from flows.runtime import configured, prefect_api
from flows.train import train_pipeline
from xmc_core.app.cli import main
from xmc_core.app.commands import tracked_config
from xmc_core.config import XmcConfig

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=5000"]
SETS += ["tracking.run_name=tiny", "tracking.experiment=same"]
VARYING_TAGS = {"xmc.model_dir", "xmc.process", "xmc.promotion.at"}
"""Tags that name a place, a process or a time (the model folder, the pid, when the gate
decided), not what was tracked."""


def artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> list[str]:
    out = []
    for item in client.list_artifacts(run_id, path):
        out += artifact_paths(client, run_id, item.path) if item.is_dir else [item.path]
    return sorted(out)


def run_data(uri: str) -> dict[str, Any]:
    """The one run of experiment ``same`` in the store at ``uri``, and version 1 of its model,
    without ids, times and paths."""
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("same").experiment_id])
    version = client.get_model_version("xmc-synthetic", "1")
    tags = {
        k: v
        for k, v in run.data.tags.items()
        if not k.startswith("prefect.") and k not in VARYING_TAGS
    }
    description = [
        line
        for line in version.description.split("\n\n")
        if not line.startswith(("MLflow run:", "Prefect flow run:"))
    ]
    return {
        "status": run.info.status,
        "params": run.data.params,
        "metrics": {k: v for k, v in run.data.metrics.items() if not k.startswith("time.")},
        "timed": sorted(k for k in run.data.metrics if k.startswith("time.")),
        "tags": tags,
        "artifacts": artifact_paths(client, run.info.run_id),
        "version_tags": {k: v for k, v in version.tags.items() if k not in VARYING_TAGS},
        "description": description,
        "inputs": sorted(d.dataset.name for d in run.inputs.dataset_inputs),
    }


def test_cli_and_flow_give_the_same_mlflow_run(
    small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sets = [f"work_dir={tmp_path / 'work'}", f"data.dataset={small_corpus}", *SETS]
    cli_uri = f"sqlite:///{tmp_path / 'cli' / 'mlflow.db'}"
    flow_uri = f"sqlite:///{tmp_path / 'flow' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", cli_uri)
    overrides = [item for s in sets for item in ("--set", s)]
    assert main(["train", str(small_corpus), str(tmp_path / "model"), "--track", *overrides]) == 0
    monkeypatch.setenv("MLFLOW_TRACKING_URI", flow_uri)
    cfg = XmcConfig.load(None, sets)
    with prefect_api():
        state = configured(train_pipeline, cfg, use_dask=False)(cfg, return_state=True)
    assert state.is_completed(), state.message
    assert state.result()["promotion_decision"] == "promoted"

    cli, flow = run_data(cli_uri), run_data(flow_uri)
    assert cli == flow
    assert cli["status"] == "FINISHED" and cli["params"]["data.dataset"] == str(small_corpus)
    assert cli["version_tags"]["xmc.promotion.decision"] == "promoted"
    assert cli["metrics"]["test.P_at_1"] > 0.3 and "train.P_at_1" in cli["metrics"]
    assert "time.evaluate-train_s" in cli["timed"] and "time.diagnose_s" in cli["timed"]
    assert {"config.yaml", "report/report.md", "evaluation/diagnostics.json"} <= set(
        cli["artifacts"]
    )
    assert "evaluation/train/metrics.json" in cli["artifacts"]


def test_when_xmc_train_tracks() -> None:
    """``--track``, or a config that sets ``tracking.enabled=true`` itself; the default
    (``tracking.enabled`` true but not set) leaves ``xmc train`` untracked."""
    ds = Path("ds")
    assert tracked_config(XmcConfig.load(None, []), False, ds)[1] is False
    cfg, track = tracked_config(XmcConfig.load(None, ["tracking.enabled=true"]), False, ds)
    assert track is True and cfg.data.dataset == ds
    off = XmcConfig.load(None, ["tracking.enabled=false"])
    assert tracked_config(off, False, ds)[1] is False
    cfg, track = tracked_config(off, True, ds)
    assert track is True and cfg.tracking.enabled is True and cfg.data.dataset == ds
    given = XmcConfig.load(None, ["data.dataset=/data/x"])
    assert tracked_config(given, True, ds)[0].data.dataset == Path("/data/x")
