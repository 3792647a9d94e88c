"""benchmarks/beam_sweep.py: one saved model scored at several beam sizes on the validation
carve it was not trained on, each agreeing with the model's own prediction from the texts."""

from __future__ import annotations

import json
from pathlib import Path

import beam_sweep
import bench_common
import numpy as np
import pytest
import scipy.sparse as sp
from families_runner import to_shared
from peer_runner import TOPK

from tests.benchmarks.test_families import write_lines_dataset
from tests.model_helpers import featurize, train_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus


def test_each_beam_size_scores_the_validation_carve(tmp_path: Path) -> None:
    data = write_lines_dataset(tmp_path / "tiny")
    carve = tmp_path / "carve" / "tiny"
    bench_common.validation_source(data, carve, 0.25, seed=0)  # what the sweep carves again
    work = tmp_path / "work"
    work.mkdir()
    bench_common.prepare(carve, work, keep_corpus=True)
    corpus = Corpus(work / "corpus")
    cfg = XmcConfig.load(None, ["tree.branching=4", f"work_dir={tmp_path / 'w'}"])
    model = train_model(featurize(corpus, cfg), cfg, corpus)
    model.save(tmp_path / "model")

    out = tmp_path / "beams.json"
    argv = [str(tmp_path / "model"), "--dataset", str(data), "--validation", "0.25",
            "--beams", "1,4", "--repeats", "2", "--out", str(out)]  # fmt: skip
    assert beam_sweep.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/beam_sweep.py ")
    r = report["result"]
    assert r["n_docs"] == 50 and r["validation"]["n_validation"] == 50  # 0.25 of 200
    assert [row["beam_size"] for row in r["beams"]] == [1, 4]
    texts = corpus.read_split("test", ["text"]).column("text")
    shared = json.loads((work / "labels.json").read_text())
    for row in r["beams"]:
        assert len(row["rank_s"]) == 2 and row["rank_ms_per_1k"] > 0
        pred = model.predict(texts, topk=TOPK, beam_size=row["beam_size"])
        path = tmp_path / f"direct-{row['beam_size']}.npz"
        pred = to_shared(pred, model.labels.names.to_pylist(), shared)
        sp.save_npz(path, sp.csr_matrix(pred, dtype=np.float32))
        direct = bench_common.score(work, path)["metrics"]
        for metric in ("P@1", "P@5", "nDCG@5", "PSP@5"):
            assert row["metrics"][metric] == pytest.approx(direct[metric]), metric
    assert 0 < r["beams"][1]["metrics"]["P@1"] <= 1
