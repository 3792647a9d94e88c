"""The served model of ``benchmarks/reliability.py``: a dataset and model prepared with the
``xmc`` CLI, ``xmc serve`` in its own process on 127.0.0.1, one-off requests to it, what its
log says, and a thread sampling its RSS and CPU time."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import load_client
import psutil

from xmc_core.corpus import Corpus

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
SAMPLE_S = 0.25


# ---------------------------------------------------------------- model and texts
def xmc_command() -> list[str]:
    """The ``xmc`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("xmc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "xmc_core.app.cli"]


def run_xmc(args: list[str]) -> None:
    """Run one ``xmc`` command, echoing it; stop on failure."""
    cmd = xmc_command() + args
    print("$", shlex.join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)


def prepare_dataset(src: Path, work: Path) -> Path:
    """An ingested dataset folder: ``src`` itself, or ``src`` ingested once into ``work``."""
    if (src / "manifest.json").exists():
        return src
    dest = work / "datasets" / src.name
    if not (dest / "manifest.json").exists():
        run_xmc(["ingest", "lines", str(src), str(dest), "--on-unlabeled", "keep"])
    return dest


def prepare_model(dataset: Path, work: Path) -> Path:
    """A model trained by ``xmc train`` on ``dataset``, reused while ``xmc_core`` is unchanged."""
    dest = work / "models" / f"{dataset.name}-{bench_common.xmc_digest()}"
    if not dest.exists():  # xmc train writes the folder atomically
        run_xmc(["train", str(dataset), str(dest)])
    return dest


def test_texts(dataset: Path, n: int) -> list[str]:
    """The first ``n`` non-blank texts of the test split (fewer if the split is smaller)."""
    texts = Corpus(dataset).read_split("test", ["text"]).column("text").to_pylist()
    return [t for t in texts if t and t.strip()][:n]


# ---------------------------------------------------------------- the server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def start_server(
    model: Path, port: int, log: Path, read_timeout: float | None = None
) -> subprocess.Popen:
    """``xmc serve MODEL --port PORT`` on 127.0.0.1, output to ``log``; ``read_timeout``: its
    ``--header-timeout`` and ``--body-timeout`` (None: the server's defaults)."""
    cmd = [*xmc_command(), "serve", str(model), "--host", HOST, "--port", str(port)]
    if read_timeout is not None:
        cmd += ["--header-timeout", str(read_timeout), "--body-timeout", str(read_timeout)]
    print("$", shlex.join(cmd), f"> {log}", flush=True)
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)


def call(port: int, method: str, path: str, body: bytes = b"", timeout: float = 30.0) -> Any:
    """One request (``body``: JSON bytes) on a fresh connection; the JSON answer (raises on a
    non-200 status)."""
    conn = load_client.Connection(HOST, port, timeout)
    try:
        status, payload = conn.request(method, path, body)
    finally:
        conn.close()
    if status != 200:
        raise RuntimeError(f"{method} {path}: status {status}: {payload[:300]!r}")
    return json.loads(payload)


def wait_for_health(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return call(port, "GET", "/health", timeout=2.0)
        except (OSError, RuntimeError, ValueError):
            time.sleep(0.3)
    raise RuntimeError(f"no answer from /health within {timeout} s:\n{log.read_text()[-3000:]}")


def stop_server(proc: subprocess.Popen) -> int | None:
    """SIGTERM (uvicorn's graceful shutdown), SIGKILL after 20 s; the exit code."""
    proc.terminate()
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        bench_common.kill_tree(psutil.Process(proc.pid))
        proc.wait()
        return None


def log_findings(log: Path) -> dict[str, int]:
    """Tracebacks, ERROR lines, 5xx access-log lines, connections closed for reading too
    slowly and connections over the limit, in the server's output."""
    text = log.read_text(errors="replace")
    return {
        "tracebacks": text.count("Traceback (most recent call last)"),
        "error_lines": len(re.findall(r"^ERROR", text, flags=re.M)),
        "access_5xx": len(re.findall(r'HTTP/1\.\d" 5\d\d', text)),
        "access_lines": len(re.findall(r'"(?:GET|POST) ', text)),
        "slow_connections_closed": text.count("closing the connection of"),
        "connections_over_limit": text.count("connection over the limit"),
    }


class Monitor(threading.Thread):
    """Samples the RSS and CPU time of the server's process tree every SAMPLE_S."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.samples, self.stop = psutil.Process(pid), [], threading.Event()

    def sample(self) -> tuple[float, float, float]:
        """(monotonic time, RSS MB, CPU s) of the tree now."""
        tree, cpu = bench_common.process_tree(self.proc), 0.0
        for p in tree:
            try:
                t = p.cpu_times()
                cpu += t.user + t.system
            except psutil.Error:
                continue
        return time.monotonic(), bench_common.tree_rss(tree) / 2**20, cpu

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            self.samples.append(self.sample())

    def between(self, t0: float, t1: float) -> dict[str, Any]:
        """Peak RSS, RSS growth, CPU seconds and utilisation between two monotonic times."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1] or self.samples[-1:]
        first, last = inside[0], inside[-1]
        span = max(last[0] - first[0], 1e-9)
        return {
            "peak_rss_mb": max(s[1] for s in inside),
            "rss_first_mb": first[1],
            "rss_last_mb": last[1],
            "cpu_s": last[2] - first[2],
            "cpu_percent_of_one_core": 100 * (last[2] - first[2]) / span,
            "samples": len(inside),
            "rss_mb_every_second": [round(s[1], 1) for s in inside[:: max(1, int(1 / SAMPLE_S))]],
        }
