"""benchmarks/int8_predict.py: one saved XR-Transformer predicts in float32 and int8, both
scored against the test labels, on a tiny corpus."""

from __future__ import annotations

import json
from pathlib import Path

import int8_predict
import pytest


def test_float32_and_int8_predictions_of_one_saved_model(int8_run: dict, tmp_path: Path) -> None:
    """The model: the ``int8_run`` fixture's, saved with ``predict_runtime: onnx-int8`` (the
    script re-exports it)."""
    model, data, cfg = int8_run["model"], int8_run["data"], int8_run["config"]
    assert cfg.matcher.predict_runtime == "onnx-int8"
    assert (model / "encoder" / "encoder-int8.onnx").is_file()
    out = tmp_path / "int8.json"
    argv = [str(model), "--dataset", str(data), "--repeats", "2", "--out", str(out)]
    assert int8_predict.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/int8_predict.py ")
    r = report["result"]
    assert r["n_test"] == 60 and r["dataset"] == "tiny"
    assert r["batch_size"] == cfg.matcher.embed_batch_size  # the saved one
    assert int8_predict.main([*argv, "--batch-size", "7"]) == 0
    small = json.loads(out.read_text())["result"]
    assert small["batch_size"] == 7
    for side in ("float32", "int8"):  # each document embedded the same in any batch
        assert small[side]["metrics"] == pytest.approx(r[side]["metrics"], abs=1e-12)
    assert small["cosine"] == pytest.approx(r["cosine"], abs=1e-6)
    for side in ("float32", "int8"):
        assert len(r[side]["predict_s"]) == 2 and 0 < r[side]["metrics"]["P@1"] <= 1
    p1 = (r["float32"]["metrics"]["P@1"], r["int8"]["metrics"]["P@1"])
    assert r["p_at_1_loss"] == pytest.approx(100 * (p1[0] - p1[1]))
    assert 0.9 < r["cosine"]["min"] <= r["cosine"]["mean"] < 1.0 + 1e-5
