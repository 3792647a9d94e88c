"""The quiet terminal of a flow's command line (flows/console.py): what the filter keeps."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import warnings

import pytest

from flows.console import QUIET_ENV, SUMMARY_MARK, QuietFilter
from xmc_core.errors import InputError


def _record(name: str, msg: str, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, None, None)
    record.__dict__.update(extra)
    return record


@pytest.mark.parametrize(
    ("name", "msg", "level"),
    [
        ("distributed.scheduler", "State start", logging.INFO),
        ("distributed.nanny", "Closing Nanny at 'tcp://127.0.0.1:1'", logging.INFO),
        ("mlflow.store.db.utils", "Creating initial MLflow database tables...", logging.INFO),
        ("prefect.task_runs", "Finished in state Completed()", logging.INFO),
        ("prefect.task_runs", "Finished in state Cached(type=COMPLETED)", logging.INFO),
        ("prefect", "Starting temporary server on http://127.0.0.1:8476", logging.INFO),
        ("prefect.task_runner.dask", "Creating a new Dask cluster with `x`", logging.INFO),
        ("prefect.task_runs", "count: wrote /w/artifacts/count/89 in 0.44 s", logging.INFO),
        ("distributed.worker", "failed: CommClosedError: in <TCP (closed)>", logging.ERROR),
        ("distributed.nanny", "Worker process still alive after 4.0 seconds, killing", 30),
    ],
)
def test_noise_is_dropped(name: str, msg: str, level: int) -> None:
    assert QuietFilter().filter(_record(name, msg, level)) is False


@pytest.mark.parametrize(
    ("name", "msg", "level"),
    [
        ("prefect.task_runs", "count: 104124 distinct terms (0.4 s)", logging.INFO),
        ("prefect.task_runs", "Finished in state Failed('boom')", logging.ERROR),
        ("prefect.flow_runs", "Beginning flow run 'cyan-falcon' for flow 'train'", logging.INFO),
        ("distributed.worker", "Worker exceeded 95% memory budget", logging.WARNING),
        ("mlflow.tracking", "Failed to log artifact", logging.WARNING),
    ],
)
def test_progress_and_problems_are_kept(name: str, msg: str, level: int) -> None:
    assert QuietFilter().filter(_record(name, msg, level)) is True


def test_closed_comm_exception_is_dropped_and_summary_left_to_the_command_line() -> None:
    class CommClosedError(OSError):
        pass

    record = _record("asyncio", "Task exception was never retrieved", logging.ERROR)
    record.exc_info = (CommClosedError, CommClosedError("closed"), None)
    assert QuietFilter().filter(record) is False
    assert (
        QuietFilter().filter(
            _record("prefect.flow_runs", "xmc run summary", **{SUMMARY_MARK: True})
        )
        is False
    )


def test_server_pool_cancelled_at_shutdown_is_dropped_other_pool_errors_kept() -> None:
    name = "sqlalchemy.pool.impl.AsyncAdaptedQueuePool"
    record = _record(name, "Exception during reset or similar", logging.ERROR)
    record.exc_info = (asyncio.CancelledError, asyncio.CancelledError(), None)
    assert QuietFilter().filter(record) is False
    record.exc_info = (OSError, OSError("disk I/O error"), None)
    assert QuietFilter().filter(record) is True
    cancelled = _record("prefect.flow_runs", "Crash detected!", logging.ERROR)
    cancelled.exc_info = (asyncio.CancelledError, asyncio.CancelledError(), None)
    assert QuietFilter().filter(cancelled) is True


def test_an_expected_failure_leaves_its_traceback_to_the_prefect_api() -> None:
    """A task or flow run failing on a full disk or bad input: the command line ends with
    ``error:``/``fix:``, so the terminal shows no traceback of it (9 on a full disk), nor the
    tasks that waited on it; a bug keeps its traceback, and the one-line failed states stay."""
    full = OSError(errno.ENOSPC, "No space left on device")
    for err in (full, InputError("docs.txt", "text is empty", "remove the line")):
        record = _record("prefect.task_runs", f"Task run failed: {err!r}", logging.ERROR)
        record.exc_info = (type(err), err, None)
        assert QuietFilter().filter(record) is False
    bug = _record("prefect.flow_runs", "Encountered exception during execution", logging.ERROR)
    bug.exc_info = (ValueError, ValueError("a bug"), None)
    assert QuietFilter().filter(bug) is True
    failed = "Finished in state Failed('Task run encountered an exception OSError: ...')"
    assert QuietFilter().filter(_record("prefect.task_runs", failed, logging.ERROR)) is True
    waited = "Finished in state NotReady(\"Upstream task run '9fec96cd' did not reach ...\")"
    assert QuietFilter().filter(_record("prefect.task_runs", waited, logging.ERROR)) is False


def test_the_flows_dask_cluster_takes_no_fixed_port() -> None:
    """Dask's scheduler serves HTTP (health, metrics) even without a dashboard, by default on
    port 8787; with that port taken (another cluster, another run) it warned "Port 8787 is
    already in use" into the terminal."""
    from distributed import LocalCluster

    from flows.runtime import dask_runner
    from xmc_core.config import DaskConfig

    kwargs = {**dask_runner(DaskConfig()).cluster_kwargs, "n_workers": 0, "processes": False}
    with socket.socket() as taken, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(OSError):  # already taken: all the better
            taken.bind(("127.0.0.1", 8787))
            taken.listen()
        with LocalCluster(**kwargs) as cluster:
            assert cluster.scheduler.http_server.port != 8787
    assert [str(w.message) for w in caught if "already in use" in str(w.message)] == []


def test_mlflow_prints_no_run_links_in_a_quiet_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a tracking server MLflow writes "View run ... at: URL" and "View experiment at: URL"
    to stdout as a run ends; the summary names the run and its page once."""
    from types import SimpleNamespace

    from mlflow.store.tracking.rest_store import RestStore
    from mlflow.tracking._tracking_service.client import TrackingServiceClient

    for name, value in QUIET_ENV.items():
        monkeypatch.setenv(name, value)
    client = TrackingServiceClient("http://127.0.0.1:5000")
    run = SimpleNamespace(
        data=SimpleNamespace(tags={}), info=SimpleNamespace(experiment_id="1", run_name="r")
    )
    monkeypatch.setattr(RestStore, "get_run", lambda _self, _run_id: run)
    client._log_url("0123")
    assert capsys.readouterr().out == ""
