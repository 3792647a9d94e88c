"""The whole model lifecycle on real servers on 127.0.0.1.

A Prefect server, an MLflow tracking server and a Prefect process worker run as subprocesses;
the retrain flow is deployed from ``prefect.yaml`` exactly as the README says. Corpus drops land
in the landing folder and each deployment run takes them in, retrains, registers and promotes:

1. a weak corpus (half the training labels shuffled): version 1, champion (no champion yet);
2. the clean corpus: version 2, better on the same held-out split, so the alias moves;
3. a garbage corpus (every training label shuffled) plus a malformed drop: version 3 is
   registered but worse, so the alias stays; the malformed drop is quarantined with its reason;
4. the champion served over HTTP answers what the model answers in process.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mlflow import MlflowClient

from tests.corpus.helpers import parquet_drop
from tests.integration.servers import (
    BIN,
    REPO,
    background,
    base_env,
    free_port,
    mlflow_server,
    prefect_server,
    wait_http,
)
from tests.prefect_db import seed_home
from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset

MODEL = "xmc-it"
SPEC = SyntheticSpec(n_train=500, n_test=150, n_domains=3, topics_per_domain=3, labels_per_topic=6)


class Stack:
    """The running servers and the folders the test uses."""

    def __init__(self, env: dict[str, str], work: Path, logs: Path, mlflow_uri: str) -> None:
        self.env, self.work, self.logs, self.mlflow_uri = env, work, logs, mlflow_uri
        self.landing = work / "landing"
        self.client = MlflowClient(tracking_uri=mlflow_uri)

    def run(self, *overrides: str) -> None:
        """Trigger the deployed retrain flow and wait for it; fail with the worker's log."""
        params = ["work_dir=" + str(self.work), f"registry.model_name={MODEL}", *overrides]
        cmd = [
            str(BIN / "prefect"), "deployment", "run", "retrain/retrain",
            "--param", f"overrides={json.dumps(params)}", "--watch",
            "--watch-timeout", "900",
        ]  # fmt: skip
        done = subprocess.run(cmd, env=self.env, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0 or "Completed" not in done.stdout:
            worker = (self.logs / "worker.log").read_text()[-6000:]
            out = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            pytest.fail(f"retrain run failed:\n{out}\n{worker}")

    def champion(self) -> str:
        return self.client.get_model_version_by_alias(MODEL, "champion").version

    def versions(self) -> dict[str, dict[str, str]]:
        return {v.version: v.tags for v in self.client.search_model_versions(f"name='{MODEL}'")}


def shuffled(table: pa.Table, fraction: float, seed: int) -> pa.Table:
    """``table`` with the labels of ``fraction`` of its rows permuted among those rows."""
    rng = np.random.default_rng(seed)
    labels = table.column("labels").to_pylist()
    rows = rng.choice(len(labels), int(fraction * len(labels)), replace=False)
    for i, j in zip(rows, rng.permutation(rows), strict=True):
        labels[i], labels[j] = labels[j], labels[i]
    idx = table.schema.get_field_index("labels")
    column = pa.array(labels, table.schema.field("labels").type)
    return table.set_column(idx, table.schema.field("labels"), column)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, prefect_template: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("lifecycle")
    logs = root / "logs"
    logs.mkdir()
    env = base_env(seed_home(root / "prefect-home", prefect_template))
    with prefect_server(env, logs) as api, mlflow_server(env, root / "mlflow", logs) as uri:
        env |= {"PREFECT_API_URL": api, "MLFLOW_TRACKING_URI": uri, "XMC_PROJECT_DIR": str(REPO)}
        prefect = str(BIN / "prefect")
        for cmd in (
            [prefect, "work-pool", "create", "xmc-process", "--type", "process"],
            [prefect, "--no-prompt", "deploy", "--name", "retrain"],
        ):
            done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout + done.stderr
        worker = [prefect, "worker", "start", "--pool", "xmc-process", "--limit", "1"]
        with background(worker, env, logs / "worker.log"):
            yield Stack(env, root / "work", logs, uri)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pa.Table]:
    dest = tmp_path_factory.mktemp("clean") / "synthetic"
    write_synthetic_dataset(dest, SPEC, rows_per_group=200)
    return {s: pq.read_table(dest / f"{s}.parquet") for s in ("train", "test")}


def test_retrain_registers_and_promotes_only_better_models(
    stack: Stack, corpus: dict[str, pa.Table]
) -> None:
    train, test = corpus["train"], corpus["test"]
    replace = "retrain.mode=replace"

    parquet_drop(stack.landing, "weak", shuffled(train, 0.6, seed=1), test)
    stack.run(replace)
    assert set(stack.versions()) == {"1"} and stack.champion() == "1"
    assert not any(stack.landing.iterdir())  # taken in and archived

    parquet_drop(stack.landing, "clean", train, test)
    stack.run(replace)
    tags = stack.versions()["2"]
    assert stack.champion() == "2", tags
    assert tags["xmc.promotion.decision"] == "promoted"
    assert float(tags["xmc.promotion.new"]) > float(tags["xmc.promotion.champion"])

    parquet_drop(stack.landing, "garbage", shuffled(train, 1.0, seed=2), test)
    bad = stack.landing / "broken"
    bad.mkdir()
    for split in ("train", "test"):
        (bad / f"{split}_texts.txt").write_text("one doc\nanother doc\n")
        (bad / f"{split}_labels.txt").write_text("a\nb\n")
    (bad / "train_labels.txt").write_text("a\n")  # one line short
    stack.run(replace)
    tags = stack.versions()["3"]
    assert stack.champion() == "2", tags
    assert tags["xmc.promotion.decision"] != "promoted"
    assert float(tags["xmc.promotion.new"]) < float(tags["xmc.promotion.champion"])
    reasons = list((stack.work / "quarantine").glob("*broken*/REASON.txt"))
    assert len(reasons) == 1 and "line counts differ" in reasons[0].read_text()

    for version, tags in stack.versions().items():  # tracked test metrics = promotion figure
        run = stack.client.get_run(stack.client.get_model_version(MODEL, version).run_id)
        assert run.data.params["registry.model_name"] == MODEL
        assert {"train.P_at_1", "test.nDCG_at_3", "test.PSP_at_5"} <= set(run.data.metrics)
        assert run.data.metrics["test.P_at_1"] == pytest.approx(float(tags["xmc.promotion.new"]))


def test_champion_served_over_http_equals_in_process(
    stack: Stack, corpus: dict[str, pa.Table]
) -> None:
    from xmc_core.model.xmc_model import XmcModel
    from xmc_core.serving.resolve import local_model_dir

    cfg = XmcConfig.load(None, [f"work_dir={stack.work}", f"tracking.uri={stack.mlflow_uri}"])
    texts = corpus["test"].column("text").to_pylist()[:20]
    model = XmcModel.load(local_model_dir(f"models:/{MODEL}@champion", cfg))
    expected = model.top_labels(model.predict(texts, topk=5))
    port = free_port()
    cmd = [
        str(BIN / "xmc"), "serve", f"models:/{MODEL}@champion", "--port", str(port),
        "--set", f"work_dir={stack.work}",
    ]  # fmt: skip
    with background(cmd, stack.env, stack.logs / "serve.log") as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health", proc, stack.logs / "serve.log", timeout=120)
        body = json.dumps({"texts": texts, "topk": 5}).encode()
        req = urllib.request.Request(
            f"{url}/predict", body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            got = json.load(resp)["predictions"]
    assert [p["labels"] for p in got] == [[n for n, _ in row] for row in expected]
    for p, row in zip(got, expected, strict=True):
        np.testing.assert_allclose(p["scores"], [s for _, s in row], rtol=1e-5, atol=1e-6)
