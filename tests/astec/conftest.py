"""A small synthetic text dataset, featurized, and tiny Astec settings (seconds to train)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import Featurized, featurize, write_small_corpus
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.astec import FAMILY as ASTEC

SETTINGS = list(ASTEC.contract_settings)
"""Tiny Astec settings (seconds to train): the contract test's."""
TINY = ["model.kind=astec", "tracking.enabled=false", "tfidf.max_features=5000", *SETTINGS]


@pytest.fixture(scope="session")
def astec_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("astec") / "synthetic")


@pytest.fixture(scope="session")
def astec_config(tmp_path_factory: pytest.TempPathFactory) -> XmcConfig:
    return XmcConfig.load(None, [*TINY, f"work_dir={tmp_path_factory.mktemp('astec-work')}"])


@pytest.fixture(scope="session")
def astec_features(astec_dataset: Path, astec_config: XmcConfig) -> Featurized:
    return featurize(Corpus(astec_dataset), astec_config)


@pytest.fixture(scope="session")
def trained_astec(astec_dataset: Path, astec_config: XmcConfig) -> dict:
    from xmc_core.families.train import train_in_process

    return train_in_process(Corpus(astec_dataset), astec_config)
