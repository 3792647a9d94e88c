"""prefect.yaml names real flows with the parameters they take."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import yaml
from prefect import Flow

ROOT = Path(__file__).resolve().parents[2]


def test_every_deployment_points_at_a_flow_with_matching_parameters() -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    assert spec["deployments"]
    for dep in spec["deployments"]:
        path, name = dep["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, name)
        assert isinstance(flow, Flow), dep["name"]
        params = inspect.signature(flow.fn).parameters
        assert set(dep.get("parameters", {})) <= set(params), dep["name"]
        required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
        assert required <= set(dep.get("parameters", {})) | {"corpus_dir"}, dep["name"]
        for schedule in dep.get("schedules", []):
            assert len(schedule["cron"].split()) == 5 and schedule["timezone"] == "UTC"
