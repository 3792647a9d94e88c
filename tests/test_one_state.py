"""One place for state: `make train`, the README's lifecycle commands and `xmc serve` use the same
MLflow store and Prefect home, and the same telemetry-off variables (issue 14, point 8)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from xmc_core.config import XmcConfig

REPO = Path(__file__).resolve().parents[1]


def _make_env() -> dict[str, str]:
    """The variables ``eval "$(make -s env)"`` exports, run in a clean environment."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed: `apt-get install make`")
    out = subprocess.run(
        ["make", "-s", "env"], cwd=REPO, env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    pairs = re.findall(r"^export (\w+)='([^']*)'$", out, flags=re.M)
    assert len(pairs) == len(out.splitlines()), out
    return dict(pairs)


def _makefile_exports() -> set[str]:
    return set(re.findall(r"^export (\w+) \?=", (REPO / "Makefile").read_text(), flags=re.M))


def _lifecycle_blocks() -> list[str]:
    """The documented bash blocks that start servers (the lifecycle pages, once the README's)."""
    pages = [REPO / "docs" / "lifecycle" / name for name in ("flows.md", "registry.md")]
    text = "".join(page.read_text() for page in pages)
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if "server start" in b]


def test_make_env_exports_every_variable_the_makefile_runs_with() -> None:
    env = _make_env()
    assert set(env) == _makefile_exports()
    assert env["PREFECT_HOME"] == str(REPO / "data" / "prefect")
    assert env["DO_NOT_TRACK"] == "true"
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


def test_readme_lifecycle_blocks_start_from_the_makefile_variables() -> None:
    blocks = _lifecycle_blocks()
    assert len(blocks) == 2  # the Prefect UI block and the model lifecycle block
    for block in blocks:
        first, *rest = block.strip().splitlines()
        assert first.startswith('eval "$(make -s env)"'), first
        assert not any("PREFECT_HOME" in line for line in rest)  # not set a second time


def test_readme_mlflow_server_serves_the_default_tracking_store() -> None:
    """The server of the README reads the SQLite file and artifact folder `make train`, the
    flows and `xmc serve` write when no tracking URI is set."""
    block = next(b for b in _lifecycle_blocks() if "mlflow server" in b)
    store = re.search(r"--backend-store-uri (\S+)", block)[1].replace("$PWD", str(REPO))
    artifacts = re.search(r"--artifacts-destination (\S+)", block)[1].replace("$PWD", str(REPO))
    cfg = XmcConfig(work_dir=REPO / "data")
    assert store == f"sqlite:///{cfg.mlflow_dir() / 'mlflow.db'}"
    assert Path(artifacts) == cfg.mlflow_dir() / "artifacts"
