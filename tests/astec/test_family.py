"""The astec family end to end on the synthetic corpus: it learns, and beta is chosen on a
validation split carved from train (the test split only encoded and evaluated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.model_helpers import Featurized
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.astec import classifier
from xmc_core.families.train import train_in_process
from xmc_core.neural import split_rows


def test_loss_falls_and_p1_beats_the_frequency_baseline(
    trained_astec: dict, astec_features: Featurized
) -> None:
    for part in (trained_astec["encoder"].record, trained_astec["ranker"].record_):
        history = part["history"]
        assert [h["epoch"] for h in history] == list(range(1, len(history) + 1))
        assert history[-1]["loss"] < 0.9 * history[0]["loss"], history
    counts = np.bincount(astec_features.train.Y.indices, minlength=astec_features.train.Y.shape[1])
    top = int(np.argmax(counts))  # every document gets the most frequent training label
    baseline = float((astec_features.test.Y[:, top].toarray() > 0).mean())
    p1 = trained_astec["evaluation"].values["P@1"]
    assert p1 > baseline + 0.1, (p1, baseline)
    assert trained_astec["encoder"].record["meta_labels"] == 32  # 111 labels / 4 -> 2**5


def test_beta_is_chosen_on_validation_rows_of_train_only(
    astec_dataset: Path, astec_config: XmcConfig, astec_features: Featurized,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    fitted, chosen = [], []
    real_fit, real_choose = classifier.fit_classifier, classifier.choose_beta

    def fit_spy(X, Y, cfg):  # type: ignore[no-untyped-def]
        fitted.append((X.shape[0], Y))
        return real_fit(X, Y, cfg)

    def choose_spy(logits, sims, labels, Y, grid):  # type: ignore[no-untyped-def]
        chosen.append(Y)
        return real_choose(logits, sims, labels, Y, grid)

    monkeypatch.setattr(classifier, "fit_classifier", fit_spy)
    monkeypatch.setattr(classifier, "choose_beta", choose_spy)
    out = train_in_process(
        Corpus(astec_dataset), astec_config.model_copy(update={"work_dir": tmp_path})
    )
    train_Y = astec_features.train.Y
    ((n, Y),) = fitted
    assert n == train_Y.shape[0] == 300 and (train_Y != Y).nnz == 0  # never the test split
    _, val_rows = split_rows(300, astec_config.astec)
    assert len(chosen) == astec_config.astec.classifier_epochs  # once per epoch
    assert all((Yv != train_Y[val_rows]).nnz == 0 for Yv in chosen)  # the validation rows
    assert out["ranker"].beta_ in astec_config.astec.beta_grid


def test_the_kept_epoch_carries_its_beta(trained_astec: dict) -> None:
    history = trained_astec["ranker"].record_["history"]
    best = trained_astec["ranker"].record_["best_epoch"]
    assert trained_astec["ranker"].beta_ == history[best - 1]["beta"]
    assert {"p1_ann", "p1_clf", "val_p5"} <= set(history[0])


def test_the_served_model_pins_faiss() -> None:
    from importlib import metadata

    from xmc_core.serving.package import pip_requirements

    assert f"faiss-cpu=={metadata.version('faiss-cpu')}" in pip_requirements("astec")
    assert not any(pin.startswith("faiss") for pin in pip_requirements("xr_linear"))
