"""Saved models of the previous format (1: ``kind`` in meta.json, the encoder in
``embedding/``) and format-2 models written before the families had one spelling (``family``
``xr-linear``) still load and predict the same; an unknown format is refused with
"retrain: format N"; the old spellings are read wherever a family is named."""

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
from xmc_core.model import registry
from xmc_core.model.layout import MODEL_FORMAT, model_layout
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage.artifacts import write_meta

SAVED = Path(__file__).parent / "saved"
"""Folders saved by earlier releases of xmc, with what they predicted then."""


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
    assert old.family == "xr_linear"
    texts = ["first test document words", "", None, "another one"]
    assert (old.predict(texts) != trained.predict(texts)).nnz == 0


def test_an_unknown_format_says_retrain(trained: XmcModel, tmp_path: Path) -> None:
    trained.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    (tmp_path / "m" / "meta.json").write_text(json.dumps({**meta, "model_format": 99}))
    with pytest.raises(ArtifactError, match=f"retrain: format {MODEL_FORMAT}"):
        XmcModel.load(tmp_path / "m")


def test_a_format_two_model_of_the_old_spelling_loads_and_predicts_the_same() -> None:
    """An XR-Linear model saved by xmc at 309b71c (``family: xr-linear``), its top labels then."""
    folder = SAVED / "format2-xr-linear"
    assert json.loads((folder / "meta.json").read_text())["family"] == "xr-linear"
    expected = json.loads((SAVED / "format2-xr-linear.expected.json").read_text())
    model = XmcModel.load(folder)
    assert model.family == "xr_linear" and model_layout(folder)["family"] == "xr_linear"
    got = model.top_labels(model.predict(expected["texts"]))
    assert [[[n, s] for n, s in row] for row in got] == expected["top"]


@pytest.mark.parametrize(
    ("old", "new"),
    [("xr-linear", "xr_linear"), ("xr-transformer", "xr_transformer"),
     ("x-transformer", "x_transformer"), ("xml-cnn", "xml_cnn"),
     ("hierarchical-xc", "hierarchical_xc"), ("neural-xc", "neural_xc"), ("astec", "astec")],
)  # fmt: skip
def test_the_old_spellings_are_read_as_the_one_spelling(old: str, new: str) -> None:
    assert registry.canonical(old) == new and registry.family(old).name == new
    cfg = XmcConfig.load(None, [f"model.kind={old}"])
    assert cfg.model.kind == new
    ens = XmcConfig.load(None, ["model.kind=ensemble", f"ensemble.members=[{{kind: {old}}}]"])
    assert ens.ensemble.members[0].kind == new
