"""Saved models of the previous format (1: ``kind`` in meta.json, the encoder in
``embedding/``) still load and predict the same; an unknown format is refused with
"retrain: format N"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.linear.conftest import SMALL
from tests.model_helpers import Featurized, train_model
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError
from xmc_core.model.xmc_model import MODEL_FORMAT, XmcModel
from xmc_core.storage.artifacts import write_meta


@pytest.fixture(scope="module")
def trained(small_features: Featurized, small_dataset: Path) -> XmcModel:
    return train_model(small_features, XmcConfig.load(None, SMALL), Corpus(small_dataset))


def as_format_one(folder: Path) -> None:
    """Rewrite a saved XR-Linear model as xmc wrote it before the model contract: no
    ``encoder/``, meta.json with ``kind`` and without ``family``/``model_format``."""
    meta = json.loads((folder / "meta.json").read_text())
    shutil.rmtree(folder / "encoder")
    (folder / "meta.json").unlink()
    fields = {"kind": "xr-linear", "ranker": "XRLinearModel"}
    fields |= {k: meta[k] for k in ("n_train_docs", "n_labels")}
    write_meta(folder, "XmcModel", fields)


def test_a_format_one_model_loads_and_predicts_the_same(trained: XmcModel, tmp_path: Path) -> None:
    trained.save(tmp_path / "m")
    as_format_one(tmp_path / "m")
    assert "family" not in json.loads((tmp_path / "m" / "meta.json").read_text())
    old = XmcModel.load(tmp_path / "m")
    assert old.family == "xr-linear"
    texts = ["first test document words", "", None, "another one"]
    assert (old.predict(texts) != trained.predict(texts)).nnz == 0


def test_an_unknown_format_says_retrain(trained: XmcModel, tmp_path: Path) -> None:
    trained.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    (tmp_path / "m" / "meta.json").write_text(json.dumps({**meta, "model_format": 99}))
    with pytest.raises(ArtifactError, match=f"retrain: format {MODEL_FORMAT}"):
        XmcModel.load(tmp_path / "m")
