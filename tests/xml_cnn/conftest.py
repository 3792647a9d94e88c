"""A small synthetic text dataset, featurized, and tiny XML-CNN settings (seconds to train)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import Featurized, featurize, write_small_corpus
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus

TINY = [
    "model.kind=xml_cnn", "tracking.enabled=false", "tree.branching=4", "tree.max_leaf_size=8",
    "tfidf.max_features=5000", "xml_cnn.embedding_init=random", "xml_cnn.embedding_dim=64",
    "xml_cnn.num_filters=32", "xml_cnn.hidden_dim=128", "xml_cnn.max_length=64",
    "xml_cnn.epochs=10", "xml_cnn.batch_size=16", "xml_cnn.lr=0.003", "xml_cnn.dropout=0.2",
    "xml_cnn.threads=1",
]  # fmt: skip


@pytest.fixture(scope="session")
def cnn_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("cnn") / "synthetic")


@pytest.fixture(scope="session")
def cnn_config(tmp_path_factory: pytest.TempPathFactory) -> XmcConfig:
    return XmcConfig.load(None, [*TINY, f"work_dir={tmp_path_factory.mktemp('cnn-work')}"])


@pytest.fixture(scope="session")
def cnn_features(cnn_dataset: Path, cnn_config: XmcConfig) -> Featurized:
    return featurize(Corpus(cnn_dataset), cnn_config)


@pytest.fixture(scope="session")
def trained_flat(cnn_dataset: Path, cnn_config: XmcConfig) -> dict:
    from xmc_core.families.train import train_in_process

    return train_in_process(Corpus(cnn_dataset), cnn_config)
