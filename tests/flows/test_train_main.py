"""The main job, as the README runs it: a fresh process, its own Prefect server, Dask,
featurization through XR-Linear to the test metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_train_main_job_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    cmd = [sys.executable, "-m", "flows.train", "--set", f"work_dir={tmp_path / 'work'}"]
    cmd += ["--set", "data.synthetic_scale=0.05", "--set", "data.rows_per_group=150"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert "corpus: 300 train / 75 test docs" in log
    assert "vocabulary:" in log and "label features (pifa):" in log
    # one summary at the end, the test figures once, no library noise
    summary = out.stdout.splitlines()[-6:]
    assert summary[0].startswith("xmc run summary: xr-linear on synthetic-x0.05-seed0-")
    assert summary[1] == "  data      300 train / 75 test docs, " + summary[1].split(", ")[1]
    assert summary[2].startswith("  test      P@1 ") and log.count("P@1") == 1
    assert summary[3].startswith("  model     ") and "artifacts/model/" in summary[3]
    assert summary[4].startswith("  mlflow    run ")
    assert summary[5] == (
        "  registry  version 1 promoted to xmc-synthetic@champion (no champion before)"
    )
    assert "distributed." not in log and "Downloading artifacts" not in log
    assert "Finished in state" not in log and ": wrote /" not in log
    assert len(log.splitlines()) < 45, log
    assert len(list((tmp_path / "work" / "artifacts" / "count").iterdir())) == 3  # 2 train + 1 test
