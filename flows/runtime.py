"""How a flow runs: its Dask task runner and where Prefect keeps results, from the config; its
command line, whose first Ctrl-C stops the run cleanly (:mod:`xmc_core.interrupt`)."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from distributed import LocalCluster, Nanny
from prefect import Flow
from prefect.context import FlowRunContext, TaskRunContext
from prefect.settings import get_current_settings
from prefect_dask import DaskTaskRunner

from flows.console import add_verbose_flag, mute_terminal, quiet_terminal
from tasks.cache_records import record_storage
from xmc_core.config import DaskConfig, XmcConfig
from xmc_core.interrupt import on_ctrl_c, shielded_children


def dask_runner(cfg: DaskConfig) -> DaskTaskRunner:
    """A Dask task runner: the cluster at ``cfg.address`` or a new local one (no dashboard; its
    scheduler's HTTP routes on a free port, not on 8787, which another cluster may hold)."""
    if cfg.address:
        return DaskTaskRunner(address=cfg.address)
    return DaskTaskRunner(
        cluster_class=local_cluster,
        cluster_kwargs={
            "n_workers": cfg.n_workers,
            "threads_per_worker": cfg.threads_per_worker,
            "dashboard_address": None,
            "scheduler_kwargs": {"dashboard_address": ":0"},
        },
    )


def local_cluster(**kwargs: Any) -> LocalCluster:
    """A local Dask cluster whose worker processes (and the thread that restarts them) leave
    the terminal's Ctrl-C to this process, which closes the cluster: they start with SIGINT
    blocked, then take it by going quiet (:func:`dask_setup`); they exit as soon as the
    cluster closes (:func:`dask_teardown`)."""
    with shielded_children():
        return LocalCluster(preload=[__name__], worker_class=OwnEnvNanny, **kwargs)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""The native thread pools' sizes a Dask nanny sets for its worker (Dask's default: 1)."""


class OwnEnvNanny(Nanny):
    """A Dask nanny that keeps its worker's environment out of this process, and gives its
    worker's native thread pools (torch's, BLAS's) the worker's thread count.

    To start a worker, Dask's nanny sets ``distributed.nanny.pre-spawn-environ``
    (``OMP_NUM_THREADS=1``, ``MKL_NUM_THREADS=1``...) in ``os.environ`` and leaves it there;
    a local cluster's nannies run in the flow's process, so a library imported there
    afterwards started with one thread: torch, imported when the matcher starts, fine-tuned and
    embedded at about half the speed of ``xmc train``. This nanny sets those variables back to
    their values before it spawned, after every spawn (restarts included). Its worker's pools
    get ``threads_per_worker`` threads (Dask's default, 1, whatever the worker's threads),
    unless the variable is set in this process's environment."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._own_env = {key: os.environ.get(key) for key in self.pre_spawn_env}
        sized = {k: str(self.nthreads) for k in THREAD_VARIABLES if k not in os.environ}
        self.pre_spawn_env.update(sized)
        self.env.update(sized)  # set again in the worker's process as it starts

    async def instantiate(self) -> Any:
        try:
            return await super().instantiate()
        finally:
            for key, value in self._own_env.items():
                _restore_env(key, value)


def dask_setup(worker: object) -> None:
    """Preload hook of :func:`local_cluster`'s workers, run as one starts: a Ctrl-C (the
    terminal signals the whole process group) mutes its terminal output, the cancelled tasks
    of the closing cluster included; the flow's process stops the run."""
    signal.signal(signal.SIGINT, lambda _signum, _frame: mute_terminal())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def dask_teardown(worker: object) -> None:
    """Preload hook of :func:`local_cluster`'s workers, run as one closes: its process ends
    next, so its objects are left to the OS, not to a last garbage collection (seconds for a
    process that imported Prefect and the stages: Dask's nanny waited, then killed it)."""
    gc.freeze()


def configured(flow: Flow[Any, Any], cfg: XmcConfig, use_dask: bool = True) -> Flow[Any, Any]:
    """``flow`` with the configured task runner and result storage under ``cfg.work_dir``
    (:class:`~tasks.cache_records.CacheRecords`: cache records are verified before Prefect
    deserializes them), its return value written as JSON (the storage serves it back, checked,
    when the API answers the run's final state with its own)."""
    options: dict[str, Any] = {
        "result_storage": record_storage(cfg.work_dir),
        "result_serializer": "json",
    }
    if use_dask:
        options["task_runner"] = dask_runner(cfg.dask)
    return flow.with_options(**options)


def checked_config(config_path: str | None, overrides: list[str] | None) -> XmcConfig:
    """The config, validated, with its ``work_dir`` writable: checked before a flow's command
    line starts Prefect, so a bad key or a read-only work dir is one clear error, not a failed
    flow run and its tracebacks."""
    cfg = XmcConfig.load(config_path, overrides)
    work = cfg.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=work):  # mkdir succeeds on a read-only existing folder
        pass
    return cfg


def config_flow_main(
    flow: Flow[Any, Any],
    doc: str,
    argv: list[str] | None = None,
    check: Callable[[XmcConfig], None] | None = None,
) -> Any:
    """Command line of a flow called as ``flow(config_path, overrides)``: ``--config FILE``,
    ``--set KEY=VALUE`` (repeatable), ``-v``; runs it against :func:`prefect_api` with a quiet
    terminal (:mod:`flows.console`) and ends with the run's summary (its result's ``summary``),
    or the time it took.

    ``check``: called with the checked config before Prefect starts (the flow's own inputs)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    quiet_terminal(args.verbose)
    cfg = checked_config(args.config, args.overrides)
    if check is not None:
        check(cfg)
    start = time.perf_counter()
    with flow_command(flow.name, cfg.work_dir, args.verbose):
        result = flow(args.config, args.overrides)
    if isinstance(result, dict) and result.get("summary"):
        print(result["summary"])
    else:
        print(f"{flow.name} flow finished in {time.perf_counter() - start:.1f} s")
    return result


@contextmanager
def flow_command(flow_name: str, work_dir: Path, verbose: bool = False) -> Iterator[str]:
    """Where a flow's command line runs its flow: against :func:`prefect_api`, and stopped
    cleanly by the first Ctrl-C (:mod:`xmc_core.interrupt`): Prefect marks the run Crashed,
    the Dask cluster and the temporary server close, the terminal gets one line
    (:func:`interrupted_text`; ``verbose``: the libraries' logs too), exit status 130. A second
    Ctrl-C kills what is left (:func:`kill_children`) and exits at once."""
    stopped = lambda: interrupted_text(flow_name, work_dir)  # noqa: E731
    quiet = None if verbose else mute_terminal
    with on_ctrl_c(stopped, quiet, kill_children), prefect_api() as url:
        yield url


def interrupted_text(flow_name: str, work_dir: Path) -> str:
    """What a Ctrl-C stopped (the task running in this process, the flow run, which Prefect
    marks Crashed) and how to resume."""
    flow_run, task_run = FlowRunContext.get(), TaskRunContext.get()
    text = f"{flow_name} flow stopped"
    if task_run is not None:
        text += f" at {task_run.task_run.name}"
    if flow_run is not None and flow_run.flow_run is not None:
        text += f" (flow run '{flow_run.flow_run.name}', marked Crashed)"
    return (
        f"{text}; rerun the same command to resume: finished tasks are cached in "
        f"{Path(work_dir).resolve() / 'artifacts'}"
    )


def kill_children() -> None:
    """Kill every process this one started (a second Ctrl-C: the Dask workers, the temporary
    Prefect server), which took no Ctrl-C of their own."""
    for child in psutil.Process().children(recursive=True):
        with suppress(psutil.Error):
            child.kill()


@contextmanager
def prefect_api() -> Iterator[str]:
    """One Prefect API for every process of the run, Dask workers included.

    With ``PREFECT_API_URL`` set (a real server, or the test harness) it is exported to child
    processes. Otherwise one temporary local server is started for the run; without this, each
    Dask worker would start a temporary server of its own and record its task runs there.
    """
    url = get_current_settings().api.url
    if url:
        previous = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        try:
            yield url
        finally:
            _restore_env("PREFECT_API_URL", previous)
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    try:
        with shielded_children():  # the flow's process stops the server
            server.start()
        os.environ["PREFECT_API_URL"] = server.api_url
        yield server.api_url
    finally:
        _drain_prefect_services()
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def _drain_prefect_services(timeout: float = 10.0) -> None:
    """Send buffered logs and events before the temporary server goes away.

    Otherwise Prefect's log and event workers keep retrying a stopped server for over a minute.
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout)
    EventsWorker.drain_all(timeout=timeout)


def _restore_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value
