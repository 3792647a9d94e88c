"""Gated promotion, manual promotion, rollback and their concurrency, on a SQLite registry (the
raw-text evaluation the gate compares versions with: ``registry/test_raw_text_evaluation.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlflow
import pyarrow.parquet as pq
import pytest

from tests.serving.registry_fixtures import (
    ALIAS,
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
from xmc_core.errors import InputError, XmcError
from xmc_core.serving.registry import gate as evaluation
from xmc_core.serving.registry import promotion as registry
from xmc_core.serving.registry.gate import (
    evaluate_on_dataset,
)
from xmc_core.serving.registry.promotion import (
    champion_version,
    format_decision,
    promote_gated,
    promote_version,
    rollback,
)
from xmc_core.serving.registry.store import RegistryStore

__all__ = ["gate_dataset", "gate_models", "gate_template"]  # fixtures used by name
ROOT = Path(__file__).resolve().parents[2]
P = "xmc.promotion."


@pytest.fixture
def cfg(gate_template: Template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> XmcConfig:
    """A private registry; no global or environment tracking URI; cwd in tmp (stray stores
    would land there and fail :func:`no_stray_store`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    return fresh_registry(gate_template, tmp_path)


def client(cfg: XmcConfig) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(tracking_uri=cfg.tracking_uri(), registry_uri=cfg.tracking_uri())


def tags(cfg: XmcConfig, version: str) -> dict[str, str]:
    return client(cfg).get_model_version(NAME, version).tags


def holders(cfg: XmcConfig) -> list[str]:
    """Every version that carries the alias (must be exactly one once promoted)."""
    c = client(cfg)
    found = [c.get_model_version(NAME, str(v)) for v in range(1, 5)]
    holding = sorted(str(v.version) for v in found if ALIAS in v.aliases)
    held = c.get_registered_model(NAME).aliases.get(ALIAS)
    assert (None if held is None else str(held)) in (holding or [None])
    return holding


def no_stray_store(cwd: Path) -> None:
    assert not (cwd / "mlflow.db").exists() and not (cwd / "mlruns").exists()


# ---- gated promotion ---------------------------------------------------------------------


def test_gate_first_better_worse(
    cfg: XmcConfig, gate_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated: list[Path] = []

    def counting(model_dir: Path, *args: object) -> dict[str, float]:
        evaluated.append(model_dir)
        return evaluate_on_dataset(model_dir, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluation, "evaluate_on_dataset", counting)
    first = promote_gated(cfg, "1", gate_dataset)
    assert first.promoted and first.reason == "no champion" and first.previous is None
    assert champion_version(cfg) == "1"
    better = promote_gated(cfg, "2", gate_dataset)
    assert better.promoted and better.previous == "1"
    assert better.new_value > better.champion_value + cfg.registry.margin
    assert holders(cfg) == ["2"]
    worse = promote_gated(cfg, "3", gate_dataset)
    assert not worse.promoted and worse.previous == "2" and champion_version(cfg) == "2"
    assert worse.new_value == pytest.approx(first.new_value)
    assert worse.champion_value == pytest.approx(better.new_value)
    assert len(evaluated) == 3  # the champion's figures came from its cached tag
    t = tags(cfg, "3")
    assert t[P + "decision"] == "rejected" and t[P + "champion_version"] == "2"
    assert float(t[P + "new"]) == pytest.approx(worse.new_value)
    assert float(t[P + "champion"]) == pytest.approx(better.new_value)
    assert t[P + "metric"] == "P@1" and float(t[P + "margin"]) == cfg.registry.margin
    assert "< margin" in t[P + "reason"] and t[P + "at"] == worse.at
    assert tags(cfg, "2")[P + "decision"] == "promoted"
    cached = tags(cfg, "2")
    assert "xmc.eval.test" not in cached  # the figures are an artifact, not a big JSON tag
    path = cached["xmc.eval_file.test"]
    assert path.startswith("xmc-eval/version-2/test-") and path.endswith(".json")
    run_id = client(cfg).get_model_version(NAME, "2").run_id
    local = client(cfg).download_artifacts(run_id, path, str(tmp_path))
    entry = json.loads(Path(local).read_text())
    assert entry["version"] == "2" and entry["metrics"]["P@1"] == pytest.approx(better.new_value)
    text = format_decision(worse)
    assert "version 3 not promoted" in text and f"{100 * worse.new_value:.2f}%" in text
    assert f"{100 * worse.champion_value:.2f}%" in text
    no_stray_store(tmp_path)


def test_figures_cached_in_an_old_tag_are_still_used(
    cfg: XmcConfig, gate_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry written before the figures moved to artifacts: the JSON tag is the cache."""
    promote_version(cfg, "2")
    key = registry._eval_key(cfg, gate_dataset)
    old = json.dumps({"key": key, "metrics": {"P@1": 0.25, "P@3": 0.2}})
    client(cfg).set_model_version_tag(NAME, "2", "xmc.eval.test", old)
    evaluated: list[Path] = []

    def counting(model_dir: Path, *args: object) -> dict[str, float]:
        evaluated.append(model_dir)
        return evaluate_on_dataset(model_dir, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluation, "evaluate_on_dataset", counting)
    decision = promote_gated(cfg, "4", gate_dataset)  # 4 is as good as 2: beats 25 % by far
    assert len(evaluated) == 1  # only version 4; version 2's figures came from its old tag
    assert decision.promoted and decision.champion_value == 0.25 and decision.previous == "2"
    assert "xmc.eval_file.test" in tags(cfg, "4") and "xmc.eval.test" in tags(cfg, "2")
    assert registry.version_metrics(cfg, "2", gate_dataset) == {"P@1": 0.25, "P@3": 0.2}
    store = RegistryStore(cfg)
    store.cache_metrics("2", "test", key, {"P@1": 0.5})  # caching again drops the old tag
    assert "xmc.eval.test" not in tags(cfg, "2")
    assert store.cached_metrics("2", "test", key) == {"P@1": 0.5}


def test_margin_is_respected(cfg: XmcConfig, gate_dataset: Path, tmp_path: Path) -> None:
    promote_version(cfg, "2")
    same = promote_gated(cfg, "4", gate_dataset)  # same model as 2: zero gain
    assert not same.promoted and same.new_value == pytest.approx(same.champion_value)
    assert champion_version(cfg) == "2"
    no_margin = registry_config(tmp_path, "registry.margin=0")
    tie = promote_gated(no_margin, "4", gate_dataset)
    assert tie.promoted and champion_version(cfg) == "4" and holders(cfg) == ["4"]
    again = promote_gated(no_margin, "4", gate_dataset)
    assert not again.promoted and "already holds" in again.reason


def test_gate_refuses_another_lineage_without_comparing(
    cfg: XmcConfig, gate_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated: list[Path] = []
    monkeypatch.setattr(evaluation, "evaluate_on_dataset", lambda *a: evaluated.append(a[0]))
    promote_version(cfg, "2")
    reuters = {"name": "reuters", "root": "ab" * 32, "drops": "0"}  # version 1: other data
    for key, value in reuters.items():
        client(cfg).set_model_version_tag(NAME, "1", f"xmc.lineage.{key}", value)
    refused = promote_gated(cfg, "1", gate_dataset)
    assert refused.refused and not refused.promoted and refused.previous == "2"
    assert refused.new_value is None and evaluated == [] and champion_version(cfg) == "2"
    ours = describe(lineage_of(gate_dataset))
    assert refused.reason == (
        f"trained on reuters (from abababababab), the champion (version 2) on {ours}: "
        "other labels, not compared"
    )
    assert refused.fix.endswith(f"anyway: xmc promote 1 --set registry.model_name={NAME}")
    t = tags(cfg, "1")
    assert t[P + "decision"] == "refused" and t[P + "fix"] == refused.fix
    assert "xmc.eval_file.test" not in t  # never evaluated
    assert format_decision(refused).splitlines() == [
        f"version 1 refused; {NAME}@champion stays at version 2",
        f"  {refused.reason}",
        f"  fix: {refused.fix}",
    ]
    for key in reuters:  # a champion registered before xmc recorded lineages: no guess
        client(cfg).delete_model_version_tag(NAME, "2", f"xmc.lineage.{key}")
    old = promote_gated(cfg, "4", gate_dataset)
    assert old.refused and old.reason.startswith("the champion (version 2) has no lineage")
    assert champion_version(cfg) == "2" and evaluated == []


def test_manual_promotion_and_rollback(cfg: XmcConfig) -> None:
    with pytest.raises(XmcError, match="nothing to roll back"):
        rollback(cfg)
    first = promote_version(cfg, "3")
    assert first.kind == "manual" and first.promoted and first.previous is None
    second = promote_version(cfg, "1")
    assert second.previous == "3" and tags(cfg, "1")[P + "kind"] == "manual"
    back = rollback(cfg)
    assert back.kind == "rollback" and back.version == "3" and back.previous == "1"
    assert champion_version(cfg) == "3" and holders(cfg) == ["3"]
    assert tags(cfg, "3")["xmc.rollback.from"] == "1"
    assert "rolled xmc-gate@champion back to version 3" in format_decision(back)
    with pytest.raises(XmcError, match="no previous holder"):
        rollback(cfg)
    with pytest.raises(InputError, match=r"no version 99 \(its versions: 1, 2, 3, 4\)"):
        promote_version(cfg, "99")
    with pytest.raises(InputError, match="not a version number"):
        promote_version(cfg, "latest")


# ---- concurrency ---------------------------------------------------------------------------


def assert_better_won(cfg: XmcConfig) -> None:
    """Exactly one holder, the better version 2; the worse version 3 says why it lost."""
    assert holders(cfg) == ["2"] and champion_version(cfg) == "2"
    t = tags(cfg, "3")
    assert t[P + "decision"] == "rejected" and "< margin" in t[P + "reason"]
    assert float(t[P + "new"]) < float(t[P + "champion"]) + cfg.registry.margin


def test_concurrent_promotions_in_threads(cfg: XmcConfig, gate_dataset: Path) -> None:
    promote_version(cfg, "1")
    start = threading.Barrier(2)
    results: dict[str, object] = {}

    def run(version: str) -> None:
        start.wait()
        try:
            results[version] = promote_gated(cfg, version, gate_dataset)
        except Exception as err:  # reported below
            results[version] = err

    threads = [threading.Thread(target=run, args=(v,)) for v in ("3", "2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(isinstance(r, registry.Decision) for r in results.values()), results
    assert_better_won(cfg)


def test_concurrent_promotions_in_processes(
    cfg: XmcConfig, gate_dataset: Path, tmp_path: Path
) -> None:
    """Another process promotes version 3 while this one promotes version 2 (both start once
    the other process has imported everything)."""
    promote_version(cfg, "1")
    script = (
        "import sys, time; from pathlib import Path; from xmc_core.config import XmcConfig;"
        "from xmc_core.serving.registry.promotion import promote_gated, format_decision;"
        "import xmc_core.serving.registry.gate, mlflow;"
        "cfg = XmcConfig.load(None, sys.argv[3:]); Path('ready').touch();"
        "[time.sleep(0.01) for _ in range(6000) if not Path('go').exists()];"
        "print(format_decision(promote_gated(cfg, sys.argv[1], Path(sys.argv[2]))))"
    )
    sets = [f"work_dir={cfg.work_dir}", f"tracking.uri={cfg.tracking_uri()}"]
    sets.append(f"registry.model_name={NAME}")
    other = subprocess.Popen(
        [sys.executable, "-c", script, "3", str(gate_dataset), *sets],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    for _ in range(1200):
        if (tmp_path / "ready").exists() or other.poll() is not None:
            break
        time.sleep(0.1)
    (tmp_path / "go").touch()
    mine = promote_gated(cfg, "2", gate_dataset)
    out, err = other.communicate(timeout=180)
    assert other.returncode == 0, err
    assert mine.promoted and "version 3 not promoted" in out
    assert_better_won(cfg)
    no_stray_store(tmp_path)


# ---- CLI and Prefect task ----------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_cli_promote_and_rollback(cfg: XmcConfig, tmp_path: Path) -> None:
    sets = ["--set", f"work_dir={cfg.work_dir}", "--set", f"tracking.uri={cfg.tracking_uri()}"]
    sets += ["--set", f"registry.model_name={NAME}"]

    def xmc(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "xmc_core.app.cli", *args, *sets]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env())

    promote_version(cfg, "1")
    out = xmc("promote", "2")
    assert out.returncode == 0, out.stderr
    assert "promoted version 2 to xmc-gate@champion by hand (was version 1)" in out.stdout
    back = xmc("rollback")
    assert back.returncode == 0, back.stderr
    assert "rolled xmc-gate@champion back to version 1 (was version 2)" in back.stdout
    assert champion_version(cfg) == "1"
    bad = xmc("promote", "99")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "has no version 99 (its versions: 1, 2, 3, 4)" in bad.stderr and "fix:" in bad.stderr


def test_lifecycle_gate(cfg: XmcConfig, gate_dataset: Path, tmp_path: Path) -> None:
    from xmc_core.lifecycle.stages import promote_candidate

    off = registry_config(tmp_path, "registry.promote=false")
    skipped = promote_candidate(off, "2", str(gate_dataset))
    assert skipped["promoted"] is False and champion_version(cfg) is None
    done = promote_candidate(cfg, "2", str(gate_dataset))
    assert done["promoted"] is True and done["kind"] == "gated" and done["version"] == "2"
    assert champion_version(cfg) == "2"


def test_registering_prints_only_what_is_not_a_routine_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """MLflow prints each registration's notices to stderr (the caller logs one line instead);
    anything else it writes meanwhile passes."""
    from mlflow.utils.logging_utils import eprint

    from xmc_core.serving.package import _without_registration_notices

    with _without_registration_notices():
        eprint("Successfully registered model 'xmc'.")
        eprint("Registered model 'xmc' already exists. Creating a new version of this model...")
        eprint("Created version '2' of model 'xmc'.")
        eprint("WARNING: something else")
    assert capsys.readouterr().err == "WARNING: something else\n"


def test_cached_figures_follow_the_evaluated_split_not_the_training_split(
    cfg: XmcConfig, gate_dataset: Path, tmp_path: Path
) -> None:
    """A retrain's corpus grows its training split: the champion's figures on the unchanged
    test split stay valid (their key is the same); a changed test split changes it."""
    grown = tmp_path / "grown"
    shutil.copytree(gate_dataset, grown)
    train = pq.read_table(grown / "train.parquet")
    pq.write_table(train.slice(0, train.num_rows // 2), grown / "train.parquet")
    assert Corpus(grown).split_fingerprint("train") != Corpus(gate_dataset).split_fingerprint(
        "train"
    )
    assert registry._eval_key(cfg, grown) == registry._eval_key(cfg, gate_dataset)
    test = pq.read_table(grown / "test.parquet")
    pq.write_table(test.slice(1), grown / "test.parquet")
    assert registry._eval_key(cfg, grown)["split"] != registry._eval_key(cfg, gate_dataset)["split"]
