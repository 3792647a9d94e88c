"""A small synthetic text dataset, featurized, plus a tiny random BERT trained on its texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import Featurized, featurize
from tests.transformer.tiny import build_tiny_encoder
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.families.xr_transformer import CONTRACT_SETTINGS

SMALL = [s for s in CONTRACT_SETTINGS if not s.startswith("encoder.path=")]
"""XR-Transformer's contract settings, less the encoder's folder."""


@pytest.fixture(scope="session")
def tx_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("xrt") / "synthetic"
    spec = SyntheticSpec(
        n_train=400, n_test=100, n_domains=2, topics_per_domain=4, labels_per_topic=6
    )
    write_synthetic_dataset(dest, spec, rows_per_group=200)
    return dest


@pytest.fixture(scope="session")
def tx_encoder_dir(tmp_path_factory: pytest.TempPathFactory, tx_dataset: Path) -> Path:
    texts = Corpus(tx_dataset).read_split("train", ["text"]).column("text").to_pylist()
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny") / "bert", texts)


@pytest.fixture(scope="session")
def tx_config(tx_encoder_dir: Path) -> XmcConfig:
    return XmcConfig.load(None, [*SMALL, f"encoder.path={tx_encoder_dir}"])


@pytest.fixture(scope="session")
def tx_features(tx_dataset: Path, tx_config: XmcConfig) -> Featurized:
    return featurize(Corpus(tx_dataset), tx_config)
