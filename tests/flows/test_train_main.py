"""The main job, as the README runs it: a fresh process, its own Prefect server, Dask,
featurization through XR-Linear to the test metrics; stopped by Ctrl-C first, then rerun."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import Stopped, press_ctrl_c
from tests.prefect_db import seed_home

ROOT = Path(__file__).resolve().parents[2]
COMPUTED = re.compile(r"Task run '([\w-]+)' - [\w-]+: ", re.M)
"""A stage's line: logged by a task that computed its artifact (a cached one logs nothing)."""


def test_train_main_job_end_to_end(tmp_path: Path, prefect_template: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(seed_home(tmp_path / "prefect", prefect_template))
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    cmd = [sys.executable, "-m", "flows.train", "--set", f"work_dir={tmp_path / 'work'}"]
    cmd += ["--set", "data.synthetic_scale=0.05", "--set", "data.rows_per_group=150"]
    stopped = ctrl_c_during_the_tree(cmd, env, tmp_path)
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert "corpus: 300 train / 75 test docs" in log
    assert "vocabulary:" in log and "label features (pifa):" in log
    # one summary at the end, the test figures once, no library noise
    summary = out.stdout.splitlines()[-7:]
    assert summary[0].startswith("xmc run summary: xr_linear on synthetic-x0.05-seed0-")
    assert summary[1] == "  data      300 train / 75 test docs, " + summary[1].split(", ")[1]
    assert summary[2].startswith("  test      P@1 ") and log.count("P@1") == 1
    assert summary[3].startswith("  model     ") and "/models/" in summary[3]
    assert summary[4].startswith("  mlflow    run ")
    assert summary[5] == (
        "  registry  version 1 promoted to xmc-synthetic@champion (no champion before)"
    )
    assert re.fullmatch(r"  cache     \d+ of \d+ stages reused from earlier runs .*", summary[6])
    assert "distributed." not in log and "Downloading artifacts" not in log
    assert "Finished in state" not in log and ": wrote /" not in log
    assert len(log.splitlines()) < 45, log
    assert len(list((tmp_path / "work" / "artifacts" / "count").iterdir())) == 3  # 2 train + 1 test
    # the rerun resumed: what the stopped run computed came from the cache
    assert set(COMPUTED.findall(stopped.before)) >= {"count-train-0", "label-features"}
    assert set(COMPUTED.findall(stopped.before)) & set(COMPUTED.findall(log)) == set()


def ctrl_c_during_the_tree(cmd: list[str], env: dict[str, str], tmp_path: Path) -> Stopped:
    """The flow stopped by Ctrl-C while its process builds the label tree (its temporary
    artifact folder exists): within seconds, exit status 130, one line, the Dask workers and
    the temporary Prefect server gone (:func:`press_ctrl_c`), the flow runs marked Crashed."""
    tree = tmp_path / "work" / "artifacts" / "tree"
    stopped = press_ctrl_c(cmd, env, tmp_path / "stopped.log", lambda _: any(tree.glob(".*.tmp")))
    assert stopped.returncode == 130, stopped.after
    said = re.fullmatch(
        r"interrupted: train flow stopped( at [\w-]+)? \(flow run '([\w-]+)', marked Crashed\); "
        r"rerun the same command to resume: finished tasks are cached in "
        + re.escape(str(tmp_path / "work" / "artifacts")),
        stopped.after.splitlines()[-1],
    )
    assert said, stopped.after
    # before that line, at most a stage's INFO line that raced the signal
    others = [x for x in stopped.after.splitlines()[:-1] if " | INFO    | " not in x]
    assert others == [] and "Traceback" not in stopped.after, stopped.after
    with sqlite3.connect(tmp_path / "prefect" / "prefect.db") as db:
        states = dict(db.execute("SELECT name, state_type FROM flow_run"))
    assert set(states.values()) == {"CRASHED"} and said[2] in states, states
    return stopped
