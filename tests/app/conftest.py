"""Folders the command-line error tests point at: a small text dataset, a bag-of-words one, a
folder that passes for a model folder (its ``meta.json`` alone: every check runs before a model
is loaded) and raw split files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("ds") / "text"
    write_synthetic_dataset(dest, SyntheticSpec().scaled(0.02))
    return dest


@pytest.fixture(scope="session")
def bow_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("xc-src")
    for split in ("train", "test"):
        (src / f"{split}.txt").write_text("2 4 3\n0,1 0:1.0 2:0.5\n2 1:1.0 3:2.0\n")
    dest = src.parent / "bow"
    ingest("xc", src, dest, IngestOptions())
    return dest


@pytest.fixture
def model_like(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"class": "XmcModel"}))
    return folder


@pytest.fixture
def raw_lines(tmp_path: Path) -> Path:
    folder = tmp_path / "raw"
    folder.mkdir()
    for name in ("train_texts.txt", "train_labels.txt", "test_texts.txt", "test_labels.txt"):
        (folder / name).write_text("x\n")
    return folder
