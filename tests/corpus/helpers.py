"""Assertions shared by the importer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from xmc_core.errors import InputError


def check_error(excinfo: pytest.ExceptionInfo, name: str, row: int | None) -> str:
    """Assert an InputError naming file ``name`` and ``row``; return its message."""
    err = excinfo.value
    assert type(err) is InputError
    msg = str(err)
    assert Path(err.path).name == name and name in msg and "fix:" in msg
    if row is not None:
        assert err.row == row and f"row {row}" in msg
    return msg
