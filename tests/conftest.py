"""Shared fixtures: quiet, offline settings before anything imports prefect."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xmc_core.env import apply_quiet_defaults

apply_quiet_defaults()


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[None]:
    """One Prefect test server for every test that runs a flow (flows, the contract suite)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
