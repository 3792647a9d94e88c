"""Hostile clients of ``xmc serve``: payloads that used to answer 500 with a traceback get a
4xx naming the problem, absurd start-up options are refused before binding, and on a real
server (127.0.0.1, short timeouts) slow or idle connections are cut off, connections over the
limit get 503, and requests without the bearer token get 401 -- while valid clients are served
answers equal to the model's own."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.integration.servers import free_port
from tests.serving.conftest import (  # noqa: F401 (fixtures)
    in_process,
    sample_texts,
    tiny_dataset,
    tiny_model,
    tiny_model_dir,
)
from xmc_core.config import ServeConfig
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.http import build_server, create_app
from xmc_core.serving.limits import Limits

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
SUITE = "hostile-serving"
TOKEN = "t0k3n-for-the-hostile-serving-suite"
FAST = Limits.from_config(
    ServeConfig(), header_timeout_s=1.0, body_timeout_s=1.0, max_connections=4
)
DEEP = b'{"texts": ' + b"[" * 3000 + b"]" * 3000 + b"}"

HOSTILE = [
    ("nested 3000 deep", DEEP, 400, "nested too deeply"),
    ("top level nested", b"[" * 3000 + b"]" * 3000, 400, "nested too deeply"),
    ("5000-digit topk", b'{"texts": ["ok"], "topk": ' + b"7" * 5000 + b"}", 400, "digits"),
    ("5000-digit text", b'{"texts": [' + b"9" * 5000 + b"]}", 400, "digits"),
    ("lone surrogate", b'{"texts": ["\\ud800"]}', 422, "texts[0]"),
    ("surrogate late", b'{"texts": ["ok", "a\\udfffb"]}', 422, "texts[1]"),
    ("surrogate key", b'{"texts": ["ok"], "\\ud800": 1}', 422, "ud800"),
    ("split columns number", b'{"dataframe_split": {"columns": 5, "data": [["x"]]}}', 422,
     "columns"),
    ("split columns object", b'{"dataframe_split": {"columns": {"text": 0}, "data": [["x"]]}}',
     422, "columns"),
    ("split columns string", b'{"dataframe_split": {"columns": "text", "data": [["x"]]}}', 422,
     "columns"),
    ("split data rows", b'{"dataframe_split": {"columns": ["text"], "data": [5]}}', 422, "data"),
    ("params override texts", b'{"inputs": ["ok"], "params": {"texts": 3}}', 422, "params"),
    ("records not objects", b'{"dataframe_records": [5]}', 422, "dataframe_records"),
    ("topk infinite", b'{"texts": ["ok"], "topk": 1e999}', 422, "topk"),
    ("topk NaN", b'{"texts": ["ok"], "topk": NaN}', 422, "topk"),
]  # fmt: skip


@pytest.fixture(scope="module")
def client(tiny_model: XmcModel) -> TestClient:  # noqa: F811
    return TestClient(create_app(tiny_model), raise_server_exceptions=False)


@pytest.mark.parametrize(("body", "status", "message"), [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])  # fmt: skip
def test_hostile_payload_gets_4xx_with_a_message(
    client: TestClient,
    tiny_model: XmcModel,  # noqa: F811
    sample_texts: list[str],  # noqa: F811
    suite_stats,
    body: bytes,
    status: int,
    message: str,
) -> None:
    response = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text[:300]
    detail = response.json()["detail"]
    assert message in detail and "Traceback" not in detail, detail
    ok = client.post("/predict", json={"texts": sample_texts[:2]})
    assert ok.status_code == 200
    want = in_process(tiny_model, sample_texts[:2])
    assert [p["labels"] for p in ok.json()["predictions"]] == [[n for n, _ in w] for w in want]
    suite_stats.add(SUITE, inputs=1)


class Exploding:
    """A model whose predictions fail in an unforeseen way."""

    def __init__(self, model: XmcModel) -> None:
        self.labels, self.family, self.ranker = model.labels, model.family, model.ranker
        self.calibrator, self.cut = model.calibrator, model.cut  # a request's threshold

    def predict(self, *_args: object) -> None:
        raise RuntimeError("the disk went away\nsecond line")


def test_an_unforeseen_failure_answers_500_json_and_logs_one_line(
    tiny_model: XmcModel,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = TestClient(create_app(Exploding(tiny_model)), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="xmc_core.serving.http"):
        response = client.post("/predict", json={"texts": ["a text"]})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert "Traceback" not in response.text and "disk went away" not in response.text
    assert "see the server log" in response.json()["detail"]
    records = [r for r in caplog.records if r.name == "xmc_core.serving.http"]
    assert len(records) == 1 and records[0].exc_info is None
    assert "RuntimeError: the disk went away" in records[0].getMessage()
    assert "\n" not in records[0].getMessage()
    assert client.get("/health").json()["status"] == "ok"


# ------------------------------------------------------------ start-up refusals (subprocess)
def xmc_serve(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "xmc_core.app.cli", "serve", *args]
    full_env = {k: v for k, v in os.environ.items() if k != "XMC_SERVE_TOKEN"} | (env or {})
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60)


def world_readable_token(tmp: Path) -> Path:
    path = tmp / "token-644"
    path.write_text(TOKEN + "\n")
    path.chmod(0o644)
    return path


def empty_token(tmp: Path) -> Path:
    path = tmp / "token-empty"
    path.write_text("\n")
    path.chmod(0o600)
    return path


def fifo_token(tmp: Path) -> Path:
    path = tmp / "token-fifo"  # reading it would wait for a writer: start-up hung
    os.mkfifo(path, 0o600)
    return path


STARTUP = [
    ("topk negative", ["--topk", "-3"], None, "topk=-3"),
    ("topk zero", ["--topk", "0"], None, "topk=0"),
    ("beam absurd", ["--beam-size", "1000000000"], None, "beam_size=1000000000"),
    ("port absurd", ["--port", "70000"], None, "port 70000"),
    ("no header timeout", ["--header-timeout", "0"], None, "header timeout of 0.0 s"),
    ("no connections", ["--max-connections", "0"], None, "max_connections=0"),
    ("public without token", ["--host", "0.0.0.0"], None, "--insecure-public"),
    ("public, token world-readable", ["--host", "0.0.0.0"], world_readable_token, "chmod 600"),
    ("empty token file", [], empty_token, "empty"),
    ("token file a FIFO", [], fifo_token, "token file is a FIFO (named pipe), not a regular file"),
    ("short token", [], None, "at least 16"),
]


@pytest.mark.parametrize(("args", "token_file", "message"), [s[1:] for s in STARTUP],
                         ids=[s[0] for s in STARTUP])  # fmt: skip
def test_absurd_start_up_is_refused_before_binding(
    tiny_model_dir: Path,  # noqa: F811
    tmp_path: Path,
    args: list[str],
    token_file,
    message: str,
) -> None:
    extra = ["--token-file", str(token_file(tmp_path))] if token_file else []
    env = {"XMC_SERVE_TOKEN": "short"} if message == "at least 16" else None
    port = [] if "--port" in args else ["--port", str(free_port())]
    done = xmc_serve([str(tiny_model_dir), *args, *extra, *port], env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error:" in done.stderr and message in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Uvicorn running" not in done.stderr


# ------------------------------------------------------------ a real server on 127.0.0.1
@contextmanager
def running(app, limits: Limits = FAST) -> Iterator[int]:
    """``app`` served by the project's uvicorn set-up in a thread; yields the port."""
    port = free_port()
    server = build_server(app, "127.0.0.1", port, limits)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)


def request(port: int, method: str, path: str, body: bytes = b"", headers: str = "") -> tuple:
    """One request on a fresh connection: (status, JSON body or text)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{headers}"
        sock.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
        data = read_all(sock)
    status = int(data.split(b" ", 2)[1])
    payload = data.split(b"\r\n\r\n", 1)[1]
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode("latin-1")


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (a reset counts as a close)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def predict_body(texts: list[str]) -> bytes:
    return json.dumps({"texts": texts}).encode()


def answers_equal(port: int, model: XmcModel, texts: list[str], headers: str = "") -> bool:
    status, body = request(port, "POST", "/predict", predict_body(texts), headers)
    want = in_process(model, texts)
    return status == 200 and [p["labels"] for p in body["predictions"]] == [
        [n for n, _ in w] for w in want
    ]


def trickle(sock: socket.socket, data: bytes, every_s: float, stop: threading.Event) -> None:
    """Send ``data`` one byte every ``every_s`` until sent, stopped, or the server cuts us."""
    for i in range(len(data)):
        if stop.wait(every_s):
            return
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return


SLOW = {
    "headers byte by byte": (b"", b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n"),
    "body byte by byte": (
        b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n",
        b'{"texts": ["a slow text, one byte at a time"]}',
    ),
    "idle after connecting": (b"", b""),
}


@pytest.mark.parametrize("kind", list(SLOW))
def test_slow_clients_are_cut_off_and_valid_ones_are_served(
    tiny_model: XmcModel,  # noqa: F811
    sample_texts: list[str],  # noqa: F811
    suite_stats,
    kind: str,
) -> None:
    fast_part, slow_part = SLOW[kind]
    with running(create_app(tiny_model)) as port:
        stop = threading.Event()
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(fast_part)
        feeder = threading.Thread(target=trickle, args=(sock, slow_part, 0.2, stop))
        t0 = time.monotonic()
        feeder.start()
        served = [answers_equal(port, tiny_model, sample_texts[i : i + 2]) for i in range(3)]
        answer = read_all(sock)  # returns when the server closes the connection
        cut_after = time.monotonic() - t0
        stop.set()
        feeder.join(10)
        sock.close()
        assert all(served)
        assert 0.8 <= cut_after < 8.0, cut_after
        if kind == "headers byte by byte":
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        else:  # nothing of a request, or a request the app never saw whole: no answer
            assert answer == b"", answer[:200]
        assert answers_equal(port, tiny_model, sample_texts[:3])
    suite_stats.add(SUITE, faults=1)


def test_connections_over_the_limit_get_503_and_the_others_keep_working(
    tiny_model: XmcModel,  # noqa: F811
    sample_texts: list[str],  # noqa: F811
    suite_stats,
) -> None:
    limits = Limits.from_config(
        ServeConfig(), header_timeout_s=20.0, body_timeout_s=20.0, max_connections=3
    )
    with running(create_app(tiny_model), limits) as port:
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3)]
        for sock in held:  # each one answered, so each one accepted and still open
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200 ")
        status, text = request(port, "GET", "/health")
        assert status == 503, text
        for sock in held:  # the established connections are still served
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 200 ")
            sock.close()
        deadline = time.monotonic() + 10  # until the server has seen the closes
        while request(port, "GET", "/health")[0] != 200:
            assert time.monotonic() < deadline, "still 503 after the connections closed"
            time.sleep(0.1)
        assert answers_equal(port, tiny_model, sample_texts[:2])
    suite_stats.add(SUITE, faults=1)


def read_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length, leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the head"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(
        line.split(b":", 1)[1] for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ))  # fmt: skip
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the body"
        body += chunk
    return head + b"\r\n\r\n" + body


BAD_AUTH = {
    "no header": "",
    "wrong token": f"Authorization: Bearer {TOKEN}x\r\n",
    "other scheme": f"Authorization: Basic {TOKEN}\r\n",
    "token alone": f"Authorization: {TOKEN}\r\n",
    "not latin": "Authorization: Bearer \xe9\xe9\r\n",
}


def test_requests_without_the_token_get_401_and_health_and_docs_stay_open(
    tiny_model: XmcModel,  # noqa: F811
    sample_texts: list[str],  # noqa: F811
) -> None:
    with running(create_app(tiny_model, token=TOKEN)) as port:
        for name, header in BAD_AUTH.items():
            status, body = request(port, "POST", "/predict", predict_body(["x"]), header)
            assert status == 401 and "Bearer" in body["detail"], (name, body)
            status, _ = request(port, "POST", "/reload", headers=header)
            assert status == 401, name
        for path in ("/health", "/docs", "/openapi.json"):  # nothing secret: open
            assert request(port, "GET", path)[0] == 200, path
        good = f"Authorization: Bearer {TOKEN}\r\n"
        assert answers_equal(port, tiny_model, sample_texts[:2], good)
        assert answers_equal(port, tiny_model, sample_texts[:2], good.replace("Bearer", "bearer"))


BAD_HEADS = {
    "length of 5000 digits": b"Content-Length: " + b"9" * 5000 + b"\r\n",
    "length of 20 digits": b"Content-Length: 99999999999999999999\r\n",
    "two lengths": b"Content-Length: 5\r\nContent-Length: 6\r\n",
    "negative length": b"Content-Length: -5\r\n",
}


@pytest.mark.parametrize("kind", list(BAD_HEADS))
def test_absurd_content_lengths_get_4xx(
    tiny_model: XmcModel,  # noqa: F811
    sample_texts: list[str],  # noqa: F811
    suite_stats,
    kind: str,
) -> None:
    with running(create_app(tiny_model)) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n" + BAD_HEADS[kind] + b"\r\n")
            answer = read_all(sock)
        assert answer[:10] == b"HTTP/1.1 4" and int(answer[9:12]) in (400, 413), answer[:200]
        assert answers_equal(port, tiny_model, sample_texts[:2])
    suite_stats.add(SUITE, inputs=1)
