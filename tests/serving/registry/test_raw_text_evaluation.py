"""The raw-text evaluation the promotion gate compares versions with: it equals the featurized
one when every label is known, counts unknown true labels as misses (by hand and on a model),
reads the training label counts by name and refuses an unknown split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from tests.serving.registry_fixtures import gate_dataset, gate_models, gate_template
from xmc_core.config import EvalConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import InputError
from xmc_core.evaluation.metrics import evaluate
from xmc_core.features.labels import LabelIndex
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.registry.gate import (
    evaluate_on_dataset,
    evaluate_on_texts,
    evaluate_scores,
    train_label_counts,
)

__all__ = ["gate_dataset", "gate_models", "gate_template"]  # fixtures used by name


@pytest.mark.parametrize("kind", ["good", "worse"])
def test_raw_text_evaluation_equals_featurized_when_all_labels_known(
    kind: str, gate_models: dict[str, Path], gate_dataset: Path
) -> None:
    corpus = Corpus(gate_dataset)
    assert corpus.manifest.unseen_test_labels == 0
    eval_cfg = EvalConfig()
    got = evaluate_on_dataset(gate_models[kind], gate_dataset, "test", eval_cfg)
    model = XmcModel.load(gate_models[kind])
    want = model.evaluate(model.encode_split(corpus, "test"), eval_cfg)
    assert set(got) == set(want) and {k.split("@")[0] for k in got} == {"P", "nDCG", "R", "PSP"}
    assert got == pytest.approx(want, abs=1e-12)


def test_unknown_true_labels_count_as_misses(
    gate_models: dict[str, Path], gate_dataset: Path
) -> None:
    model = XmcModel.load(gate_models["good"])
    table = Corpus(gate_dataset).read_split("test", ["text", "labels"])
    texts = table.column("text").to_pylist()
    lists = table.column("labels").to_pylist()
    extended = [[*names, "zz/unknown"] if i < 30 else names for i, names in enumerate(lists)]
    eval_cfg = EvalConfig()
    got = evaluate_on_texts(model, texts, extended, eval_cfg)
    Y, unknown = model.labels.encode(pa.array(lists, type=pa.list_(pa.string())))
    assert unknown == 0
    scores = model.predict(texts, topk=max(*eval_cfg.ks, model.ranker.predict_cfg.topk))
    n_missing = [1 if i < 30 else 0 for i in range(len(lists))]
    with_missing = evaluate(Y, scores, eval_cfg, n_missing=np.array(n_missing))
    known_only = evaluate(Y, scores, eval_cfg)
    for k in eval_cfg.ks:
        assert got[f"P@{k}"] == pytest.approx(known_only[f"P@{k}"])
        assert got[f"R@{k}"] == pytest.approx(with_missing[f"R@{k}"])
        assert got[f"R@{k}"] < known_only[f"R@{k}"]
        assert got[f"nDCG@{k}"] <= known_only[f"nDCG@{k}"] + 1e-12
    assert got["nDCG@5"] < known_only["nDCG@5"]
    assert "PSP@1" not in got  # no propensities given


def test_unknown_labels_by_hand() -> None:
    """Two docs, labels a, b known; doc 0 also has x (unknown). Ranked: doc 0 a > b,
    doc 1 a > b (its label is b)."""
    scores = sp.csr_matrix([[0.9, 0.5], [0.9, 0.5]])
    got = evaluate_scores(
        LabelIndex(["a", "b"]), scores, [["a", "x"], ["b"]], EvalConfig(ks=[1, 3]),
        {"a": 5, "b": 1, "x": 2}, 10,
    )  # fmt: skip
    assert got["P@1"] == pytest.approx(0.5)
    assert got["R@1"] == pytest.approx((1 / 2 + 0) / 2)
    discount = 1 / 1.584962500721156  # 1 / log2(3)
    assert got["nDCG@3"] == pytest.approx((1 / (1 + discount) + discount) / 2)
    assert 0 < got["PSP@1"] < 1


def test_train_label_counts_by_name(gate_dataset: Path, gate_models: dict[str, Path]) -> None:
    counts, n_train = train_label_counts(Corpus(gate_dataset))
    model = XmcModel.load(gate_models["good"])
    assert n_train == model.n_train_docs
    names = model.labels.names.to_pylist()
    assert [counts.get(n, 0) for n in names] == model.label_counts.tolist()


def test_evaluation_rejects_an_unknown_split(gate_models: dict, gate_dataset: Path) -> None:
    with pytest.raises(InputError, match="no split 'dev'"):
        evaluate_on_dataset(gate_models["good"], gate_dataset, "dev", EvalConfig())
