"""Observable serving over real HTTP and a real SQLite registry: ``/health`` names the served
model, ``/docs`` and ``/openapi.json`` document the API offline, and a moved ``@champion`` is
picked up by ``POST /reload`` and by the background check; a failed reload keeps the old model.

Registry versions: 1 the tiny model (``@champion`` at first), 2 a worse model (other
predictions), 3 the tiny model again with a corrupted file in the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
import pytest
from fastapi.testclient import TestClient

from tests.matrix_helpers import write_bomb_npz
from tests.model_helpers import reseal
from tests.serving.conftest import ALIAS, assert_same, in_process
from tests.serving.registry_fixtures import global_tracking
from tests.serving.test_http import free_port, wait_for_health
from xmc_core.app import commands
from xmc_core.config import XmcConfig
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving import live as live_module
from xmc_core.serving.http import create_app
from xmc_core.serving.live import LiveModel, ReloadError
from xmc_core.serving.registry.promotion import promote_version

ROOT = Path(__file__).resolve().parents[2]
NAME = "xmc-live"
TOKEN = "a-test-token-of-32-characters-xx"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WORSE = "tfidf.max_features=15"


@dataclass(frozen=True)
class LiveRegistry:
    """The registry template (copied per test), the run of each version, the worse model."""

    db: Path
    run_ids: dict[str, str]
    worse_dir: Path


@pytest.fixture(scope="module")
def worse_model_dir(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model of the tiny corpus with 15 TF-IDF terms: other predictions than the tiny one."""
    work = tmp_path_factory.mktemp("live-worse")
    sets = [f"work_dir={work}", "tree.branching=2", "tree.max_leaf_size=4"]
    commands.train(tiny_dataset, work / "model", XmcConfig.load(None, [*sets, WORSE]))
    return work / "model"


@pytest.fixture(scope="module")
def template(
    tiny_model_dir: Path,
    worse_model_dir: Path,
    empty_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> LiveRegistry:
    from xmc_core.serving.package import log_model

    root = tmp_path_factory.mktemp("live-registry")
    shutil.copyfile(empty_store, root / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cfg = XmcConfig.load(None, [f"work_dir={root}", f"tracking.uri={uri}"])
    run_ids = {}
    with global_tracking(uri):
        experiment = mlflow.create_experiment("live", artifact_location=str(root / "artifacts"))
        for version, folder in (
            ("1", tiny_model_dir),
            ("2", worse_model_dir),
            ("3", tiny_model_dir),
        ):
            with mlflow.start_run(experiment_id=experiment):
                info = log_model(folder, cfg, registered_model_name=NAME)
            assert str(info.registered_model_version) == version
            run_ids[version] = str(info.run_id)
        client = mlflow.MlflowClient()
        client.set_registered_model_alias(NAME, ALIAS, "1")
        stored = Path(client.get_model_version_download_uri(NAME, "3").removeprefix("file://"))
    (counts,) = stored.rglob("label_counts.npz")
    with counts.open("ab") as fh:
        fh.write(b"corrupt")  # version 3 now fails its checksum when downloaded
    return LiveRegistry(root / "mlflow.db", run_ids, worse_model_dir)


@pytest.fixture
def cfg(template: LiveRegistry, tmp_path: Path) -> XmcConfig:
    """A private copy of the registry (artifacts shared, read only), ``@champion`` on 1."""
    shutil.copyfile(template.db, tmp_path / "mlflow.db")
    sets = [
        f"work_dir={tmp_path / 'work'}",
        f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"registry.model_name={NAME}",
    ]
    return XmcConfig.load(None, sets)


def call(url: str, body: Any = None, headers: dict | None = None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of a GET (``body`` None) or a JSON POST."""
    data = None if body is None else json.dumps(body).encode()
    all_headers = {"content-type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=data, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw, kind = response.status, response.read(), response.headers["content-type"]
    except urllib.error.HTTPError as err:
        status, raw, kind = err.code, err.read(), err.headers["content-type"]
    return status, json.loads(raw) if kind == "application/json" else raw.decode()


@contextlib.contextmanager
def xmc_serve(cfg: XmcConfig, *sets: str, token: str | None = None) -> Iterator[Server]:
    """``xmc serve models:/NAME@champion`` in a subprocess; its output once it stopped."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "xmc_core.app.cli", "serve", f"models:/{NAME}@{ALIAS}",
        "--port", str(port), "--set", f"tracking.uri={cfg.tracking_uri()}",
        "--set", f"work_dir={cfg.work_dir}", *(a for s in sets for a in ("--set", s)),
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    env.pop("XMC_SERVE_TOKEN", None)
    if token is not None:
        env["XMC_SERVE_TOKEN"] = token
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    server = Server(f"http://127.0.0.1:{port}", [])
    try:
        wait_for_health(server.url, proc)
        yield server
    finally:
        proc.terminate()
        try:
            output, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        server.output.append(output)


@dataclass(frozen=True)
class Server:
    """A running server's base URL; ``output`` holds what it printed once it stopped."""

    url: str
    output: list[str]

    def health(self) -> dict[str, Any]:
        status, body = call(f"{self.url}/health")
        assert status == 200, body
        return body

    def predictions(self, texts: list[str], headers: dict | None = None) -> list[dict]:
        status, body = call(f"{self.url}/predict", {"texts": texts, "topk": 5}, headers)
        assert status == 200, body
        return body["predictions"]


def check_same(got: list[dict], want: list[list[tuple[str, float]]]) -> None:
    assert len(got) == len(want)
    for prediction, expected in zip(got, want, strict=True):
        assert_same(prediction["labels"], prediction["scores"], expected)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_health_docs_and_reload_after_xmc_promote(
    cfg: XmcConfig, template: LiveRegistry, tiny_model_dir: Path, sample_texts: list[str]
) -> None:
    tiny, worse = XmcModel.load(tiny_model_dir), XmcModel.load(template.worse_dir)
    assert in_process(tiny, sample_texts, topk=5) != in_process(worse, sample_texts, topk=5)
    with xmc_serve(cfg, token=TOKEN) as server:
        started = datetime.now(UTC)
        health = server.health()  # open without the token
        model = health["model"]
        assert model["uri"] == f"models:/{NAME}@{ALIAS}" and model["name"] == NAME
        assert (model["version"], model["alias"]) == ("1", ALIAS)
        assert model["run_id"] == template.run_ids["1"] and model["family"] == "xr_linear"
        assert model["n_labels"] == health["n_labels"] == len(tiny.labels)
        assert model["fingerprint"] == sha256(tiny_model_dir / "meta.json")
        assert Path(model["path"]).is_relative_to(Path(cfg.work_dir) / "mlflow" / "serving-cache")
        loaded_at = datetime.fromisoformat(model["loaded_at"])
        assert abs((started - loaded_at).total_seconds()) < 300
        assert health["kind"] == "xr_linear" and health["topk"] == tiny.ranker.predict_cfg.topk
        check_docs(server.url)
        for headers in (None, {"Authorization": "Bearer wrong-token-of-32-characters-x"}):
            assert call(f"{server.url}/reload", {}, headers)[0] == 401
            assert call(f"{server.url}/predict", {"texts": ["x"]}, headers)[0] == 401

        promoted = subprocess.run(
            [sys.executable, "-m", "xmc_core.app.cli", "promote", "2",
             "--set", f"tracking.uri={cfg.tracking_uri()}", "--set", f"work_dir={cfg.work_dir}",
             "--set", f"registry.model_name={NAME}"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert promoted.returncode == 0, promoted.stderr
        assert server.health()["model"]["version"] == "1"  # no background check (interval 0)
        status, body = call(f"{server.url}/reload", {}, AUTH)
        assert status == 200, body
        assert (body["status"], body["old"]["version"], body["new"]["version"]) == (
            "reloaded", "1", "2",
        )  # fmt: skip
        assert body["new"]["run_id"] == template.run_ids["2"]
        assert body["new"]["fingerprint"] == sha256(template.worse_dir / "meta.json")
        assert server.health()["model"] == body["new"]
        check_same(server.predictions(sample_texts, AUTH), in_process(worse, sample_texts, 5))
        status, again = call(f"{server.url}/reload", {}, AUTH)
        assert (status, again["status"], again["old"], again["new"]) == (
            200, "unchanged", body["new"], body["new"],
        )  # fmt: skip

        promote_version(cfg, "3")  # its stored files are corrupt
        status, failed = call(f"{server.url}/reload", {}, AUTH)
        assert status == 502, failed
        assert "damaged" in failed["detail"] and "still serving version 2" in failed["detail"]
        assert server.health()["model"] == body["new"]
        check_same(server.predictions(sample_texts, AUTH), in_process(worse, sample_texts, 5))
    output = server.output[0]
    assert "Traceback" not in output, output
    failures = [line for line in output.splitlines() if "failed, still serving" in line]
    assert len(failures) == 1 and "POST /reload of" in failures[0], output
    assert "now serving version 2 of" in output, output


def check_docs(url: str) -> None:
    """``/openapi.json`` and ``/docs`` open without the token; the page links nowhere."""
    status, schema = call(f"{url}/openapi.json")
    assert status == 200
    assert set(schema["paths"]) == {"/health", "/predict", "/reload"}
    predict = schema["paths"]["/predict"]["post"]
    body = predict["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"texts", "topk", "beam_size", "threshold"}
    assert body["required"] == ["texts"]
    answer = predict["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/PredictResponse"}
    assert {"400", "401", "413", "422", "500"} <= set(predict["responses"])
    assert predict["security"] == [{"bearer": []}]
    assert schema["paths"]["/reload"]["post"]["security"] == [{"bearer": []}]
    assert "security" not in schema["paths"]["/health"]["get"]
    health = schema["components"]["schemas"]["HealthResponse"]
    assert {"status", "model", "topk", "beam_size"} <= set(health["properties"])
    assert "loaded_at" in schema["components"]["schemas"]["ModelInfo"]["properties"]
    status, page = call(f"{url}/docs")
    assert status == 200 and page.startswith("<!doctype html>")
    for text in ("POST</span> <code>/predict", "GET</span> <code>/health", "/reload"):
        assert text in page
    assert f'curl -s {url}/predict -H "Authorization: Bearer $XMC_SERVE_TOKEN"' in page
    assert not re.search(r"<script|<link|<img|<iframe|src=|url\(|@import", page)
    assert re.findall(r'href="([^"]*)"', page) and all(  # anchors within the page only
        target.startswith("#") for target in re.findall(r'href="([^"]*)"', page)
    )
    outside = [u for u in re.findall(r"https?://[^\s\"'<&]+", page) if not u.startswith(url)]
    assert outside == []


def test_the_background_check_picks_up_a_moved_alias(
    cfg: XmcConfig, template: LiveRegistry, sample_texts: list[str]
) -> None:
    worse = XmcModel.load(template.worse_dir)
    with xmc_serve(cfg, "serve.reload_interval_s=0.5") as server:
        assert server.health()["model"]["version"] == "1"
        promote_version(cfg, "2")
        deadline = time.monotonic() + 60
        while server.health()["model"]["version"] != "2":
            assert time.monotonic() < deadline, "the new champion was not picked up in 60 s"
            time.sleep(0.2)
        check_same(server.predictions(sample_texts), in_process(worse, sample_texts, 5))
        promote_version(cfg, "3")  # corrupt: every check fails and keeps version 2
        time.sleep(3)
        assert server.health()["model"]["version"] == "2"
        check_same(server.predictions(sample_texts), in_process(worse, sample_texts, 5))
    output = server.output[0]
    assert "checks for a new version every 0.5 s" in output, output
    assert "background check: now serving version 2 of" in output, output
    failures = [line for line in output.splitlines() if "failed, still serving" in line]
    assert len(failures) == 1 and "background check of" in failures[0], output  # not repeated
    assert "Traceback" not in output, output


def test_a_folder_reloads_when_its_files_change(
    tiny_model_dir: Path, worse_model_dir: Path, sample_texts: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    live = LiveModel.open(folder, XmcConfig.load(None, [f"work_dir={tmp_path}"]))
    client = TestClient(create_app(live))
    model = client.get("/health").json()["model"]
    assert model["path"] == str(folder) and model["family"] == "xr_linear"
    assert [model[k] for k in ("uri", "name", "version", "alias", "run_id")] == [None] * 5
    assert model["fingerprint"] == sha256(tiny_model_dir / "meta.json")
    unchanged = client.post("/reload").json()
    assert unchanged["status"] == "unchanged" and unchanged["new"] == model

    shutil.rmtree(folder)
    shutil.copytree(worse_model_dir, folder)
    reloaded = client.post("/reload").json()
    assert reloaded["status"] == "reloaded" and reloaded["old"] == model
    assert reloaded["new"]["fingerprint"] == sha256(worse_model_dir / "meta.json")
    worse = XmcModel.load(worse_model_dir)
    response = client.post("/predict", json={"texts": sample_texts, "topk": 5})
    check_same(response.json()["predictions"], in_process(worse, sample_texts, 5))

    shutil.rmtree(folder)
    shutil.copytree(tiny_model_dir, folder)
    with (folder / "label_counts.npz").open("ab") as fh:
        fh.write(b"corrupt")
    failed = client.post("/reload")
    assert failed.status_code == 502 and "checksum mismatch" in failed.json()["detail"]
    assert client.get("/health").json()["model"] == reloaded["new"]


def test_a_model_refused_at_load_is_remembered_not_read_again(
    tiny_model_dir: Path, worse_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new model whose ``label_counts.npz`` is a deflate bomb with correct checksums (64 MiB
    of zeros in 66 KB): refused from its zip header, not inflated, and not read again by the
    background check (nor by ``POST /reload``) until the reference names another model."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    live = LiveModel.open(folder, XmcConfig.load(None, [f"work_dir={tmp_path}"]))
    served = live.current
    write_bomb_npz(folder / "label_counts.npz", "counts", "<i8", 8 * 2**20)
    reseal(folder, folder / "label_counts.npz")
    loads: list[Path] = []
    load = live_module._load
    monkeypatch.setattr(live_module, "_load", lambda *a: loads.append(a[2]) or load(*a))
    refused = (
        f"{folder / 'label_counts.npz'}: member 'counts' is compressed (67.1 MB once inflated); "
        "xmc stores its arrays uncompressed, so this file was not written by xmc"
    )
    for trigger in ("background check", "background check", "POST /reload"):
        with pytest.raises(ReloadError) as err:
            live.reload(trigger)
        assert err.value.status == 502 and refused in str(err.value), str(err.value)
        assert str(err.value).endswith("still serving the model loaded at " + served.info.loaded_at)
    assert len(loads) == 1 and live.current is served
    assert "(refused when first loaded, not read again)" in str(err.value)

    shutil.rmtree(folder)
    shutil.copytree(worse_model_dir, folder)  # the reference now names another model
    assert live.reload("background check").reloaded and len(loads) == 2


def test_a_model_given_as_an_object_cannot_be_reloaded(tiny_model: XmcModel) -> None:
    response = TestClient(create_app(tiny_model)).post("/reload")
    assert response.status_code == 409
    assert response.json() == {"detail": "this server was given a loaded model, not a reference"}
