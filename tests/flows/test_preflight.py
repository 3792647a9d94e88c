"""``python -m flows.train|featurize|predict`` check their inputs before Prefect starts: the
dataset of the config or the command line, the family's fit to it, the model, the split and
the output. Starting Prefect fails these tests, so they prove the order."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows import featurize, predict, runtime, train
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.errors import XmcError


@pytest.fixture(autouse=True)
def no_prefect(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    @contextlib.contextmanager
    def started() -> Iterator[str]:
        raise AssertionError("Prefect started before the inputs were checked")
        yield ""

    monkeypatch.setattr(runtime, "prefect_api", started)
    monkeypatch.chdir(tmp_path)


def refused(main: object, *argv: str) -> list[str]:
    with pytest.raises(XmcError) as excinfo:
        main(["--set", "work_dir=work", *argv])  # type: ignore[operator]
    return str(excinfo.value).splitlines()


def test_train_flow_checks_the_configured_dataset(tmp_path: Path, small_corpus: Path) -> None:
    assert refused(train.main, "--set", "data.dataset=nope") == [
        "no dataset at nope (no such folder)",
        "  fix: create it with `xmc ingest FORMAT SRC nope` (or `xmc synth nope`), "
        "or check the path",
    ]
    src = tmp_path / "xc"
    src.mkdir()
    for split in ("train", "test"):
        (src / f"{split}.txt").write_text("1 3 2\n0,1 0:1.0 2:0.5\n")
    ingest("xc", src, tmp_path / "bow", IngestOptions())
    lines = refused(train.main, "--set", "data.dataset=bow", "--set", "model.kind=xr_transformer")
    assert lines[0] == "bow: model.kind xr_transformer needs a raw-text corpus, this one is bow"
    assert refused(train.main, "--set", "data.datset=x")[:2] == [
        "config key data.datset does not exist (in --set data.datset=x)",
        "  did you mean data.dataset?",
    ]


def test_featurize_flow_checks_its_dataset(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "meta.json").write_text(json.dumps({"class": "XmcModel"}))
    assert refused(featurize.main, "model")[0] == (
        "model is not a dataset folder (it is an xmc model folder)"
    )


def test_predict_flow_checks_split_source_and_output(tmp_path: Path, small_corpus: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "meta.json").write_text(json.dumps({"class": "XmcModel"}))
    corpus = str(small_corpus)
    assert refused(predict.main, "model", corpus, "out.parquet", "--split", "dev")[0] == (
        f"{corpus}: has no split 'dev' (a dataset has train and test)"
    )
    assert refused(predict.main, "model", "docs.txt", "out.parquet")[0] == (
        "no input at docs.txt (no such file or folder)"
    )
    (tmp_path / "f").write_text("")
    assert refused(predict.main, "model", corpus, "f/out.parquet")[0] == (
        f"cannot write f/out.parquet ({tmp_path / 'f'} is a file, not a folder)"
    )
    assert refused(predict.main, corpus, corpus, "out.parquet")[0].startswith(
        f"{corpus} is not an xmc model folder (it is a dataset folder"
    )
