"""A small synthetic dataset featurized once for the model tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_helpers import Featurized, featurize
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset

SMALL = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=20000"]


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("xr") / "synthetic"
    spec = SyntheticSpec(
        n_train=1500, n_test=400, n_domains=3, topics_per_domain=4, labels_per_topic=10
    )
    write_synthetic_dataset(dest, spec, rows_per_group=500)
    return dest


@pytest.fixture(scope="session")
def small_features(small_dataset: Path) -> Featurized:
    return featurize(Corpus(small_dataset), XmcConfig.load(None, SMALL))
