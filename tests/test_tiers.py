"""The two tiers of tests/conftest.py: every module it lists as slow exists (a renamed one would
silently join the fast tier), and the marking picks what its docstring says; the longest modules
it puts first exist, are slow, and come first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONGEST_FIRST, SLOW_MODULES, TESTS, in_slow_module, run_order


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


@pytest.mark.parametrize("module", LONGEST_FIRST)
def test_the_longest_modules_exist_and_are_slow(module: str) -> None:
    assert (TESTS / module).is_file() and in_slow_module(TESTS / module), module


def test_the_longest_modules_come_first_in_their_order(request: pytest.FixtureRequest) -> None:
    class Item:  # what run_order reads of a pytest item
        def __init__(self, rel: str) -> None:
            self.path = TESTS / rel

    names = ["core/test_config.py", *reversed(LONGEST_FIRST), "app/test_cli.py"]
    ordered = sorted(names, key=lambda rel: run_order(Item(rel)))  # type: ignore[arg-type]
    assert ordered == [*LONGEST_FIRST, "core/test_config.py", "app/test_cli.py"]
    assert run_order(request.node) == len(LONGEST_FIRST)  # this module: after them
