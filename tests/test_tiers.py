"""The two tiers of tests/conftest.py: every module it lists as slow exists (a renamed one would
silently join the fast tier), and the marking picks what its docstring says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SLOW_MODULES, TESTS, in_slow_module


@pytest.mark.parametrize("module", sorted(SLOW_MODULES))
def test_every_slow_module_exists(module: str) -> None:
    path = TESTS / module
    assert path.is_dir() or (path.is_file() and path.name.startswith("test_")), module


def test_slow_modules_and_fixtures() -> None:
    assert in_slow_module(TESTS / "flows" / "test_train_main.py")  # inside a slow folder
    assert in_slow_module(TESTS / "model" / "test_contract.py")
    assert not in_slow_module(TESTS / "model" / "test_estimator.py")
    assert not in_slow_module(TESTS / "flowsx" / "test_a.py")  # a prefix is not a folder


def test_this_module_is_in_the_fast_tier(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("slow") is None
    assert Path(str(request.node.path)).name == "test_tiers.py"
