"""A tiny trained XR-Linear model, a SQLite MLflow store, and the model registered in it."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest

from tests.serving.registry_fixtures import global_tracking
from xmc_core.app import commands
from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.model.xmc_model import XmcModel

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

MODEL_NAME = "xmc-test"
ALIAS = "champion"
TEXTS = [
    "a short document about nothing in particular",
    "another text with words the model has never seen",
]


@dataclass(frozen=True)
class Registry:
    """A SQLite tracking store with ``MODEL_NAME`` version 1 logged and aliased ``champion``."""

    uri: str
    cfg: XmcConfig
    model_uri: str
    run_id: str


@contextlib.contextmanager
def tracking(uri: str) -> Iterator[None]:
    """Point MLflow's tracking and registry at ``uri`` for the block, then restore them and
    ``$MLFLOW_TRACKING_URI`` exactly (no default store may leak into later tests)."""
    with global_tracking(uri):
        yield


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("serving-data") / "synthetic"
    spec = SyntheticSpec(
        n_train=240, n_test=60, n_domains=2, topics_per_domain=2, labels_per_topic=5
    )
    write_synthetic_dataset(dest, spec, rows_per_group=100)
    return dest


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("serving-model")
    sets = [f"work_dir={work}", "tree.branching=2", "tree.max_leaf_size=4"]
    commands.train(tiny_dataset, work / "model", XmcConfig.load(None, sets))
    return work / "model"


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> XmcModel:
    return XmcModel.load(tiny_model_dir)


@pytest.fixture(scope="session")
def sample_texts(tiny_dataset: Path) -> list[str]:
    """Held-out texts of the corpus plus texts without known words."""
    import pyarrow.parquet as pq

    return pq.read_table(tiny_dataset / "test.parquet").column("text").to_pylist()[:20] + TEXTS


@pytest.fixture(scope="session")
def registry(
    tiny_model_dir: Path, empty_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Registry:
    from xmc_core.serving.package import log_model

    root = tmp_path_factory.mktemp("mlflow")
    shutil.copyfile(empty_store, root / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cfg = XmcConfig.load(None, [f"work_dir={root / 'work'}", f"tracking.uri={uri}"])
    with tracking(uri):
        experiment = mlflow.create_experiment("xmc-test", artifact_location=str(root / "art"))
        with mlflow.start_run(experiment_id=experiment):
            info = log_model(tiny_model_dir, cfg, registered_model_name=MODEL_NAME)
        mlflow.MlflowClient().set_registered_model_alias(MODEL_NAME, ALIAS, "1")
    return Registry(uri, cfg, info.model_uri, str(info.run_id))


def in_process(
    model: XmcModel, texts: list[str], topk: int | None = None, beam: int | None = None
) -> list[list[tuple[str, float]]]:
    """The reference: ``XmcModel.predict`` + ``top_labels`` in this process."""
    return model.top_labels(model.predict(texts, topk, beam))


def assert_same(got_labels: list, got_scores: list, want: list[tuple[str, float]]) -> None:
    """Labels equal (same order), scores equal to float32 precision."""
    assert list(got_labels) == [name for name, _ in want]
    assert list(got_scores) == pytest.approx([s for _, s in want], rel=1e-6, abs=1e-7)
