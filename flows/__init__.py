"""Prefect flows: composition of ``tasks`` only."""

from xmc_core.env import apply_quiet_defaults

apply_quiet_defaults()
