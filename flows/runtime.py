"""How a flow runs: its Dask task runner and where Prefect keeps results, from the config."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prefect import Flow
from prefect.settings import get_current_settings
from prefect_dask import DaskTaskRunner

from flows.console import add_verbose_flag, quiet_terminal
from tasks.cache_records import record_storage
from xmc_core.config import DaskConfig, XmcConfig


def dask_runner(cfg: DaskConfig) -> DaskTaskRunner:
    """A Dask task runner: the cluster at ``cfg.address`` or a new local one (no dashboard; its
    scheduler's HTTP routes on a free port, not on 8787, which another cluster may hold)."""
    if cfg.address:
        return DaskTaskRunner(address=cfg.address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": cfg.n_workers,
            "threads_per_worker": cfg.threads_per_worker,
            "dashboard_address": None,
            "scheduler_kwargs": {"dashboard_address": ":0"},
        }
    )


def configured(flow: Flow[Any, Any], cfg: XmcConfig, use_dask: bool = True) -> Flow[Any, Any]:
    """``flow`` with the configured task runner and result storage under ``cfg.work_dir``
    (:class:`~tasks.cache_records.CacheRecords`: cache records are verified before Prefect
    deserializes them)."""
    options: dict[str, Any] = {"result_storage": record_storage(cfg.work_dir)}
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
    with prefect_api():
        result = flow(args.config, args.overrides)
    if isinstance(result, dict) and result.get("summary"):
        print(result["summary"])
    else:
        print(f"{flow.name} flow finished in {time.perf_counter() - start:.1f} s")
    return result


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
    server.start()
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
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
