"""``xmc completion``: the generated bash script, sourced in a real bash, completes
sub-commands, options, choices and paths."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.cli_helpers import xmc
from xmc_core.app.cli import _parser
from xmc_core.app.completion import script


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = xmc("completion", "bash")
    assert out.returncode == 0, out.stderr
    path = tmp_path_factory.mktemp("completion") / "xmc.bash"
    path.write_text(out.stdout)
    return path


def complete(bash_script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """What ``_xmc`` offers for the last of ``words`` (the command line as bash splits it)."""
    line = " ".join(shlex.quote(w) for w in words)
    program = (
        f"source {shlex.quote(str(bash_script))}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _xmc\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True, text=True, timeout=30, cwd=cwd,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


def test_subcommands_and_options(bash_script: Path) -> None:
    assert complete(bash_script, ["xmc", "ins"]) == ["inspect"]
    assert complete(bash_script, ["xmc", "train", "--ov"]) == ["--overwrite"]
    assert complete(bash_script, ["xmc", "serve", "m", "--max-c"]) == ["--max-connections"]
    assert complete(bash_script, ["xmc", "re"]) == ["registry"]


def test_choices(bash_script: Path) -> None:
    assert complete(bash_script, ["xmc", "ingest", ""]) == [
        "csv",
        "jsonl",
        "lines",
        "parquet",
        "xc",
    ]
    assert complete(bash_script, ["xmc", "ingest", "--on-unlabeled", "k"]) == ["keep"]
    assert complete(bash_script, ["xmc", "completion", ""]) == ["bash", "zsh"]


def test_paths(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "mine.yaml").write_text("")
    # after the format, SRC and DEST are paths; after --set's value (even split at "="), too
    assert complete(bash_script, ["xmc", "ingest", "lines", "mo"], tmp_path) == ["models"]
    words = ["xmc", "train", "--set", "a", "=", "b", "mi"]
    assert complete(bash_script, words, tmp_path) == ["mine.yaml"]
    got = complete(bash_script, ["xmc", "train", "--config", "m"], tmp_path)
    assert sorted(got) == ["mine.yaml", "models"]
    assert complete(bash_script, ["xmc", "train", "--set", "k"], tmp_path) == []  # a K=V value
    assert complete(bash_script, ["xmc", "train", "a", "b", "m"], tmp_path) == []  # 2 positionals


def test_zsh_script_loads_bashcompinit() -> None:
    zsh = script(_parser(), "zsh")
    assert "autoload -U +X bashcompinit && bashcompinit" in zsh
    assert zsh.endswith(script(_parser(), "bash")) and "complete -F _xmc xmc" in zsh
