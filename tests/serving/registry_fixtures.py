"""Two tiny models (good, deliberately worse) on one synthetic dataset, registered as four
versions of one model (with that dataset's lineage) in a SQLite registry template that every
test copies.

Versions: 1 worse, 2 good, 3 worse (same folder as 1), 4 good (same folder as 2).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest

from xmc_core.app import commands
from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset

NAME = "xmc-gate"
ALIAS = "champion"
SPEC = SyntheticSpec(
    n_train=300, n_test=100, n_domains=3, topics_per_domain=4, labels_per_topic=6
)  # every test label occurs in train
SMALL = ["tree.branching=4", "tree.max_leaf_size=8"]
WORSE = [*SMALL, "tfidf.max_features=15"]  # 15 terms: a much worse model
VERSIONS = {"1": "worse", "2": "good", "3": "worse", "4": "good"}
_URI_VARIABLES = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


@dataclass(frozen=True)
class Template:
    """A registry with :data:`VERSIONS` registered, and where its artifacts live."""

    db: Path
    artifacts: Path


@contextlib.contextmanager
def global_tracking(uri: str) -> Iterator[None]:
    """MLflow's global tracking and registry URI set to ``uri`` (``log_model`` needs an active
    run), then restored exactly, so the code under test cannot lean on them."""
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    saved = tracking_utils._tracking_uri, registry_utils._registry_uri
    env = {key: os.environ.get(key) for key in _URI_VARIABLES}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(saved[0])
        registry_utils._registry_uri = saved[1]
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def gate_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("gate-data") / "synthetic"
    write_synthetic_dataset(dest, SPEC, rows_per_group=60)
    return dest


@pytest.fixture(scope="module")
def gate_models(gate_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``good`` and ``worse`` XmcModel folders trained on :func:`gate_dataset`."""
    work = tmp_path_factory.mktemp("gate-models")
    out = {}
    for kind, sets in (("good", SMALL), ("worse", WORSE)):
        out[kind] = work / kind
        cfg = XmcConfig.load(None, [f"work_dir={work}", *sets])
        commands.train(gate_dataset, out[kind], cfg)
    return out


@pytest.fixture(scope="module")
def gate_template(
    gate_models: dict[str, Path],
    gate_dataset: Path,
    empty_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Template:
    """The versions are registered as a training run does: with the lineage of their data
    (in a copy of ``empty_store``)."""
    from xmc_core.serving.package import log_model
    from xmc_core.serving.registry.lineage import version_tags

    root = tmp_path_factory.mktemp("gate-registry")
    shutil.copyfile(empty_store, root / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cfg = XmcConfig.load(None, [f"work_dir={root}", f"tracking.uri={uri}"])
    with global_tracking(uri):
        experiment = mlflow.create_experiment("gate", artifact_location=str(root / "artifacts"))
        for version, kind in VERSIONS.items():
            with mlflow.start_run(experiment_id=experiment):
                info = log_model(
                    gate_models[kind], cfg, NAME, version_tags=version_tags(gate_dataset)
                )
            assert str(info.registered_model_version) == version
    return Template(root / "mlflow.db", root / "artifacts")


def registry_config(root: Path, *overrides: str) -> XmcConfig:
    """The config of the registry copied under ``root`` (see :func:`fresh_registry`)."""
    uri = f"sqlite:///{root / 'registry' / 'mlflow.db'}"
    sets = [f"work_dir={root / 'work'}", f"tracking.uri={uri}", f"registry.model_name={NAME}"]
    return XmcConfig.load(None, [*sets, *overrides])


def fresh_registry(template: Template, root: Path) -> XmcConfig:
    """A private copy of the template's database under ``root`` (artifacts shared, read only);
    no alias set yet."""
    (root / "registry").mkdir(parents=True)
    shutil.copyfile(template.db, root / "registry" / "mlflow.db")
    return registry_config(root)
