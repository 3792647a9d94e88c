"""The flow's local Dask cluster: its workers' environment stays theirs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from distributed import Client

from flows.runtime import THREAD_VARIABLES as PRE_SPAWN
from flows.runtime import local_cluster


def test_workers_take_one_thread_and_the_flow_process_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dask sets ``OMP_NUM_THREADS=1`` (and MKL's, OpenBLAS's) to spawn a worker and left it
    in the flow's process, where torch, imported later for the matcher, then ran one thread
    of two: the matcher fine-tuned and embedded at half the speed of ``xmc train``. The
    workers still get it, at start and at a restart (a value the user set is theirs too); the
    flow's process keeps its own."""
    for name in PRE_SPAWN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    cluster = local_cluster(
        n_workers=1,
        threads_per_worker=1,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
    )
    with cluster, Client(cluster) as client:
        seen = lambda: {n: os.environ.get(n) for n in PRE_SPAWN}  # noqa: E731
        workers = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1"}
        own = {"OMP_NUM_THREADS": None, "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": None}
        assert (list(client.run(seen).values()), seen()) == ([workers], own)
        client.restart()  # returns as the scheduler sees the new worker; the nanny's restore
        settled(lambda: seen() == own)  # follows once the worker told the nanny it started
        assert (list(client.run(seen).values()), seen()) == ([workers], own)


def settled(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds, at most ``timeout`` seconds (the caller asserts after)."""
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_workers_native_thread_pools_get_its_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker of two threads gets two in torch's and BLAS's pools too (Dask gives 1)."""
    for name in PRE_SPAWN:
        monkeypatch.delenv(name, raising=False)
    cluster = local_cluster(
        n_workers=1,
        threads_per_worker=2,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
    )
    with cluster, Client(cluster) as client:
        seen = lambda: {n: os.environ.get(n) for n in PRE_SPAWN}  # noqa: E731
        assert list(client.run(seen).values()) == [dict.fromkeys(PRE_SPAWN, "2")]
        assert seen() == dict.fromkeys(PRE_SPAWN)
