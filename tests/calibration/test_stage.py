"""Calibration as a training stage: the carve held out of training, the calibrator fitted on it
and saved with the model, probabilities and thresholds where a user meets them; a corpus too
small to carve, and a model saved before calibration, are uncalibrated and say so."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.model_helpers import write_small_corpus
from xmc_core.app.commands import predict
from xmc_core.app.describe import describe_model, format_model
from xmc_core.app.predictions import ranked_lists
from xmc_core.calibration.metrics import ece_at_k
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.carve import carved_rows
from xmc_core.errors import InputError, XmcError
from xmc_core.families.train import train_in_process
from xmc_core.model.xmc_model import XmcModel

CARVE = ["calibration.fraction=0.25", "calibration.min_docs=20", "calibration.seed=4"]
SAVED = Path(__file__).parents[1] / "model" / "saved" / "format2-xr-linear"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("calibrated") / "synthetic")


def config(work: Path, *sets: str) -> XmcConfig:
    return XmcConfig.load(None, [f"work_dir={work}", "tfidf.max_features=5000", *sets])


@pytest.fixture(scope="module")
def trained(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return train_in_process(Corpus(dataset), config(tmp_path_factory.mktemp("work"), *CARVE))


def test_the_model_trains_without_the_carve_and_is_calibrated_on_it(
    trained: dict[str, Any], dataset: Path
) -> None:
    held = carved_rows(dataset, 0.25, 5000, 4)
    model = trained["model"]
    assert 40 < held.num_rows < 110  # about a quarter of 300
    assert model.n_train_docs == 300 - held.num_rows
    assert trained["train"].X.shape[0] == model.n_train_docs
    assert not set(held.column("doc_id").to_pylist()) & set(trained["train"].doc_ids.to_pylist())
    assert model.calibrator is not None
    assert set(model.calibrator.choice) == {
        f"{k}/{g}" for k in ("isotonic", "platt") for g in ("none", "rank", "frequency")
    }
    values = trained["evaluation"].values
    scores = model.predict_features(trained["test"].X, topk=20)
    assert values["ECE@5"] == pytest.approx(
        ece_at_k(model.probabilities(scores), trained["test"].Y, 5)
    )


def test_probabilities_keep_each_documents_order_within_a_rank_group(
    trained: dict[str, Any],
) -> None:
    model = trained["model"]
    scores = model.predict_features(trained["test"].X[:20], topk=10)
    P = model.probabilities(scores)
    assert P.shape == scores.shape and P.nnz == scores.nnz
    assert ((P.data >= 0) & (P.data <= 1)).all()
    cols = ranked_lists(model, scores)
    for s, p in zip(cols["scores"], cols["probabilities"], strict=True):
        assert s == sorted(s, reverse=True) and len(p) == len(s)
        if model.calibrator.grouping == "none":
            assert p == sorted(p, reverse=True)  # one monotone map: the order is kept


def test_a_threshold_keeps_the_labels_that_reach_it(trained: dict[str, Any]) -> None:
    model = trained["model"]
    scores = model.predict_features(trained["test"].X[:30], topk=10)
    full = ranked_lists(model, scores)
    t = float(np.median([p for row in full["probabilities"] for p in row]))
    cut = ranked_lists(model, scores, threshold=t)
    for labels, probs, all_labels, all_probs in zip(
        cut["labels"], cut["probabilities"], full["labels"], full["probabilities"], strict=True
    ):
        assert labels == [n for n, p in zip(all_labels, all_probs, strict=True) if p >= t]
        assert all(p >= t for p in probs)
    top = ranked_lists(model, scores, threshold=1.0)
    assert all(p == 1.0 for row in top["probabilities"] for p in row)
    one = ranked_lists(model, scores, threshold=1.0, at_least_one=True)
    for o, t, f in zip(one["labels"], top["labels"], full["labels"], strict=True):
        assert o == (t or f[:1])  # each document's best, when nothing reaches the threshold


def test_the_calibrator_is_saved_and_predict_writes_probabilities(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    model = trained["model"]
    model.save(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "meta.json").read_text())["calibration"] == "calibration"
    loaded = XmcModel.load(tmp_path / "m")
    S = model.predict_features(trained["test"].X, topk=10)
    assert (loaded.probabilities(S) != model.probabilities(S)).nnz == 0
    (tmp_path / "docs.txt").write_text("alpha beta gamma\nsomething else entirely\n")
    assert (
        predict(tmp_path / "m", tmp_path / "docs.txt", tmp_path / "out.jsonl", "test", None, 5, 0.2)
        == 2
    )
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    want = ranked_lists(
        loaded, loaded.predict(["alpha beta gamma", "something else entirely"], 5), 0.2
    )
    assert [r["labels"] for r in rows] == want["labels"]
    assert [r["probabilities"] for r in rows] == [
        [round(p, 6) for p in ps] for ps in want["probabilities"]
    ]
    with pytest.raises(InputError, match="--threshold cuts JSON lines"):
        predict(tmp_path / "m", tmp_path / "docs.txt", tmp_path / "out.npz", "test", None, 5, 0.2)


def test_a_corpus_too_small_to_carve_trains_on_everything_uncalibrated(
    dataset: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        out = train_in_process(Corpus(dataset), config(tmp_path))  # 5% of 300 < 100
    assert out["model"].calibrator is None and out["model"].n_train_docs == 300
    assert "fewer than calibration.min_docs=100" in caplog.text
    assert "ECE@5" not in out["evaluation"].values
    with pytest.raises(XmcError, match="uncalibrated"):
        out["model"].probabilities(out["model"].predict(["alpha"]))
    with pytest.raises(InputError, match=r"predict.threshold=0.5 needs a calibrated model"):
        train_in_process(Corpus(dataset), config(tmp_path / "w", "predict.threshold=0.5"))


def test_a_model_saved_before_calibration_loads_uncalibrated(tmp_path: Path) -> None:
    shutil.copytree(SAVED, tmp_path / "old")
    model = XmcModel.load(tmp_path / "old")
    assert model.calibrator is None
    assert "calibration: none: the model has scores, not probabilities" in format_model(
        describe_model(tmp_path / "old")
    )
    cols = ranked_lists(model, model.predict(["crude oil prices"], 3))
    assert cols["probabilities"] == [None] and len(cols["labels"][0]) > 0
    with pytest.raises(XmcError, match="uncalibrated"):
        ranked_lists(model, model.predict(["crude oil prices"], 3), threshold=0.5)


def test_the_server_answers_probabilities_and_a_requests_threshold(trained: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from xmc_core.serving.http import create_app

    model, texts = trained["model"], ["alpha beta gamma", "something else entirely"]
    client = TestClient(create_app(model))
    for body, cut in (({}, None), ({"threshold": 0.3}, 0.3)):
        response = client.post("/predict", json={"texts": texts, "topk": 5, **body})
        assert response.status_code == 200, response.text
        want = ranked_lists(model, model.predict(texts, 5), cut)
        got = response.json()["predictions"]
        assert [p["labels"] for p in got] == want["labels"]
        for p, probs in zip(got, want["probabilities"], strict=True):
            assert p["probabilities"] == pytest.approx(probs)


def test_a_tuned_policy_saves_its_thresholds_and_predictions_use_them(
    dataset: Path, tmp_path: Path
) -> None:
    sets = [*CARVE, "predict.threshold_policy=sum", "predict.threshold_per_label=true"]
    out = train_in_process(Corpus(dataset), config(tmp_path / "w", *sets))
    model, tuned = out["model"], out["model"].calibrator.thresholds
    assert tuned is not None and tuned.objective == "sum" and 0 <= tuned.value <= 1
    assert tuned.per_label.shape == (len(model.labels),)
    assert np.array_equal(model.cut()[0], tuned.per_label) and model.cut(0.3)[0] == 0.3
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m")
    assert np.array_equal(loaded.cut()[0], tuned.per_label)
    info = format_model(describe_model(tmp_path / "m"))
    assert f"threshold {tuned.value:.3f} tuned for sum, and per label" in info
    scores = loaded.predict_features(out["test"].X, topk=10)
    cols = ranked_lists(loaded, scores, *loaded.cut())
    ids = {name: i for i, name in enumerate(loaded.labels.decode(np.arange(len(loaded.labels))))}
    kept = [
        (n, p)
        for row in zip(cols["labels"], cols["probabilities"], strict=True)
        for n, p in zip(*row, strict=True)
    ]
    assert kept and all(np.float32(p) >= np.float32(tuned.per_label[ids[n]]) for n, p in kept)
    values = out["evaluation"].values
    assert {"micro-F1", "macro-F1", "precision", "recall"} <= set(values)
    assert 0 < values["micro-F1"] <= 1


def test_a_fixed_threshold_and_a_tuned_policy_are_refused_together(tmp_path: Path) -> None:
    from xmc_core.errors import ConfigError

    with pytest.raises(ConfigError, match="a tuned policy chooses the threshold"):
        config(tmp_path, "predict.threshold=0.5", "predict.threshold_policy=micro_f1")


def test_the_diagnostics_draw_the_reliability_of_a_calibrated_model(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    from xmc_core.config import EvalConfig
    from xmc_core.families.common import diagnose
    from xmc_core.model.xmc_model import ModelRanker

    trained["model"].save(tmp_path / "m")
    loaded = ModelRanker.load(tmp_path / "m")  # as the flow's diagnostics task loads it
    assert loaded.calibrator is not None
    d = diagnose(loaded, trained["train"], trained["test"], None, EvalConfig(), 1000)
    test = d.report["reliability"]["test"]
    assert test["k"] == 5 and sum(test["counts"]) == 5 * trained["test"].X.shape[0]
    assert test["ece"] == pytest.approx(trained["evaluation"].values["ECE@5"])
    d.save(tmp_path / "d")
    assert (tmp_path / "d" / "plots" / "reliability.png").stat().st_size > 1000


def test_a_run_on_feature_matrices_holds_rows_out_and_is_calibrated(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    from xmc_core.model.estimator import XmcClassifier

    train, test = trained["train"], trained["test"]
    clf = XmcClassifier(work_dir=tmp_path, calibration__fraction=0.3, calibration__min_docs=20)
    clf.fit(train.X, train.Y)
    model = clf.model_
    assert model.calibrator is not None
    assert 0 < train.X.shape[0] - model.n_train_docs < train.X.shape[0] // 2
    P = clf.predict_proba(test.X, topk=5)
    assert P.shape == (test.X.shape[0], train.Y.shape[1]) and P.nnz == 5 * test.X.shape[0]
    assert ((P.data >= 0) & (P.data <= 1)).all()
    with pytest.raises(XmcError, match="uncalibrated"):
        XmcClassifier(work_dir=tmp_path / "small").fit(train.X, train.Y).predict_proba(test.X)
