"""What a flow's command line prints: its own progress and one summary, not library noise.

By default (no ``-v``) the terminal of ``python -m flows.*`` and ``make train`` leaves out Dask's
INFO chatter (the cluster's start and stop, ~70 lines a run) and the nanny's "still alive,
killing" of a worker slow to exit, MLflow's INFO lines, download bars and run links, Prefect's
per-task ``Finished in state Completed()`` lines and temporary-server notices,
the ``CommClosedError`` tracebacks Dask sometimes logs while its cluster shuts down, and the
``CancelledError`` tracebacks the temporary Prefect server's database pool sometimes logs while
the server is stopped (it inherits this process's logging settings), and the tracebacks of a
failure the command line reports as ``error:``/``fix:`` (a full disk, bad input). The
Prefect API (the UI's logs) still receives every log of every run. The settings travel to the
Dask worker processes as environment variables (they start after :func:`quiet_terminal`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
from pathlib import Path

from xmc_core.app.entry import error_text

LOGGING_CONFIG = Path(__file__).with_name("logging.yml")
"""Prefect's logging config plus :class:`QuietFilter` on the console handler."""

QUIET_ENV = {
    "PREFECT_LOGGING_SETTINGS_PATH": str(LOGGING_CONFIG),
    "DASK_LOGGING__DISTRIBUTED": "warning",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
"""Environment of a quiet run (a variable the user set keeps its value)."""

_DROPPED_PREFIXES = (
    "Finished in state Completed(",
    "Finished in state Cached(",
    "Beginning subflow run",
    "Created task run",
    "Starting temporary server on",
    "Stopping temporary server on",
    "See https://docs.prefect.io",
    "Creating a new Dask cluster",
    "The Dask dashboard is available",
)
_NOT_READY = "Finished in state NotReady("  # waited on a task that failed (that one is shown)
_NOISY_LOGGERS = ("distributed", "mlflow", "prefect.task_runner.dask")
_SHUTDOWN_WARNINGS = ("Worker process still alive after",)
"""Dask's warnings of a cluster closing as it should (a worker slow to exit is killed)."""
_WROTE = re.compile(r"[\w-]+: wrote /")  # a stage's artifact folder: for the Prefect logs

SUMMARY_MARK = "xmc_summary"
"""A log record with this attribute (``extra={SUMMARY_MARK: True}``) is the run's summary: the
Prefect API gets it; a quiet terminal leaves it to the command line, which prints it last."""


class QuietFilter(logging.Filter):
    """Drops, from the terminal only, the records a person does not need: Prefect's routine
    state and server lines, Dask's and MLflow's INFO, and connection-closed errors of a cluster
    shutting down. Warnings and errors of anything else pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, SUMMARY_MARK, False) or _closed_comm(record) or _cancelled(record):
            return False
        if _expected_failure(record) or str(record.msg).startswith(_NOT_READY):
            return False
        if record.name.startswith("distributed") and str(record.msg).startswith(_SHUTDOWN_WARNINGS):
            return False
        if record.levelno >= logging.WARNING:
            return True
        if record.name.startswith(_NOISY_LOGGERS):
            return False
        message = str(record.getMessage())
        return not (message.startswith(_DROPPED_PREFIXES) or _WROTE.match(message))


def _expected_failure(record: logging.LogRecord) -> bool:
    """A task or flow run's failure with its traceback, where the failure is one the command
    line reports as ``error:``/``fix:`` (a full disk, bad input): the terminal gets that line
    and the run's one-line failed states, not the traceback."""
    err = record.exc_info[1] if record.exc_info else None
    return err is not None and error_text(err) is not None


def _closed_comm(record: logging.LogRecord) -> bool:
    """A ``CommClosedError`` (or a stream closed under it) of Dask's shutdown."""
    kind = record.exc_info[0] if record.exc_info else None
    if kind is not None and kind.__name__ in ("CommClosedError", "StreamClosedError"):
        return True
    return "CommClosedError" in str(record.msg) or "StreamClosedError" in str(record.msg)


def _cancelled(record: logging.LogRecord) -> bool:
    """A database connection cancelled under SQLAlchemy's pool as the temporary Prefect server
    stops (``Exception during reset or similar``: ``CancelledError``)."""
    kind = record.exc_info[0] if record.exc_info else None
    return (
        record.name.startswith("sqlalchemy.pool")
        and kind is not None
        and issubclass(kind, asyncio.CancelledError)
    )


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose``: every library's logs in the terminal."""
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="show every library's logs (Dask, MLflow, Prefect's task states) in the terminal",
    )  # fmt: skip


def quiet_terminal(verbose: bool = False) -> None:
    """Set up this process and the ones it starts for a quiet terminal (``verbose``: leave
    every library's logging as it is, the way ``-v`` asks)."""
    if verbose:
        return
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    # This process configured its logging when it imported prefect: filter its handlers here.
    from prefect.logging.handlers import PrefectConsoleHandler

    quiet = QuietFilter()
    for name in (None, "uvicorn", "fastapi"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, PrefectConsoleHandler):
                handler.addFilter(quiet)
    for name in ("distributed", "mlflow"):
        logging.getLogger(name).setLevel(logging.WARNING)


def mute_terminal() -> None:
    """No more log records in the terminal (a stopped run's clean-up: the command line prints
    one line); the Prefect API still receives them."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler
            ):
                handler.setLevel(logging.CRITICAL + 1)
