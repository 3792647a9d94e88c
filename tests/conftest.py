"""Shared fixtures: quiet, offline settings before anything imports prefect."""

from __future__ import annotations

from xmc_core.env import apply_quiet_defaults

apply_quiet_defaults()
