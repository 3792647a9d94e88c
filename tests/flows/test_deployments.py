"""prefect.yaml: every deployment names a real flow, its parameters bind to the flow's signature,
its config is a shipped preset, and the flow runs with those parameters (the paths moved to a
temporary folder, on the small synthetic corpus; ``nightly`` and ``retrain``: in
``test_train_flow.py``)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from prefect import Flow

import flows.matcher
import flows.train
from flows.runtime import prefect_api
from flows.stage_runner import PrefectRunner, Ref
from xmc_core.config import XmcConfig
from xmc_core.features.split_features import SplitFeatures

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS: list[dict[str, Any]] = yaml.safe_load((ROOT / "prefect.yaml").read_text())[
    "deployments"
]
BY_NAME = {dep["name"]: dep for dep in DEPLOYMENTS}
WITH_CONFIG = [dep["name"] for dep in DEPLOYMENTS if "config_path" in dep["parameters"]]


def flow_of(dep: dict[str, Any]) -> Flow:
    path, name = dep["entrypoint"].split(":")
    flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)
    assert isinstance(flow, Flow), dep["name"]
    return flow


def test_every_deployment_binds_its_parameters_to_its_flow() -> None:
    assert {"nightly", "retrain", "featurize", "xmc-matcher-gpu"} <= set(BY_NAME)
    for dep in DEPLOYMENTS:
        signature = inspect.signature(flow_of(dep).fn)
        signature.bind(**dep["parameters"])  # TypeError: a required one missing, an unknown one
        for schedule in dep.get("schedules", []):
            assert len(schedule["cron"].split()) == 5 and schedule["timezone"] == "UTC"


def test_config_deployments_use_shipped_presets_and_nightly_a_real_corpus() -> None:
    assert set(WITH_CONFIG) == {"nightly", "retrain", "featurize"}
    for name in WITH_CONFIG:
        params = BY_NAME[name]["parameters"]
        assert params["config_path"].startswith("configs/"), name
        XmcConfig.load(ROOT / params["config_path"], params["overrides"])
    nightly = BY_NAME["nightly"]["parameters"]
    cfg = XmcConfig.load(ROOT / nightly["config_path"], nightly["overrides"])
    assert cfg.data.dataset == Path("data/corpus")  # not None: the synthetic corpus
    featurize = BY_NAME["featurize"]["parameters"]
    assert Path(featurize["corpus_dir"]) == cfg.data.dataset
    assert featurize["config_path"] == nightly["config_path"]  # its features are nightly's


def test_matcher_deployment_takes_exactly_what_the_train_flow_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dep = BY_NAME["xmc-matcher-gpu"]
    sent: list[tuple[str, dict[str, Any]]] = []

    def run_deployment(name: str, parameters: dict[str, Any], **_: Any) -> SimpleNamespace:
        sent.append((name, parameters))
        return SimpleNamespace(state=None, name="fake-run")

    monkeypatch.setattr(flows.matcher, "run_deployment", run_deployment)
    target = f"{flow_of(dep).name}/{dep['name']}"
    monkeypatch.setenv(flows.matcher.MATCHER_DEPLOYMENT_ENV, target)
    refs = [Ref(object, name) for name in ("tokens", "train", "tree")]
    cfg = XmcConfig()
    with pytest.raises(RuntimeError, match="fake-run ended None"):
        flows.matcher.run_matcher(PrefectRunner(tmp_path), *refs, cfg.encoder, cfg.matcher)
    [(name, params)] = sent
    assert name == "matcher/xmc-matcher-gpu" and set(params) == set(dep["parameters"])
    inspect.signature(flow_of(dep).fn).bind(**params)
    assert params["matcher"] == XmcConfig().matcher.model_dump(mode="json")


def deployment_params(name: str, *overrides: str) -> dict[str, Any]:
    """The parameters of deployment ``name`` with its config path made absolute and
    ``overrides`` (paths moved to a temporary folder) added to its own."""
    params = dict(BY_NAME[name]["parameters"])
    params["config_path"] = str(ROOT / params["config_path"])
    params["overrides"] = [*params["overrides"], *overrides]
    return params


@pytest.mark.usefixtures("prefect_server")
def test_featurize_deployment_runs_with_its_parameters(small_corpus: Path, tmp_path: Path) -> None:
    """(``nightly`` and ``retrain`` run with their parameters in ``test_train_flow``'s lineage
    test, one after the other on one registry.)"""
    params = deployment_params("featurize", f"work_dir={tmp_path / 'work'}")
    params["corpus_dir"] = str(small_corpus)
    with prefect_api():
        result = flow_of(BY_NAME["featurize"])(**params)
    assert set(result) == {"vectorizer", "label_index", "label_features", "train", "test"}
    assert SplitFeatures.load(result["train"]).X.shape[0] == 400
    assert SplitFeatures.load(result["test"]).X.shape[0] == 120
