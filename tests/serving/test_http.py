"""The HTTP server: predictions equal the model's own, every bad request gets a 4xx JSON error
and the server keeps answering; and ``xmc serve models:/NAME@champion`` over real HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.serving.conftest import ALIAS, MODEL_NAME, Registry, assert_same, in_process
from xmc_core.config import ServeConfig
from xmc_core.errors import InputError, XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.guard import TOKEN_ENV, check_exposure, is_loopback, read_token
from xmc_core.serving.http import create_app
from xmc_core.serving.limits import Limits

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits.from_config(
    ServeConfig(), max_texts=30, max_body_bytes=20_000, max_topk=50, max_beam_size=50
)


@pytest.fixture(scope="module")
def client(tiny_model: XmcModel) -> TestClient:
    return TestClient(create_app(tiny_model, limits=LIMITS))


def check_predictions(body: dict[str, Any], want: list[list[tuple[str, float]]]) -> None:
    assert len(body["predictions"]) == len(want)
    for got, expected in zip(body["predictions"], want, strict=True):
        assert_same(got["labels"], got["scores"], expected)


def test_health(client: TestClient, tiny_model: XmcModel) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["kind"] == "xr_linear"
    assert body["n_labels"] == len(tiny_model.labels)
    assert body["topk"] == tiny_model.ranker.predict_cfg.topk


def test_predictions_equal_the_model(
    client: TestClient, tiny_model: XmcModel, sample_texts: list[str]
) -> None:
    response = client.post("/predict", json={"texts": sample_texts})
    assert response.status_code == 200, response.text
    check_predictions(response.json(), in_process(tiny_model, sample_texts))
    response = client.post("/predict", json={"texts": sample_texts, "topk": 2, "beam_size": 1})
    check_predictions(response.json(), in_process(tiny_model, sample_texts, topk=2, beam=1))


@pytest.mark.parametrize(
    "body",
    [
        {"dataframe_records": [{"text": "T0"}, {"text": "T1"}], "params": {"topk": 3}},
        {"dataframe_split": {"columns": ["text"], "data": [["T0"], ["T1"]]}, "params": {"topk": 3}},
        {"inputs": ["T0", "T1"], "params": {"topk": 3}},
        {"inputs": {"text": ["T0", "T1"]}, "params": {"topk": 3}},
    ],
)
def test_mlflow_style_bodies(
    client: TestClient, tiny_model: XmcModel, sample_texts: list[str], body: dict
) -> None:
    texts = sample_texts[:2]
    raw = (
        json.dumps(body).replace('"T0"', json.dumps(texts[0])).replace('"T1"', json.dumps(texts[1]))
    )
    response = client.post("/predict", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    check_predictions(response.json(), in_process(tiny_model, texts, topk=3))


BAD_REQUESTS = [
    (b"{not json", 400, "not valid JSON"),
    (b"\xff\xfe", 400, "not valid JSON"),
    (b'["a list"]', 422, "JSON object"),
    (b"{}", 422, "texts"),
    (b'{"texts": "one string"}', 422, "texts"),
    (b'{"texts": ["ok", 3]}', 422, "texts.1"),
    (b'{"texts": ["ok"], "topk": "5"}', 422, "topk"),
    (b'{"texts": ["ok"], "topk": 0}', 422, "topk"),
    (b'{"texts": ["ok"], "beam_size": true}', 422, "beam_size"),
    (b'{"texts": ["ok"], "topk": 51}', 422, "topk=51 exceeds the limit of 50"),
    (b'{"texts": ["ok"], "colour": "red"}', 422, "colour"),
    (b'{"texts": ["ok"], "threshold": 1.5}', 422, "threshold"),
    (b'{"texts": ["ok"], "threshold": 0.5}', 422, "the served model is uncalibrated"),
    (b'{"texts": []}', 422, "at least one text"),
    (b'{"texts": ["ok", "  "]}', 422, "texts[1] is empty"),
    (b'{"texts": ["ok", ""]}', 422, "texts[1] is empty"),
    (b'{"dataframe_records": [{"body": "x"}]}', 422, '"text" field'),
    (json.dumps({"texts": ["doc"] * 31}).encode(), 413, "31 texts exceed the limit of 30"),
    (json.dumps({"texts": ["x" * 20_001]}).encode(), 413, "exceeds the limit of 20000"),
]


def test_bad_requests_get_4xx_json_errors_and_the_server_keeps_serving(
    client: TestClient, tiny_model: XmcModel, sample_texts: list[str]
) -> None:
    for body, status, message in BAD_REQUESTS:
        response = client.post("/predict", content=body)
        assert response.status_code == status, (body[:60], response.text)
        assert message in response.json()["detail"], (body[:60], response.text)
    chunked = client.post("/predict", content=iter([b'{"texts": ["', b"x" * 25_000, b'"]}']))
    assert chunked.status_code == 413 and "exceeds the limit" in chunked.json()["detail"]
    assert client.get("/predict").status_code == 405
    assert client.get("/health").json()["status"] == "ok"
    response = client.post("/predict", json={"texts": sample_texts[:3]})
    check_predictions(response.json(), in_process(tiny_model, sample_texts[:3]))


def test_server_defaults_override_the_model(tiny_model: XmcModel, sample_texts: list[str]) -> None:
    client = TestClient(create_app(tiny_model, topk=2, beam_size=1))
    assert client.get("/health").json()["topk"] == 2
    response = client.post("/predict", json={"texts": sample_texts[:4]})
    check_predictions(response.json(), in_process(tiny_model, sample_texts[:4], topk=2, beam=1))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_json(url: str, body: dict | None = None, timeout: float = 30.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def wait_for_health(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {proc.stdout.read()}")
        try:
            return http_json(f"{url}/health", timeout=2.0)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise AssertionError(f"no answer from {url}/health within {timeout} s")


def test_xmc_serve_answers_over_real_http(
    registry: Registry, tiny_model: XmcModel, sample_texts: list[str]
) -> None:
    port = free_port()
    cmd = [
        sys.executable, "-m", "xmc_core.app.cli", "serve", f"models:/{MODEL_NAME}@{ALIAS}",
        "--port", str(port), "--set", f"tracking.uri={registry.uri}",
        "--set", f"work_dir={registry.cfg.work_dir}",
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_health(url, proc)["n_labels"] == len(tiny_model.labels)
        body = http_json(f"{url}/predict", {"texts": sample_texts, "topk": 5})
        check_predictions(body, in_process(tiny_model, sample_texts, topk=5))
        with pytest.raises(urllib.error.HTTPError) as err:
            http_json(f"{url}/predict", {"texts": [""]})
        assert err.value.code == 422
        assert http_json(f"{url}/health")["status"] == "ok"
    finally:
        proc.terminate()
        try:
            output, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    assert f"at http://127.0.0.1:{port}" in output, output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False),
     ("example.org", False)],
)  # fmt: skip
def test_only_loopback_hosts_count_as_private(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    if loopback:
        check_exposure(host, None, insecure_public=False)
    else:
        with pytest.raises(XmcError, match="--insecure-public"):
            check_exposure(host, None, insecure_public=False)
        check_exposure(host, "a-token-of-16-chars", insecure_public=False)
        check_exposure(host, None, insecure_public=True)


def test_the_token_comes_from_the_file_first_then_the_environment(tmp_path: Path) -> None:
    env = {TOKEN_ENV: "  from-the-environment-123 \n"}
    assert read_token(None, {}) is None
    assert read_token(None, env) == "from-the-environment-123"
    path = tmp_path / "token"
    path.write_text("from-the-file-4567890\n")
    path.chmod(0o640)
    assert read_token(path, env) == "from-the-file-4567890"
    path.chmod(0o604)
    with pytest.raises(InputError, match="chmod 600"):
        read_token(path, env)
    with pytest.raises(InputError, match="cannot read the token file"):
        read_token(tmp_path / "absent", env)
    for bad in ("", "short", "has a space in it!!", "control\x07chars-123456"):
        with pytest.raises(InputError, match="token"):
            read_token(None, {TOKEN_ENV: bad})


def test_request_defaults_out_of_range_are_refused_when_the_app_is_built(
    tiny_model: XmcModel,
) -> None:
    for topk, beam in ((0, None), (-3, None), (None, 0), (51, None), (None, 10**9)):
        with pytest.raises(XmcError, match="out of range"):
            create_app(tiny_model, topk, beam, LIMITS)
    for bad in ({"header_timeout_s": 0}, {"body_timeout_s": -1}, {"max_connections": 0}):
        with pytest.raises(XmcError, match="out of range"):
            create_app(tiny_model, limits=Limits.from_config(ServeConfig(), **bad))
