"""A small synthetic text dataset and the hierarchical_xc family trained on it (seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import write_small_corpus
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus

PRESET = Path(__file__).resolve().parents[2] / "configs" / "hierarchical-xc.yaml"
TINY = ["tracking.enabled=false", "tfidf.max_features=5000"]


@pytest.fixture(scope="session")
def hxc_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("hxc") / "synthetic")


@pytest.fixture(scope="session")
def hxc_config(tmp_path_factory: pytest.TempPathFactory) -> XmcConfig:
    return XmcConfig.load(PRESET, [*TINY, f"work_dir={tmp_path_factory.mktemp('hxc-work')}"])


@pytest.fixture(scope="session")
def trained(hxc_dataset: Path, hxc_config: XmcConfig) -> dict:
    from xmc_core.families.train import train_in_process

    return train_in_process(Corpus(hxc_dataset), hxc_config)
