"""Offline, quiet defaults for the orchestration stack (set before prefect/mlflow are imported)."""

from __future__ import annotations

import os

QUIET_DEFAULTS = {
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PREFECT_LOGGING_EXTRA_LOGGERS": "xmc_core",
    "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",
}


def apply_quiet_defaults() -> None:
    """Turn telemetry and hub look-ups off unless the user set these variables already."""
    for key, value in QUIET_DEFAULTS.items():
        os.environ.setdefault(key, value)
