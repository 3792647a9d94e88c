"""A small synthetic text dataset and tiny NeuralXC settings (seconds to train)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import write_small_corpus
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.neural_xc import FAMILY as NEURAL_XC

NXC_SMALL = list(NEURAL_XC.contract_settings)
"""Sized for the contract's 300-document corpus: the reference widths and lr 3e-4 need far more
steps than its 19 batches an epoch to leave the label prior."""
TINY = ["model.kind=neural_xc", "tracking.enabled=false", "tfidf.max_features=5000", *NXC_SMALL]


@pytest.fixture(scope="session")
def nxc_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("nxc") / "synthetic")


@pytest.fixture(scope="session")
def nxc_config(tmp_path_factory: pytest.TempPathFactory) -> XmcConfig:
    return XmcConfig.load(None, [*TINY, f"work_dir={tmp_path_factory.mktemp('nxc-work')}"])


@pytest.fixture(scope="session")
def trained(nxc_dataset: Path, nxc_config: XmcConfig) -> dict:
    from xmc_core.families.train import train_in_process

    return train_in_process(Corpus(nxc_dataset), nxc_config)
