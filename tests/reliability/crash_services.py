"""The services of the crash campaign (``test_crash_safety.py``): one Prefect server and one
Dask cluster whose processes carry ``crash_hook.py`` as ``sitecustomize``, process-group
helpers, training runs against them, and what a run left in its ``work_dir``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.servers import free_port, wait_http
from tests.prefect_db import seed_home
from xmc_core.storage.atomic import write_json

ROOT = Path(__file__).resolve().parents[2]
HOOK_FILE = Path(__file__).with_name("crash_hook.py")
RUN_ARGS = [
    "--set", "data.synthetic_scale=0.05", "--set", "data.rows_per_group=150",
    "--set", "tracking.enabled=false",
]  # fmt: skip
RUN_TIMEOUT = 600.0
"""A deadline for one flow run, not a timing check: a run takes 1-3 minutes, but on a slow CI
machine with the other xdist worker busy one of them passed 300 s (2026-12-01, at e41ea90)."""
RESULT_FILE = "prefect-result.json"
NO_META_STAGES = {"evaluation": "metrics.json", "diagnostics": "diagnostics.json"}

CLUSTER = r"""
import os, sys, time
from distributed import LocalCluster

if __name__ == "__main__":
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=None, processes=True
    )
    with open(sys.argv[1] + ".part", "w") as fh:
        fh.write(cluster.scheduler_address)
    os.replace(sys.argv[1] + ".part", sys.argv[1])
    while True:
        time.sleep(3600)
"""


def alive(pid: int, pgid: int | None = None) -> bool:
    """Whether process ``pid`` (or any process of group ``pgid``) is there, zombies aside."""
    paths = Path("/proc").glob("[0-9]*/stat") if pgid is not None else [Path(f"/proc/{pid}/stat")]
    for stat in paths:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and (pgid is None or int(fields[2]) == pgid):
            return True
    return False


def wait_gone(pid: int, pgid: int | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid, pgid):
        assert time.monotonic() < deadline, f"process {pid} (group {pgid}) outlived SIGKILL"
        time.sleep(0.05)


def kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group of ``proc`` (SIGKILL if SIGTERM is not enough)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    if sig != signal.SIGKILL and alive(proc.pid, proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    wait_gone(proc.pid, proc.pid)


def wait_until_up(proc: subprocess.Popen[bytes], ready: Callable[[], bool], log: Path) -> None:
    deadline = time.monotonic() + 180
    while not ready():
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"not up in time: {log}"
        time.sleep(0.3)


@dataclass
class Services:
    """One Prefect server and one Dask cluster for every run of the module."""

    env: dict[str, str]
    address: str
    base: Path
    plan_file: Path
    cluster_log: Path
    client: Any

    def plan(self, **plan: object) -> None:
        plan = {"audit": str(self.base / "audit.jsonl"), **plan}
        write_json(self.plan_file, plan)

    def idle(self, timeout: float = 60.0) -> None:
        """Wait until no task runs on the cluster: a task that was running when its flow was
        killed runs on to its end (the scheduler forgets it, the worker thread does not)."""
        deadline = time.monotonic() + timeout
        running: object = None
        while True:
            with contextlib.suppress(OSError):  # a worker killed with its task is going away
                running = self.client.run(
                    lambda dask_worker: len(dask_worker.state.all_running_tasks)
                )
                if not any(running.values()) and not any(self.client.processing().values()):
                    return
            assert time.monotonic() < deadline, running
            time.sleep(0.1)


def spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a process group of its own, output to ``log``."""
    with open(log, "wb") as fh:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


@contextlib.contextmanager
def start_services(base: Path, prefect_template: Path) -> Iterator[Services]:
    """Start a Prefect server (its database a copy of ``prefect_template``,
    :mod:`tests.prefect_db`) and a 2-worker Dask cluster, both carrying the crash hook."""
    seed_home(base / "prefect", prefect_template)
    (base / "hook").mkdir()
    shutil.copyfile(HOOK_FILE, base / "hook" / "sitecustomize.py")
    write_json(base / "plan.json", {"audit": str(base / "audit.jsonl")})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(base / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    prefect = str(Path(sys.executable).parent / "prefect")
    hooked = env | {
        "PREFECT_API_URL": url,
        "XMC_CRASH_PLAN_FILE": str(base / "plan.json"),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(base / "hook"), str(ROOT), env.get("PYTHONPATH")])
        ),
    }
    address_file = base / "scheduler-address"
    server = spawn(
        [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env,
        base / "server.log",
    )
    cluster = spawn(
        [sys.executable, "-c", CLUSTER, str(address_file)], hooked, base / "cluster.log"
    )
    try:
        wait_http(f"{url}/health", server, base / "server.log")
        wait_until_up(cluster, address_file.is_file, base / "cluster.log")
        from distributed import Client

        address = address_file.read_text()
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=180)
            plan_file, cluster_log = base / "plan.json", base / "cluster.log"
            yield Services(hooked, address, base, plan_file, cluster_log, client)
    finally:
        kill_group(cluster)
        kill_group(server, signal.SIGTERM)


def start_run(services: Services, work: Path, log: Path) -> subprocess.Popen[bytes]:
    # -v: the campaign reads every task's "wrote" and "Finished in state Cached" lines
    cmd = [sys.executable, "-m", "flows.train", "-v", "--set", f"work_dir={work}", *RUN_ARGS]
    return spawn([*cmd, "--set", f"dask.address={services.address}"], services.env, log)


def cluster_offset(services: Services) -> int:
    return services.cluster_log.stat().st_size


def run_log(services: Services, log: Path, offset: int) -> str:
    """The flow's output and what the Dask workers printed meanwhile (their task logs)."""
    with open(services.cluster_log, "rb") as fh:
        fh.seek(offset)
        workers = fh.read().decode(errors="replace")
    return log.read_text(errors="replace") + "\n" + workers


def run_to_end(services: Services, work: Path, log: Path) -> str:
    offset = cluster_offset(services)
    proc = start_run(services, work, log)
    try:
        proc.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"run timed out: {log.read_text(errors='replace')[-3000:]}")
    kill_group(proc)
    services.idle()
    text = run_log(services, log, offset)
    assert proc.returncode == 0, text[-4000:]
    assert "xmc run summary: xr_linear on " in text
    return text


def finished_folders(work: Path) -> dict[str, tuple[int, int]]:
    """``stage/key`` of every finished artifact folder -> (inode, mtime) of its key file."""
    out = {}
    for folder in sorted((work / "artifacts").glob("*/*")):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        key_file = folder / NO_META_STAGES.get(folder.parent.name, "meta.json")
        st = key_file.stat()
        out[f"{folder.parent.name}/{folder.name}"] = (st.st_ino, st.st_mtime_ns)
    return out


def cache_records(work: Path) -> set[str]:
    """``stage/key`` of every finished folder holding a whole Prefect cache record."""
    out = set()
    for record in (work / "artifacts").glob(f"*/*/{RESULT_FILE}"):
        with contextlib.suppress(ValueError):
            json.loads(record.read_text())
            out.add(f"{record.parent.parent.name}/{record.parent.name}")
    return out


def temp_folders(work: Path) -> list[Path]:
    return sorted(p for p in (work / "artifacts").glob("*/.*.tmp") if p.is_dir())
