"""benchmarks/memory_trace.py: the stage peaks of a trace worked out by hand, and one real traced
run of the ``peer_runner.py ours`` steps on tiny features."""

from __future__ import annotations

import json
from pathlib import Path

import memory_trace
import numpy as np
import pytest
import scipy.sparse as sp


def _line(t: float, kind: str, text: str, **more: object) -> dict:
    return {"t": t, "kind": kind, "text": text, **more}


def test_summary_by_hand() -> None:
    samples = [(100.0, 50.0), (100.2, 80.0), (101.0, 300.0), (101.5, 250.0), (102.0, 120.0)]
    lines = [
        _line(100.1, "stage", "load"),
        _line(100.4, "stage", "fit"),
        _line(100.6, "log", "level 1 trained", rss_mb=90.0),
        _line(100.9, "max", "290 MB", rss_mb=290.0, stack=["model.py:1 fit", "beam.py:2 build"]),
        _line(101.2, "max", "too late", rss_mb=299.0, stack=["x.py:1 later"]),
        _line(101.8, "stage", "predict"),
        _line(101.9, "stage", "done", stages_s={"fit_s": 1.4}),
    ]
    out = memory_trace.summarize(samples, lines)
    assert out["peak_mb"] == 300.0 and out["peak_at_s"] == 1.0 and out["peak_stage"] == "fit"
    assert [(r["stage"], r["peak_mb"]) for r in out["stages"]] == [
        ("load", 80.0),  # the sample at 100.2 only (100.0 is before the mark)
        ("fit", 300.0),  # 101.0 and 101.5
        ("predict", None),  # no sample in 0.1 s
    ]
    assert out["stages"][1]["start_s"] == 0.4 and out["stages"][1]["seconds"] == 1.4
    # the last maximum up to one second after the peak: the one at 101.2 is within it
    assert out["stack_at_peak"] == {"at_s": 1.2, "rss_mb": 299.0, "stack": ["x.py:1 later"]}
    assert out["log"] == [{"at_s": 0.6, "rss_mb": 90.0, "text": "level 1 trained"}]
    assert out["stage_seconds"] == {"fit_s": 1.4}
    assert out["rss_curve"] == [(0, 80.0), (1, 300.0), (2, 120.0)]


def _write_features(workdir: Path, n: int = 240, d: int = 300, k: int = 30) -> None:
    """Tiny features: each label has 6 words that mark its documents."""
    rng = np.random.default_rng(0)
    labels = [rng.choice(k, size=rng.integers(1, 4), replace=False) for _ in range(n + 40)]
    Y = sp.lil_matrix((n + 40, k), dtype=np.float32)
    X = sp.lil_matrix((n + 40, d), dtype=np.float32)
    for i, ls in enumerate(labels):
        Y[i, ls] = 1.0
        for lab in ls:
            X[i, rng.choice(6, size=3, replace=False) + 6 * lab] = 1.0
        X[i, rng.choice(d, size=5, replace=False)] = 0.5
    X, Y = X.tocsr(), Y.tocsr()
    sp.save_npz(workdir / "X_train.npz", X[:n])
    sp.save_npz(workdir / "Y_train.npz", Y[:n])
    sp.save_npz(workdir / "X_test.npz", X[n:])


def test_a_real_trace_marks_every_stage(tmp_path: Path) -> None:
    _write_features(tmp_path)
    out = tmp_path / "trace.json"
    assert memory_trace.main([str(tmp_path), "--interval", "0.05", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    stages = [r["stage"] for r in report["stages"]]
    assert stages == ["load", "warm-up", "pifa", "tree", "fit", "predict", "save"]
    assert report["peak_stage"] in [*stages, "done"]  # done: the process exiting
    assert report["peak_mb"] == max(mb for _, mb in report["rss_curve"]) > 30.0
    assert set(report["stage_seconds"]) == {"pifa_s", "tree_s", "fit_s"}
    assert report["stack_at_peak"]["stack"] and report["git"]["xmc_core_digest"]
    assert report["command"].startswith("python benchmarks/memory_trace.py ")


def test_missing_features_are_named_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        memory_trace.main([str(tmp_path)])
    assert stop.value.code == 2
    assert "X_train.npz is missing" in capsys.readouterr().err
