"""``python -m xmc_core.app.compile_bytecode`` (``make install`` runs it): bytecode for the
installed packages and this tree, a file that does not compile left without it."""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path

import pytest

from tests.cli_helpers import REPO_ROOT
from xmc_core.app import compile_bytecode


def test_the_folders_are_the_installed_packages_then_this_tree() -> None:
    paths = sysconfig.get_paths()
    installed = list(dict.fromkeys(Path(paths[k]) for k in ("purelib", "platlib")))
    folders = compile_bytecode.folders()
    assert folders[: len(installed)] == installed  # each once, also when they are one folder
    assert folders[len(installed) :] == [REPO_ROOT / name for name in compile_bytecode.TREE]


def test_a_file_that_does_not_compile_is_skipped_and_the_rest_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pkg").mkdir()
    good, bad = tmp_path / "pkg" / "good.py", tmp_path / "later.py"
    good.write_text("VALUE = 1\n")
    bad.write_text("def f[T](a: T) -> T: return a\nmatch = (\n")
    monkeypatch.setattr(compile_bytecode, "folders", lambda: [tmp_path, tmp_path / "pkg"])

    assert compile_bytecode.main() == 0

    assert Path(importlib.util.cache_from_source(str(good))).is_file()
    assert not Path(importlib.util.cache_from_source(str(bad))).exists()
    assert capsys.readouterr().out.startswith("bytecode written for the installed packages")
