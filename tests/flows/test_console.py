"""The quiet terminal of a flow's command line (flows/console.py): what the filter keeps."""

from __future__ import annotations

import asyncio
import logging

import pytest

from flows.console import SUMMARY_MARK, QuietFilter


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
