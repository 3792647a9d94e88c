"""Thin Prefect tasks: load inputs by path, call one ``xmc_core`` function, persist, return
paths."""

from xmc_core.env import apply_quiet_defaults

apply_quiet_defaults()
