"""Paths said in words, and refused before any work: ``xmc train/evaluate/predict/serve/info``
through the real entry point. Training is made to fail loudly if it is reached, so a test that
passes proves the check ran first; nothing may be created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xmc_core.app.cli import main

FIX_MODEL = "  fix: give the folder written by `xmc train` (or the train flow), or check the path"


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Training or loading a model fails the test; the work dir is a fresh path in tmp_path."""

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("the work started before the inputs were checked")

    monkeypatch.setattr("xmc_core.app.commands.train_handles", reached)
    monkeypatch.setattr("xmc_core.app.commands.XmcModel.load", reached)
    monkeypatch.chdir(tmp_path)


def error_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


def test_missing_model_folder(capsys: pytest.CaptureFixture[str], dataset: Path) -> None:
    for argv in (
        ["predict", "/tmp/xmc-no-such-model", "docs.txt", "out.jsonl"],
        ["evaluate", "/tmp/xmc-no-such-model", str(dataset)],
        ["serve", "/tmp/xmc-no-such-model"],
    ):
        assert error_lines(capsys, *argv) == [
            "error: no model at /tmp/xmc-no-such-model (no such folder)",
            FIX_MODEL,
        ]


def test_a_dataset_or_a_part_given_as_the_model(
    capsys: pytest.CaptureFixture[str], dataset: Path, tmp_path: Path
) -> None:
    assert error_lines(capsys, "evaluate", str(dataset), str(dataset)) == [
        f"error: {dataset} is not an xmc model folder "
        "(it is a dataset folder: manifest.json, no meta.json)",
        f"  fix: give a model folder; to train one on this dataset: xmc train {dataset} MODEL_DIR",
    ]
    part = tmp_path / "ranker"
    part.mkdir()
    (part / "meta.json").write_text(json.dumps({"class": "XRLinearModel"}))
    assert error_lines(capsys, "predict", str(part), "-", "-") == [
        f"error: {part} is not an xmc model folder "
        f"({part / 'meta.json'} names a saved XRLinearModel, "
        "a part of a model or another artifact)",
        "  fix: give the model folder (the one whose meta.json says XmcModel)",
    ]
    (tmp_path / "empty").mkdir()
    assert error_lines(capsys, "serve", str(tmp_path / "empty")) == [
        f"error: {tmp_path / 'empty'} is not an xmc model folder "
        f"({tmp_path / 'empty' / 'meta.json'} is missing)",
        FIX_MODEL,
    ]


def test_dataset_paths(
    capsys: pytest.CaptureFixture[str], model_like: Path, raw_lines: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    assert error_lines(capsys, "info", str(missing)) == [
        f"error: no dataset at {missing} (no such folder)",
        f"  fix: create it with `xmc ingest FORMAT SRC {missing}` (or `xmc synth {missing}`), "
        "or check the path",
    ]
    assert error_lines(capsys, "evaluate", str(model_like), str(raw_lines)) == [
        f"error: {raw_lines} is not a dataset folder (it holds raw lines files, no manifest.json)",
        f"  fix: import them first: xmc ingest lines {raw_lines} DATASET_DIR",
    ]
    assert error_lines(capsys, "evaluate", str(model_like), str(model_like)) == [
        f"error: {model_like} is not a dataset folder (it is an xmc model folder)",
        "  fix: give a dataset folder made by `xmc ingest` (in `xmc evaluate` and `xmc predict` "
        "the model comes first)",
    ]


def test_predict_checks_source_split_and_output_before_loading(
    capsys: pytest.CaptureFixture[str], model_like: Path, dataset: Path, tmp_path: Path
) -> None:
    model = str(model_like)
    assert error_lines(capsys, "predict", model, "docs.txt", "out.jsonl") == [
        "error: no input at docs.txt (no such file or folder)",
        "  fix: give a dataset folder, a text file (one document a line), or - for stdin",
    ]
    assert error_lines(capsys, "predict", model, str(dataset), "o.jsonl", "--split", "dev") == [
        f"error: {dataset}: has no split 'dev' (a dataset has train and test)",
        "  fix: pass --split train or --split test",
    ]
    assert error_lines(capsys, "evaluate", model, str(dataset), "--split", "dev")[0] == (
        f"error: {dataset}: has no split 'dev' (a dataset has train and test)"
    )
    assert error_lines(capsys, "predict", model, str(dataset), str(tmp_path)) == [
        f"error: cannot write {tmp_path} (it is a folder)",
        f"  fix: give a file name, e.g. {tmp_path / 'predictions.jsonl'}",
    ]
    (tmp_path / "a-file").write_text("")
    assert error_lines(capsys, "predict", model, str(dataset), "a-file/out.jsonl") == [
        f"error: cannot write a-file/out.jsonl ({tmp_path / 'a-file'} is a file, not a folder)",
        "  fix: choose another path",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "model"]


def test_train_refuses_before_any_work(
    capsys: pytest.CaptureFixture[str], dataset: Path, bow_dataset: Path, tmp_path: Path
) -> None:
    work = ["--set", f"work_dir={tmp_path / 'work'}"]
    assert error_lines(capsys, "train", str(tmp_path / "nope"), "m", *work)[0] == (
        f"error: no dataset at {tmp_path / 'nope'} (no such folder)"
    )
    (tmp_path / "m").mkdir()
    assert error_lines(capsys, "train", str(dataset), "m", *work) == [
        "error: m already exists",
        "  fix: pass --overwrite to replace it, or choose another folder",
    ]
    (tmp_path / "a-file").write_text("")
    assert error_lines(capsys, "train", str(dataset), "a-file/m", *work) == [
        f"error: cannot write a-file/m ({tmp_path / 'a-file'} is a file, not a folder)",
        "  fix: choose another path",
    ]
    xrt = ["--set", "model.kind=xr_transformer"]
    assert error_lines(capsys, "train", str(bow_dataset), "new", *work, *xrt) == [
        f"error: {bow_dataset}: model.kind xr_transformer needs a raw-text corpus, this one is bow",
        "  fix: pass a text dataset, or set model.kind=xr_linear",
    ]
    assert error_lines(capsys, "train", str(dataset), "new", "--set", "tree.branching=3")[0] == (
        "error: tree.branching=3 must be a power of two (in --set tree.branching=3)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "m"]  # no work dir, no model
    assert list((tmp_path / "m").iterdir()) == []
