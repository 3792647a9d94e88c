"""``xmc registry``: the versions, decisions, figures and alias of a real SQLite registry after
gated promotions (the registry of ``tests/serving/registry_fixtures.py``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from tests.serving.registry_fixtures import (
    NAME,
    Template,
    fresh_registry,
    gate_dataset,
    gate_models,
    gate_template,
    registry_config,
)
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.lineage import describe, lineage_of
from xmc_core.serving.registry.listing import format_listing, list_versions
from xmc_core.serving.registry.promotion import promote_gated

__all__ = ["gate_dataset", "gate_models", "gate_template"]  # fixtures used by name
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cfg(gate_template: Template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> XmcConfig:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    return fresh_registry(gate_template, tmp_path)


def pct(value: float | None) -> str:
    assert value is not None
    return f"{100 * value:.2f}%"


def xmc(cfg: XmcConfig, *args: str) -> subprocess.CompletedProcess[str]:
    sets = [f"work_dir={cfg.work_dir}", f"tracking.uri={cfg.tracking_uri()}"]
    sets += [f"registry.model_name={cfg.registry.model_name}"]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "xmc_core.app.cli", *args]
    cmd += [a for s in sets for a in ("--set", s)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_versions_decisions_and_alias(cfg: XmcConfig, gate_dataset: Path) -> None:
    first = promote_gated(cfg, "1", gate_dataset)  # no champion: promoted
    better = promote_gated(cfg, "2", gate_dataset)  # beats 1
    worse = promote_gated(cfg, "3", gate_dataset)  # the model of 1: rejected against 2
    assert first.promoted and better.promoted and not worse.promoted
    listing = list_versions(cfg)
    assert listing.holder == "2" and listing.history == ["1", "2"]
    assert [v.version for v in listing.versions] == ["1", "2", "3", "4"]
    client = mlflow.MlflowClient(tracking_uri=cfg.tracking_uri(), registry_uri=cfg.tracking_uri())
    runs = [client.get_model_version(NAME, str(n)).run_id for n in range(1, 5)]
    assert [v.run_id for v in listing.versions] == runs
    assert {v.family for v in listing.versions} == {"xr_linear"}
    v2, v3, v4 = listing.versions[1:]
    assert v2.aliases == ["champion"] and v3.aliases == []
    assert v3.promotion["decision"] == "rejected" and v3.promotion["champion_version"] == "2"
    assert v4.promotion == {}

    lines = format_listing(listing).splitlines()
    assert lines[0] == f"{NAME}: 4 versions ({cfg.tracking_uri()})"
    row = {line.split()[0]: line for line in lines[2:6]}
    assert f"promoted (gated)  P@1 {pct(first.new_value)}  -" in row["1"]
    assert row["1"].endswith("no champion")
    assert f"P@1 {pct(better.new_value)}  {pct(better.champion_value)} (v1)" in row["2"]
    assert row["2"].endswith(f"[@champion] {better.reason}")
    assert (
        f"rejected (gated)  P@1 {pct(worse.new_value)}  {pct(worse.champion_value)} (v2)"
        in (row["3"])
    )
    assert row["3"].endswith(worse.reason) and "< margin" in worse.reason
    data = f"{gate_dataset.name} ({Corpus(gate_dataset).fingerprint[:12]})"
    lineage = describe(lineage_of(gate_dataset))
    assert v4.dataset == data and v4.lineage == lineage
    cells = re.split(r"\s{2,}", row["4"])
    assert cells[3:] == ["xr_linear", data, lineage, "-", "-", "-"]  # never decided
    assert lines[-2:] == [f"{NAME}@champion: version 2", "alias history (oldest first): 1 -> 2"]

    client.delete_model_version_tag(NAME, "3", "xmc.model_kind")  # as registered by older xmc
    out = xmc(cfg, "registry", "--json")  # reads version 3's family from its MLmodel file
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == listing.model_dump(mode="json")
    assert "Downloading artifacts" not in out.stderr and "%|" not in out.stderr  # no bars
    inspect = xmc(cfg, "inspect", f"models:/{NAME}@champion")
    assert inspect.returncode == 0, inspect.stderr
    assert "family: xr_linear" in inspect.stdout and "tree: " in inspect.stdout


def test_no_model_and_no_store(cfg: XmcConfig, tmp_path: Path) -> None:
    other = registry_config(tmp_path, "registry.model_name=nope")
    listing = list_versions(other)
    assert listing.versions == [] and format_listing(listing) == (
        f"no registered model named 'nope' in {cfg.tracking_uri()}; registered: {NAME}\n"
        "  fix: pick one with --set registry.model_name=NAME (or data.dataset=DATASET)"
    )
    missing = tmp_path / "none" / "mlflow.db"
    nothing = registry_config(tmp_path, f"tracking.uri=sqlite:///{missing}")
    assert (
        format_listing(list_versions(nothing))
        == f"no MLflow store at {missing}: nothing registered"
    )
    assert not missing.parent.exists()  # reading did not create a store
