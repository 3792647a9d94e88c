"""benchmarks/int8_predict.py: one saved XR-Transformer predicts in float32 and int8, both
scored against the test labels, on a tiny corpus."""

from __future__ import annotations

import json
from pathlib import Path

import bench_common
import int8_predict
import pytest

from tests.benchmarks.test_families import write_lines_dataset
from tests.benchmarks.test_xr_transformer import TINY_TREE
from tests.model_helpers import featurize, train_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus


def test_float32_and_int8_predictions_of_one_saved_model(tmp_path: Path) -> None:
    data = write_lines_dataset(tmp_path / "tiny")
    work = tmp_path / "work"
    work.mkdir()
    bench_common.prepare(data, work, keep_corpus=True)
    corpus = Corpus(work / "corpus")
    given = ["model.kind=xr-transformer", "matcher.device=cpu", f"work_dir={tmp_path / 'w'}"]
    given += ["matcher.predict_runtime=onnx-int8"]  # saved int8: the script re-exports it
    cfg = XmcConfig.load(None, [*TINY_TREE, *given])
    train_model(featurize(corpus, cfg), cfg, corpus).save(tmp_path / "model")
    out = tmp_path / "int8.json"
    argv = [str(tmp_path / "model"), "--dataset", str(data), "--repeats", "2", "--out", str(out)]
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
