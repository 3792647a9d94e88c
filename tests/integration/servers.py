"""Real servers on 127.0.0.1 for the integration tests: a Prefect API, an MLflow tracking
server and a Prefect process worker, each a subprocess with its own state folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    """Poll ``url`` until it answers 200; fail with the server's log if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-3000:]
            raise RuntimeError(f"{url}: server exited {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


@contextmanager
def background(
    cmd: list[str], env: dict[str, str], log: Path, cwd: Path = REPO
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` in its own process group; stop the whole group on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM the process group (twice: Prefect workers stop on the second), then SIGKILL."""
    for _ in range(2):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=timeout / 2)
            return
        except subprocess.TimeoutExpired:
            continue
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def base_env(prefect_home: Path) -> dict[str, str]:
    """Quiet, offline settings with a private Prefect home."""
    env = dict(os.environ)
    env.update(
        {
            "DO_NOT_TRACK": "true",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "HF_HUB_OFFLINE": "1",
            "PREFECT_HOME": str(prefect_home),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
    )
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@contextmanager
def prefect_server(env: dict[str, str], logs: Path) -> Iterator[str]:
    """``prefect server start`` on a free port; yields its API URL."""
    port = free_port()
    cmd = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with background(cmd, env, logs / "prefect-server.log") as proc:
        api = f"http://127.0.0.1:{port}/api"
        wait_http(f"{api}/health", proc, logs / "prefect-server.log")
        yield api


@contextmanager
def mlflow_server(env: dict[str, str], state: Path, logs: Path) -> Iterator[str]:
    """``mlflow server`` (one worker, SQLite backend, proxied artifacts); yields its URI."""
    port = free_port()
    state.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1", "--backend-store-uri", f"sqlite:///{state / 'mlflow.db'}",
        "--artifacts-destination", str(state / "artifacts"),
    ]  # fmt: skip
    with background(cmd, env, logs / "mlflow-server.log") as proc:
        uri = f"http://127.0.0.1:{port}"
        wait_http(f"{uri}/health", proc, logs / "mlflow-server.log")
        yield uri
