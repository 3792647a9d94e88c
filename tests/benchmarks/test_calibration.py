"""The calibration benchmark: its targets read from a hand-made table, then a tiny real run of
XR-Linear (with a carve large enough on 200 documents) and, when the peers venv is there,
PECOS and LibMultiLabel."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from tests.benchmarks.conftest import BENCHMARKS
from tests.benchmarks.test_families import write_lines_dataset

# by its path: the name ``calibration`` is also tests/calibration/ on the test run's sys.path
_spec = importlib.util.spec_from_file_location("calibration_bench", BENCHMARKS / "calibration.py")
assert _spec is not None and _spec.loader is not None
calibration = importlib.util.module_from_spec(_spec)
sys.modules["calibration_bench"] = calibration
_spec.loader.exec_module(calibration)
report = calibration.report
PEERS_PYTHON = calibration.PEERS_PY


def test_the_report_names_each_target_met_or_not() -> None:
    ours = {"train_s": 10.0, "calibration_share": 0.05, "P@1": 0.9, "ECE@5": 0.015,
            "micro-F1": 0.60, "macro-F1": 0.30}  # fmt: skip
    lml = {"train_s": 20.0, "micro-F1": 0.55, "macro-F1": 0.35}
    results = {"datasets": {"toy": {"methods": {"xr-linear": ours, "libmultilabel": lml,
                                                "pecos": {"skipped": "no"}}}}}  # fmt: skip
    text = report(results)
    assert "| xr-linear | 10.0 | 5.00 | 90.00 | - | - | - | 1.50 | 60.00 | 30.00 | - | - |" in text
    assert "| pecos | skipped: no |" in text
    assert "- toy xr-linear ECE@5 1.50% <= 2%" in text
    assert "- toy xr-linear calibration 5.0% of training <= 10%" in text
    assert "- toy xr-linear micro-F1 60.00 >= LibMultiLabel 55.00" in text
    assert "- toy xr-linear macro-F1 30.00 < LibMultiLabel 35.00" in text


def test_a_tiny_run_calibrates_and_tunes(tmp_path: Path) -> None:
    write_lines_dataset(tmp_path / "data" / "tiny")
    out = tmp_path / "results.json"
    peers = "pecos,libmultilabel" if PEERS_PYTHON.exists() else ""
    sets = ["calibration.fraction=0.3", "calibration.min_docs=20", "tree.branching=4"]
    argv = ["--datasets-root", str(tmp_path / "data"), "--datasets", "tiny",
            "--families", "xr-linear", "--peers", peers, "--out", str(out),
            *[a for s in sets for a in ("--set", s)]]  # fmt: skip
    calibration.main(argv)
    results = json.loads(out.read_text())["datasets"]["tiny"]
    ours = results["methods"]["xr-linear"]
    assert ours["calibrated"] and 0 <= ours["ECE@5"] <= 1 and 0 < ours["micro-F1"] <= 1
    assert 0 < ours["calibration_share"] < 1
    assert results["stats"]["n_carve"] + results["stats"]["n_fit"] == 200
    if peers:
        assert 0 < results["methods"]["pecos"]["micro-F1"] <= 1
        assert 0 <= results["methods"]["libmultilabel"]["macro-F1"] <= 1
