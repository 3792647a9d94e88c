"""Browser tests: Chromium missing is a failure with the install hint, not a silent skip."""

from __future__ import annotations

import os

import pytest

from tests.ui.cdp import INSTALL_HINT, find_chromium


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    """Before any server starts: skip only on ``XMC_SKIP_BROWSER=1``, else fail with the hint."""
    if os.environ.get("XMC_SKIP_BROWSER") == "1":
        pytest.skip("XMC_SKIP_BROWSER=1: browser tests skipped")
    if find_chromium() is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
