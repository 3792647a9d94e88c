"""The model contract, for every registered family (the built-ins and the tests' own toy family):
``fit`` returns self, save -> load -> predict is identical, the config round-trips, a corrupt or
foreign folder is refused naming the file, the family trains through the CLI and through the flow
(the same seed: the same output), and predicts through the pyfunc and ``xmc serve``."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest

from tests.cli_helpers import xmc
from tests.integration.servers import background, free_port, wait_http
from tests.model import toy_family
from tests.model.plugin_dist import installed
from tests.model_helpers import split_texts, write_small_corpus
from tests.serving.registry_fixtures import global_tracking
from tests.transformer.tiny import build_tiny_encoder
from xmc_core.app.predictions import ranked_lists
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError, PathError
from xmc_core.families.train import train_in_process
from xmc_core.model import registry
from xmc_core.model.xmc_model import XmcModel

FAMILIES = [*registry.family_names(), toy_family.NAME]
"""Every family the registry finds (the built-ins' entry points) and the tests' own plug-in."""
SMALL = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=5000",
         "calibration.fraction=0.25", "calibration.min_docs=20"]  # fmt: skip
"""Small trees; a quarter of the training documents carved out to calibrate on."""


@pytest.fixture(scope="module", autouse=True)
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The toy family installed as a plug-in (its entry point) here and in every child process
    (CLI, pyfunc, ``xmc serve``)."""
    target = f"{toy_family.__name__}:FAMILY"
    with installed(tmp_path_factory.mktemp("site"), "xmc_toy", {toy_family.NAME: target}):
        yield


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_small_corpus(tmp_path_factory.mktemp("contract") / "synthetic")


@pytest.fixture(scope="module")
def encoder_dir(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = Corpus(dataset).read_split("train", ["text"]).column("text").to_pylist()
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny") / "bert", texts)


def overrides(kind: str, work: Path, encoder: Path) -> list[str]:
    """The contract's settings of family ``kind``: the shared small ones, then the family's own
    (``Family.contract_settings``)."""
    sets = [f"work_dir={work}", f"model.kind={kind}", "tracking.enabled=false", *SMALL]
    return sets + [
        s.replace("{encoder}", str(encoder)) for s in registry.family(kind).contract_settings
    ]


@pytest.fixture(scope="module", params=FAMILIES)
def trained(
    request: pytest.FixtureRequest, dataset: Path, encoder_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, XmcConfig, dict[str, Any]]:  # fmt: skip
    kind = request.param
    cfg = XmcConfig.load(None, overrides(kind, tmp_path_factory.mktemp(kind), encoder_dir))
    return kind, cfg, train_in_process(Corpus(dataset), cfg)


def texts(dataset: Path, n: int = 30) -> list[str | None]:
    return split_texts(dataset, "test", n)


def test_family_is_registered_with_real_sections(trained: tuple) -> None:
    kind, _, outputs = trained
    family = registry.family(kind)
    assert family.name == kind and outputs["model"].family == kind
    assert set(family.sections) <= set(XmcConfig.model_fields)
    assert outputs["evaluation"].values["P@1"] >= 0.5, outputs["evaluation"].values
    assert outputs["model"].calibrator is not None  # calibration: a stage of every family
    assert 0 <= outputs["evaluation"].values["ECE@5"] <= 1


def test_fit_returns_self(trained: tuple, tmp_path: Path) -> None:
    _, _, outputs = trained
    outputs["model"].save(tmp_path / "m")  # a copy: the fixture's model stays as trained
    ranker, train = XmcModel.load(tmp_path / "m", device="cpu").ranker, outputs["model_train"]
    assert ranker.fit(train.X, train.Y, getattr(ranker, "tree_", None)) is ranker
    assert ranker.predict(train.X[:10]).shape == (10, len(outputs["model"].labels))


def test_save_load_predict_identical(trained: tuple, dataset: Path, tmp_path: Path) -> None:
    _, _, outputs = trained
    model = outputs["model"]
    model.save(tmp_path / "m")
    loaded = XmcModel.load(tmp_path / "m", device="cpu")
    assert type(loaded.ranker) is type(model.ranker)
    assert type(loaded.encoder) is type(model.encoder)
    a, b = model.predict(texts(dataset)), loaded.predict(texts(dataset))
    assert a.nnz > 0 and (a != b).nnz == 0
    assert (model.probabilities(a) != loaded.probabilities(b)).nnz == 0


def test_config_round_trips(trained: tuple, tmp_path: Path) -> None:
    _, cfg, _ = trained
    (tmp_path / "cfg.yaml").write_text(cfg.to_yaml())
    assert XmcConfig.load(tmp_path / "cfg.yaml") == cfg


def test_corrupt_or_foreign_folder_is_refused(trained: tuple, tmp_path: Path) -> None:
    _, _, outputs = trained
    outputs["model"].save(tmp_path / "m")
    ranker_files = sorted(p for p in (tmp_path / "m" / "ranker").rglob("*.npz"))
    damaged = ranker_files[-1]
    damaged.write_bytes(damaged.read_bytes()[:40])
    with pytest.raises(ArtifactError, match=re.escape(damaged.name)):
        XmcModel.load(tmp_path / "m", device="cpu")
    with pytest.raises(PathError, match=r"labels/meta\.json names a saved LabelIndex"):  # a part
        XmcModel.load(tmp_path / "m" / "labels")
    outputs["model"].save(tmp_path / "n")
    meta_path = tmp_path / "n" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "ranker": "os.system"}))
    with pytest.raises(ArtifactError, match=r"meta\.json.*class 'os\.system'"):
        XmcModel.load(tmp_path / "n")  # a folder never chooses what code is imported


def test_trains_and_predicts_through_the_cli(
    trained: tuple, dataset: Path, encoder_dir: Path, tmp_path: Path
) -> None:
    kind, _, outputs = trained
    sets = [a for s in overrides(kind, tmp_path / "work", encoder_dir) for a in ("--set", s)]
    done = xmc("train", str(dataset), str(tmp_path / "model"), *sets)
    assert done.returncode == 0, done.stderr
    p1 = f"P@1 {100 * outputs['evaluation'].values['P@1']:.2f}%"  # the summary's test line
    assert re.search(rf"^  test +{re.escape(p1)} ", done.stdout, re.M), done.stdout
    assert json.loads((tmp_path / "model" / "meta.json").read_text())["family"] == kind
    (tmp_path / "docs.txt").write_text("\n".join(t or "" for t in texts(dataset, 5)) + "\n")
    done = xmc("predict", str(tmp_path / "model"), str(tmp_path / "docs.txt"), "-")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    scores = outputs["model"].predict(texts(dataset, 5))
    want = outputs["model"].top_labels(scores)
    assert [r["labels"] for r in rows] == [[n for n, _ in w] for w in want]
    probs = ranked_lists(outputs["model"], scores)["probabilities"]
    for r, p in zip(rows, probs, strict=True):  # another process: equal to 1e-4
        assert r["probabilities"] == pytest.approx(p, abs=1e-4)


@pytest.mark.usefixtures("prefect_server")
def test_trains_through_the_flow(trained: tuple, dataset: Path, tmp_path: Path) -> None:
    """The flow trains the family again with the same config (the same seeds), in this process:
    the same metrics and identical predictions. (Another process may run torch with other
    threads, whose float sums differ in the last bits: `xmc train` above is compared on its top
    labels and printed P@1.)"""
    from flows.runtime import configured, prefect_api
    from flows.train import train_pipeline

    kind, cfg, outputs = trained
    cfg = cfg.model_copy(
        update={"work_dir": tmp_path, "data": cfg.data.model_copy(update={"dataset": dataset})}
    )
    with prefect_api():
        state = configured(train_pipeline, cfg, use_dask=False)(cfg, return_state=True)
    assert state.is_completed(), state.message
    got = state.result()
    metrics = json.loads((Path(got["evaluation"]) / "metrics.json").read_text())
    assert metrics == pytest.approx(outputs["evaluation"].values), kind
    flow_model = XmcModel.load(got["model"], device="cpu")
    some = texts(dataset)
    assert (flow_model.predict(some) != outputs["model"].predict(some)).nnz == 0


def register_and_promote(model_dir: Path, cfg: XmcConfig, dataset: Path) -> str:
    """Log ``model_dir`` in ``cfg``'s store, register it, give it the alias through the gate
    (the first version of a model: promoted); returns the ``models:/NAME@ALIAS`` URI."""
    from xmc_core.serving.package import log_model
    from xmc_core.serving.registry.promotion import promote_gated

    with global_tracking(cfg.tracking_uri()):
        where = (cfg.work_dir / "mlflow-artifacts").as_uri()  # never ./mlruns
        experiment = mlflow.create_experiment("contract", artifact_location=where)
        with mlflow.start_run(experiment_id=experiment):
            log_model(model_dir, cfg, registered_model_name=cfg.registry.model_name)
        decision = promote_gated(cfg, "1", dataset)
    assert decision.promoted, decision
    return f"models:/{cfg.registry.model_name}@{cfg.registry.alias}"


def test_registers_promotes_serves_and_loads_in_the_pyfunc(
    trained: tuple, dataset: Path, empty_store: Path, tmp_path: Path
) -> None:
    """The gated promotion, the pyfunc and ``xmc serve`` (real HTTP) take every family from
    the MLflow registry, with the predictions of the model as trained."""
    _, cfg, outputs = trained
    outputs["model"].save(tmp_path / "m")
    shutil.copyfile(empty_store, tmp_path / "mlflow.db")
    sets = [f"work_dir={tmp_path}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    cfg = XmcConfig.load(None, [*sets, "registry.model_name=contract"])
    uri = register_and_promote(tmp_path / "m", cfg, dataset)
    some = [t for t in texts(dataset, 10) if t]
    want = outputs["model"].top_labels(outputs["model"].predict(some))
    with global_tracking(cfg.tracking_uri()):
        out = mlflow.pyfunc.load_model(uri).predict(pd.DataFrame({"text": some}))
    assert [list(labels) for labels in out["labels"]] == [[n for n, _ in w] for w in want]
    assert all(len(p) == len(n) for p, n in zip(out["probabilities"], out["labels"], strict=True))
    assert registry.family(toy_family.NAME) is toy_family.FAMILY
    port = free_port()
    cmd = [sys.executable, "-m", "xmc_core.app.cli", "serve", uri, "--port", str(port)]
    cmd += ["--set", sets[0], "--set", sets[1]]  # from the repository root, as `xmc` above
    with background(cmd, dict(os.environ), tmp_path / "serve.log") as proc:
        wait_http(f"http://127.0.0.1:{port}/health", proc, tmp_path / "serve.log")
        body = json.dumps({"texts": some}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/predict", body, {"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            served = json.loads(response.read())["predictions"]
    assert [p["labels"] for p in served] == [[n for n, _ in w] for w in want]
    assert all(len(p["probabilities"]) == len(p["labels"]) for p in served)
