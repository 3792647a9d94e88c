"""An ensemble of different members: an XR-Linear member, one with its own label features
(PIFA + label text, its own label-features stage) and an XR-Transformer member (its own
encoder block, ``[TF-IDF, embedding]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.transformer.conftest import SMALL, tx_dataset, tx_encoder_dir
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.train import train_in_process
from xmc_core.model.xmc_model import XmcModel

__all__ = ["tx_dataset", "tx_encoder_dir"]

MEMBERS = (
    "ensemble.members=[{kind: xr_linear}, {set: [label_features.kind=pifa_label_text]}, "
    "{kind: xr_transformer}]"
)


@pytest.fixture(scope="module")
def mixed(
    tx_dataset: Path, tx_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    sets = [*SMALL, f"encoder.path={tx_encoder_dir}", "model.kind=ensemble", MEMBERS]
    cfg = XmcConfig.load(None, [f"work_dir={tmp_path_factory.mktemp('w')}", *sets])
    return train_in_process(Corpus(tx_dataset), cfg)


def test_members_with_other_encoders_get_their_own_block(mixed: dict) -> None:
    model = mixed["model"]
    d = mixed["train"].X.shape[1]  # TF-IDF features
    assert [type(b).__name__ for b in model.encoder.blocks] == ["TfidfEncoder", "EmbeddingFeatures"]
    assert model.encoder.member_blocks == [0, 0, 1] and model.encoder.uses_text
    width = mixed["model_test"].X.shape[1]
    assert width > 2 * d  # the transformer block: [TF-IDF, embedding]
    assert model.ranker.columns_ == [(0, d), (0, d), (d, width)]
    assert (mixed["model_test"].X[:, :d] != mixed["test"].X).nnz == 0


def test_a_member_with_other_label_features_has_its_own_tree(mixed: dict) -> None:
    linear, text = mixed["model"].ranker.members_[:2]
    assert linear.tree_.C[-1].shape == text.tree_.C[-1].shape
    assert (linear.tree_.C[-1] != text.tree_.C[-1]).nnz > 0


def test_save_load_predict_identical(mixed: dict, tx_dataset: Path, tmp_path: Path) -> None:
    model = mixed["model"]
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    texts = Corpus(tx_dataset).read_split("test", ["text"]).column("text").to_pylist()[:20]
    a, b = model.predict(texts), loaded.predict(texts)
    assert a.nnz > 0 and (a != b).nnz == 0
    assert mixed["evaluation"].values["P@1"] >= 0.5, mixed["evaluation"].values
