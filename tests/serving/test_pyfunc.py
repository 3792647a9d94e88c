"""The MLflow pyfunc model: registered, loaded back by URI, predicting like the model itself;
and the resolution of model references (folders, models:/ URIs) to local model folders."""

from __future__ import annotations

import importlib
import shutil
from importlib import metadata
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.utils import requirements_utils

from tests.serving.conftest import (
    ALIAS,
    MODEL_NAME,
    Registry,
    assert_same,
    in_process,
    tracking,
)
from xmc_core.errors import InputError, XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.pyfunc import XmcPyfuncModel, input_texts, predict_frame
from xmc_core.serving.resolve import find_model_folder, local_model_dir
from xmc_core.storage.work_dir import WorkDir


@pytest.fixture(scope="module")
def pyfunc(registry: Registry) -> mlflow.pyfunc.PyFuncModel:
    with tracking(registry.uri):
        return mlflow.pyfunc.load_model(f"models:/{MODEL_NAME}/1")


def test_registered_model_predicts_like_the_model(
    pyfunc: mlflow.pyfunc.PyFuncModel, tiny_model: XmcModel, sample_texts: list[str]
) -> None:
    out = pyfunc.predict(pd.DataFrame({"text": sample_texts}))
    assert list(out.columns) == ["labels", "scores", "probabilities"]
    assert len(out) == len(sample_texts)
    assert out["probabilities"].isna().all()  # the tiny model is uncalibrated
    for row, want in zip(out.itertuples(), in_process(tiny_model, sample_texts), strict=True):
        assert_same(row.labels, row.scores, want)
    assert any(len(labels) > 1 for labels in out["labels"])


def test_params_topk_and_beam_size_are_honoured(
    pyfunc: mlflow.pyfunc.PyFuncModel, tiny_model: XmcModel, sample_texts: list[str]
) -> None:
    params = pyfunc.metadata.get_params_schema().to_dict()
    defaults = tiny_model.ranker.predict_cfg
    assert {p["name"]: p["default"] for p in params} == {
        "topk": defaults.topk,
        "beam_size": defaults.beam_size,
        "threshold": None,
    }
    out = pyfunc.predict(pd.DataFrame({"text": sample_texts}), params={"topk": 2, "beam_size": 1})
    assert max(len(labels) for labels in out["labels"]) == 2
    want = in_process(tiny_model, sample_texts, topk=2, beam=1)
    for row, expected in zip(out.itertuples(), want, strict=True):
        assert_same(row.labels, row.scores, expected)


def test_missing_text_column_and_bad_values_are_refused(
    pyfunc: mlflow.pyfunc.PyFuncModel, tiny_model: XmcModel
) -> None:
    with pytest.raises(MlflowException, match="text"):
        pyfunc.predict(pd.DataFrame({"body": ["a document"]}))
    with pytest.raises(InputError, match="no 'text' column"):
        input_texts(pd.DataFrame({"body": ["a document"]}))
    with pytest.raises(InputError, match="row 1: text is a int"):
        input_texts(["fine", 3])
    with pytest.raises(InputError, match="topk=0"):
        XmcPyfuncModel.predict(_loaded(tiny_model), None, ["x"], {"topk": 0})
    with pytest.raises(InputError, match="threshold=2 is not a probability"):
        XmcPyfuncModel.predict(_loaded(tiny_model), None, ["x"], {"threshold": 2})
    with pytest.raises(XmcError, match="uncalibrated"):
        XmcPyfuncModel.predict(_loaded(tiny_model), None, ["x"], {"threshold": 0.5})
    with pytest.raises(InputError, match="row 1: text cannot be encoded as UTF-8"):
        XmcPyfuncModel.predict(_loaded(tiny_model), None, ["fine", "lone \ud800 surrogate"], None)


def test_blank_texts_get_empty_predictions_and_other_input_forms_work(
    pyfunc: mlflow.pyfunc.PyFuncModel, tiny_model: XmcModel
) -> None:
    texts = ["", TEXT, None, "   "]
    out = pyfunc.predict(pd.DataFrame({"text": texts}))
    assert [len(x) for x in out["labels"]] == [0, len(in_process(tiny_model, [TEXT])[0]), 0, 0]
    assert_same(out["labels"][1], out["scores"][1], in_process(tiny_model, [TEXT])[0])
    frame = predict_frame(tiny_model, input_texts({"text": [TEXT]}), None, None)
    assert frame.to_dict("list") == predict_frame(
        tiny_model, input_texts(TEXT), None, None
    ).to_dict("list")


TEXT = "a short document about nothing in particular"


def _loaded(model: XmcModel) -> XmcPyfuncModel:
    wrapper = XmcPyfuncModel()
    wrapper.model = model
    return wrapper


def test_alias_resolves_to_a_cached_local_folder_and_follows_a_moved_alias(
    registry: Registry, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = local_model_dir(f"models:/{MODEL_NAME}@{ALIAS}", registry.cfg)
    assert folder.is_relative_to(WorkDir.of(registry.cfg.work_dir).serving_cache)
    assert (folder / "meta.json").read_bytes() == (tiny_model_dir / "meta.json").read_bytes()
    assert local_model_dir(f"models:/{MODEL_NAME}/1", registry.cfg) == folder

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached copy should have been used")

    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", no_download)
    assert local_model_dir(f"models:/{MODEL_NAME}@{ALIAS}", registry.cfg) == folder
    monkeypatch.undo()

    with tracking(registry.uri):
        client = mlflow.MlflowClient()
        version = mlflow.register_model(registry.model_uri, MODEL_NAME).version
        client.set_registered_model_alias(MODEL_NAME, ALIAS, version)
    try:
        moved = local_model_dir(f"models:/{MODEL_NAME}@{ALIAS}", registry.cfg)
        cache = WorkDir.of(registry.cfg.work_dir).serving_cache
        assert moved.relative_to(cache).parts[0] != folder.relative_to(cache).parts[0]
        assert local_model_dir(f"models:/{MODEL_NAME}/latest", registry.cfg) == moved
    finally:
        with tracking(registry.uri):
            client.set_registered_model_alias(MODEL_NAME, ALIAS, "1")


def test_run_and_logged_model_uris_resolve(registry: Registry, tiny_model_dir: Path) -> None:
    want = (tiny_model_dir / "meta.json").read_bytes()
    for uri in (f"runs:/{registry.run_id}/model", registry.model_uri):
        folder = local_model_dir(uri, registry.cfg)
        assert (folder / "meta.json").read_bytes() == want, uri


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("models:/no-such-model@champion", "no registered model named 'no-such-model'"),
        (f"models:/{MODEL_NAME}@no-such-alias", "has no alias 'no-such-alias'"),
        (f"models:/{MODEL_NAME}/99", "has no version 99"),
        (f"models:/{MODEL_NAME}/Production", "not a version number"),
        ("runs:/0123456789abcdef/model", "no run 0123456789abcdef"),
    ],
)
def test_unknown_references_are_input_errors(registry: Registry, uri: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        local_model_dir(uri, registry.cfg)
    assert err.value.fix


def test_local_folders(tiny_model_dir: Path, tmp_path: Path, registry: Registry) -> None:
    assert local_model_dir(tiny_model_dir, registry.cfg) == tiny_model_dir
    assert local_model_dir(str(tiny_model_dir), registry.cfg) == tiny_model_dir
    shutil.copytree(tiny_model_dir, tmp_path / "mlflow-model" / "artifacts" / "model")
    assert (
        find_model_folder(tmp_path / "mlflow-model")
        == tmp_path / "mlflow-model" / "artifacts" / "model"
    )
    with pytest.raises(InputError, match=r"no model at .*missing \(no such folder\)"):
        local_model_dir(tmp_path / "missing", registry.cfg)
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        InputError, match=r"empty is not an xmc model folder \(.*empty/meta.json is missing\)"
    ):
        local_model_dir(tmp_path / "empty", registry.cfg)


def test_logging_skips_the_environment_scan_its_pins_make_moot(
    registry: Registry, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow's check of a logged model's requirements against the environment (2.6 s per
    process here) is skipped while ours are logged, and put back afterwards: they pin the
    running environment's own versions, so it has nothing to add."""
    from xmc_core.serving.package import SCAN_SITES, log_model

    check = requirements_utils.warn_dependency_requirement_mismatches
    sites = [importlib.import_module(name) for name in SCAN_SITES]
    assert all(site.warn_dependency_requirement_mismatches is check for site in sites)

    scans: list[str] = []  # MLflow turns an error in the check into a warning: record instead
    monkeypatch.setattr(
        requirements_utils, "_init_packages_to_modules_map", lambda: scans.append("scan")
    )
    with tracking(registry.uri):
        experiment = mlflow.get_run(registry.run_id).info.experiment_id
        with mlflow.start_run(experiment_id=experiment):
            info = log_model(tiny_model_dir, registry.cfg)
    assert scans == []
    assert all(site.warn_dependency_requirement_mismatches is check for site in sites)
    check(["numpy"])  # the check itself, put back, still scans
    assert scans == ["scan"]
    with tracking(registry.uri):
        pins = mlflow.pyfunc.get_model_dependencies(info.model_uri)
    lines = Path(pins).read_text().split()
    assert f"numpy=={metadata.version('numpy')}" in lines
    assert f"mlflow=={metadata.version('mlflow')}" in lines


def test_a_requirement_not_installed_is_listed_by_name_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from xmc_core.serving import package

    monkeypatch.setattr(package, "family_requirements", lambda *_: ["no-such-package-xmc"])
    with caplog.at_level("WARNING", logger=package.__name__):
        pins = package.pip_requirements("xr_linear")
    assert pins[-1] == "no-such-package-xmc"
    assert f"numpy=={metadata.version('numpy')}" in pins
    assert caplog.messages == [
        "no-such-package-xmc is not installed here: the logged model requires it without a "
        "version (install it where the model is served)"
    ]
