"""Hostile model references, a corrupt serving cache, and kills around registration and
promotion: URIs cannot leave the artifact store, a damaged cached copy is quarantined and
downloaded again, and the next run reconciles what a SIGKILL left half done."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import mlflow
import pytest

from tests.reliability import hostile_registry_child
from tests.serving.conftest import (
    ALIAS,
    MODEL_NAME,
    Registry,
    registry,
    tiny_dataset,
    tiny_model_dir,
)
from tests.serving.registry_fixtures import (
    NAME,
    Template,
    fresh_registry,
    gate_dataset,
    gate_models,
    gate_template,
)
from xmc_core.config import XmcConfig
from xmc_core.errors import InputError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.registry.promotion import champion_version, promote_version, rollback
from xmc_core.serving.registry.reconcile import reconcile
from xmc_core.serving.registry.store import RegistryStore
from xmc_core.serving.resolve import local_model_dir
from xmc_core.serving.tracking import register_tracked, track_run
from xmc_core.storage.work_dir import WorkDir

# fixtures used by name
__all__ = ["gate_dataset", "gate_models", "gate_template", "registry", "tiny_dataset"]
__all__ += ["tiny_model_dir"]
pytestmark = pytest.mark.reliability
SUITE = "hostile-registry"
ROOT = Path(__file__).resolve().parents[2]
DECISION = "xmc.promotion.decision"


@pytest.fixture
def quiet_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or environment tracking URI; cwd in tmp (a stray store would land there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)


@pytest.fixture
def reader_cfg(registry: Registry, tmp_path: Path, quiet_mlflow: None) -> XmcConfig:
    """The shared test registry, with a private serving cache under ``tmp_path``."""
    return XmcConfig.load(None, [f"work_dir={tmp_path / 'work'}", f"tracking.uri={registry.uri}"])


def client(uri: str) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)


def _local(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


# ---- item 6: model URIs cannot leave the artifact store ----------------------------------


ESCAPES = ["alias", "version", "version-encoded", "run-model", "run", "logged-model"]


def _escape_uri(kind: str, reg: Registry, target: Path) -> str:
    """A URI whose sub-path climbs from the artifacts it names to ``target`` (a model folder
    outside the artifact store)."""
    c = client(reg.uri)
    version_dir = _local(c.get_model_version_download_uri(MODEL_NAME, "1"))
    model_dir = _local(c.get_logged_model(reg.model_uri.split("/")[-1]).artifact_location)
    run_dir = _local(c.get_run(reg.run_id).info.artifact_uri)
    up = {k: os.path.relpath(target, d) for k, d in (("v", version_dir), ("m", model_dir))}
    return {
        "alias": f"models:/{MODEL_NAME}@{ALIAS}/{up['v']}",
        "version": f"models:/{MODEL_NAME}/1/{up['v']}",
        "version-encoded": f"models:/{MODEL_NAME}/1/{up['v'].replace('..', '%2e%2e')}",
        "run-model": f"runs:/{reg.run_id}/model/{up['m']}",
        "run": f"runs:/{reg.run_id}/{os.path.relpath(target, run_dir)}",
        "logged-model": f"{reg.model_uri}/{up['m']}",
    }[kind]


@pytest.mark.parametrize("kind", ESCAPES)
def test_uri_sub_paths_cannot_leave_the_artifacts(
    kind: str,
    registry: Registry,
    tiny_model_dir: Path,
    reader_cfg: XmcConfig,
    tmp_path: Path,
) -> None:
    planted = tmp_path / "outside" / "model"  # a model folder outside the artifact store
    shutil.copytree(tiny_model_dir, planted)
    uri = _escape_uri(kind, registry, planted)
    with pytest.raises(InputError, match="leaves the artifacts") as err:
        local_model_dir(uri, reader_cfg)
    assert err.value.fix
    cache = WorkDir.of(reader_cfg.work_dir).serving_cache
    assert not list(cache.rglob("meta.json")), "a folder outside the store was copied"


@pytest.mark.parametrize(
    "tail", ["x' OR name != '", "model\" OR '1' = '1", "m'\"x"], ids=["single", "double", "both"]
)
def test_quotes_in_a_runs_uri_are_not_pasted_into_a_filter(
    tail: str, registry: Registry, reader_cfg: XmcConfig
) -> None:
    with pytest.raises(InputError, match=r"cannot download the model|no model") as err:
        local_model_dir(f"runs:/{registry.run_id}/{tail}", reader_cfg)
    assert err.value.fix


# ---- item 12: a corrupt serving-cache copy is quarantined and downloaded again -----------


@pytest.mark.parametrize("damage", ["corrupt", "incomplete"])
def test_damaged_cache_copy_is_quarantined_and_downloaded_again(
    damage: str, reader_cfg: XmcConfig, caplog: pytest.LogCaptureFixture
) -> None:
    uri = f"models:/{MODEL_NAME}/1"
    folder = local_model_dir(uri, reader_cfg)
    cache = WorkDir.of(reader_cfg.work_dir).serving_cache
    key_dir = cache / folder.relative_to(cache).parts[0]
    victim = max((p for p in folder.rglob("*.npz")), key=lambda p: p.stat().st_size)
    original = victim.read_bytes()
    damaged = original[:-64] + bytes(64) if damage == "corrupt" else None
    if damaged is None:
        victim.unlink()
    else:
        victim.write_bytes(damaged)
    with caplog.at_level(logging.WARNING):
        again = local_model_dir(uri, reader_cfg)
    assert again == folder and victim.read_bytes() == original
    XmcModel.load(again)
    quarantined = sorted(p for p in (cache / "quarantine").iterdir() if p.is_dir())
    assert [p.name.startswith(key_dir.name) for p in quarantined] == [True]
    reason = quarantined[0].with_name(quarantined[0].name + ".REASON.txt").read_text()
    assert str(victim.relative_to(key_dir)) in reason
    kept = quarantined[0] / victim.relative_to(key_dir)
    assert (kept.read_bytes() == damaged) if damaged else not kept.exists()
    assert (quarantined[0] / folder.relative_to(key_dir) / "meta.json").is_file()
    assert "quarantine" in caplog.text and str(victim.relative_to(key_dir)) in caplog.text


# ---- item 11: registry consistency under kills --------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def child(args: dict[str, Any], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tests.reliability.hostile_registry_child", json.dumps(args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), cwd=cwd)


@pytest.fixture(scope="module")
def run_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The diagnostics and evaluation folders a registering run reads (tiny, hand-written)."""
    root = tmp_path_factory.mktemp("run-files")
    (root / "diagnostics").mkdir()
    (root / "diagnostics" / "diagnostics.json").write_text("{}", encoding="utf-8")
    (root / "eval-test").mkdir()
    (root / "eval-test" / "metrics.json").write_text('{"P@1": 0.5}', encoding="utf-8")
    return {"diagnostics": str(root / "diagnostics"), "evals": {"test": str(root / "eval-test")}}


def registering_sets(root: Path, empty_store: Path) -> list[str]:
    """The settings of a registering run under ``root``, its store a copy of ``empty_store``
    (the schema's creation is tested on its own)."""
    (root / "mlflow").mkdir(parents=True)
    shutil.copyfile(empty_store, root / "mlflow" / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow' / 'mlflow.db'}"
    sets = [f"work_dir={root}", f"tracking.uri={uri}", f"registry.model_name={NAME}"]
    return [*sets, "tracking.experiment=hostile"]


def register_here(sets: list[str], model: Path, dataset: Path, files: dict) -> dict[str, Any]:
    """The next registering run, in this process."""
    outputs = {"corpus": str(dataset), "model": str(model)}
    return hostile_registry_child.register({"sets": sets, "outputs": outputs, **files})


def test_kill_between_registration_and_promotion_is_reconciled(
    gate_models: dict[str, Path],
    gate_dataset: Path,
    run_files: dict,
    empty_store: Path,
    tmp_path: Path,
    quiet_mlflow: None,
) -> None:
    sets = registering_sets(tmp_path / "work", empty_store)
    outputs = {"corpus": str(gate_dataset), "model": str(gate_models["good"])}
    args = {"step": "register", "kill": "registered", "sets": sets, "outputs": outputs}
    done = child({**args, **run_files}, tmp_path)
    assert done.returncode == -9, done.stderr[-3000:]
    c = client(XmcConfig.load(None, sets).tracking_uri())
    orphan = c.get_model_version(NAME, "1")
    assert DECISION not in orphan.tags and not orphan.description  # killed before describing
    assert c.get_run(orphan.run_id).info.status == "FINISHED"  # registered after the run

    nxt = register_here(sets, gate_models["worse"], gate_dataset, run_files)
    assert nxt["version"] == "2"
    orphan = c.get_model_version(NAME, "1")
    assert orphan.tags[DECISION] == "abandoned", orphan.tags
    assert "stopped" in orphan.tags["xmc.promotion.reason"]
    assert c.get_run(nxt["run_id"]).info.status == "FINISHED"
    assert nxt["run_id"] in c.get_model_version(NAME, "2").description


def test_registration_rerun_after_a_kill_takes_the_version_it_made(
    gate_models: dict[str, Path],
    gate_dataset: Path,
    run_files: dict,
    empty_store: Path,
    tmp_path: Path,
    quiet_mlflow: None,
) -> None:
    """A kill between the run and its registration, or inside the registration: the flow's
    rerun finds the tracking stage done and runs the registration again, for the same run."""
    sets = registering_sets(tmp_path / "work", empty_store)
    cfg = XmcConfig.load(None, sets)
    model, corpus = gate_models["good"], gate_dataset
    evals = {s: Path(d) for s, d in run_files["evals"].items()}
    tracked = track_run(cfg, model, corpus, evals, Path(run_files["diagnostics"]), {}, {})
    c = client(cfg.tracking_uri())
    assert tracked["version"] is None and c.search_registered_models() == []
    first = register_tracked(cfg, tracked, model, corpus, {"P@1": 0.5})
    again = register_tracked(cfg, tracked, model, corpus, {"P@1": 0.5})
    assert first == again == {**tracked, "version": "1"}
    (version,) = c.search_model_versions(f"name = '{NAME}'")
    assert version.run_id == tracked["run_id"] and "P@1 50.00%" in version.description


def test_identical_retrain_registers_no_new_version(
    gate_models: dict[str, Path],
    gate_dataset: Path,
    run_files: dict,
    empty_store: Path,
    tmp_path: Path,
    quiet_mlflow: None,
) -> None:
    sets = registering_sets(tmp_path / "work", empty_store)
    first = register_here(sets, gate_models["good"], gate_dataset, run_files)
    second = register_here(sets, gate_models["good"], gate_dataset, run_files)
    c = client(XmcConfig.load(None, sets).tracking_uri())
    versions = sorted(str(v.version) for v in c.search_model_versions(f"name = '{NAME}'"))
    assert first["version"] == second["version"] == "1" and versions == ["1"]
    assert first["run_id"] != second["run_id"]
    assert c.get_run(second["run_id"]).info.status == "FINISHED"


def test_kill_after_alias_move_is_reconciled(
    gate_template: Template, tmp_path: Path, quiet_mlflow: None, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = fresh_registry(gate_template, tmp_path)
    promote_version(cfg, "2")
    c = client(cfg.tracking_uri())
    c.set_model_version_tag(NAME, "1", DECISION, "abandoned")  # its training run died
    sets = [f"work_dir={cfg.work_dir}", f"tracking.uri={cfg.tracking_uri()}"]
    sets.append(f"registry.model_name={NAME}")
    done = child({"step": "promote", "kill": True, "sets": sets, "version": "1"}, tmp_path)
    assert done.returncode == -9, done.stderr[-3000:]
    store = RegistryStore(cfg)  # what the kill left: the alias moved, nothing else
    assert champion_version(cfg) == "1" and store.history() == ["2"]
    assert c.get_model_version(NAME, "1").tags[DECISION] == "abandoned"

    with caplog.at_level(logging.WARNING):
        back = rollback(cfg)  # the next command: it reconciles first
    tags = c.get_model_version(NAME, "1").tags
    assert tags[DECISION] == "promoted" and "reconciled" in tags["xmc.promotion.reason"]
    assert f"{NAME}@champion history: version 1 appended" in caplog.text
    assert back.version == "2" and back.previous == "1" and champion_version(cfg) == "2"
    assert store.history() == ["2"]  # 1, appended by the reconcile, then rolled back
    assert c.get_model_version(NAME, "2").tags[DECISION] == "promoted"  # the holder before
    for version in ("3", "4"):  # registered by this process, which is alive: left undecided
        assert DECISION not in c.get_model_version(NAME, version).tags, version


def test_reconcile_completes_the_alias_history(
    gate_template: Template, tmp_path: Path, quiet_mlflow: None
) -> None:
    cfg = fresh_registry(gate_template, tmp_path)
    promote_version(cfg, "2")
    client(cfg.tracking_uri()).set_registered_model_alias(NAME, ALIAS, "4")  # history not written
    notes = reconcile(cfg)
    assert RegistryStore(cfg).history() == ["2", "4"] and len(notes) == 2, notes
    assert reconcile(cfg) == []  # consistent now: nothing to repair


def test_two_processes_create_a_fresh_tracking_schema_once(
    tmp_path: Path, quiet_mlflow: None
) -> None:
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(2):
        db = tmp_path / f"fresh-{attempt}" / "mlflow.db"
        db.parent.mkdir()
        barrier, results = ctx.Barrier(2), ctx.Queue()
        args = (f"sqlite:///{db}", barrier, results)
        procs = [ctx.Process(target=hostile_registry_child.open_fresh_store, args=args)]
        procs.append(ctx.Process(target=hostile_registry_child.open_fresh_store, args=args))
        for p in procs:
            p.start()
        got = [results.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert [status for status, _ in got] == ["ok", "ok"], got
        assert got[0][1] == got[1][1]


def test_a_run_with_the_registry_off_closes_a_stuck_run(
    gate_models: dict[str, Path],
    gate_dataset: Path,
    run_files: dict,
    empty_store: Path,
    tmp_path: Path,
    quiet_mlflow: None,
) -> None:
    sets = [*registering_sets(tmp_path / "work", empty_store), "registry.enabled=false"]
    outputs = {"corpus": str(gate_dataset), "model": str(gate_models["good"])}
    args = {"step": "register", "kill": "logged", "sets": sets, "outputs": outputs, **run_files}
    done = child(args, tmp_path)
    assert done.returncode == -9, done.stderr[-3000:]
    c = client(XmcConfig.load(None, sets).tracking_uri())
    (stuck,) = c.search_runs([c.get_experiment_by_name("hostile").experiment_id])
    assert stuck.info.status == "RUNNING"

    nxt = register_here(sets, gate_models["worse"], gate_dataset, run_files)
    assert nxt["version"] is None and c.search_registered_models() == []
    stuck = c.get_run(stuck.info.run_id)
    assert (
        stuck.info.status == "KILLED"
        and "ended without closing it" in stuck.data.tags["xmc.reconciled"]
    )
