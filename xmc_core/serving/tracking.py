"""MLflow tracking of a training run: one run with the configuration, the metrics, the files and
the model; then, when the registry is on, the model registered as a version.

``track_run`` records one MLflow run per training run (``xmc train --track`` or the ``train``
flow, through the lifecycle's ``tracking`` stage): the full configuration as parameters, the
metrics of every split, the per-level diagnostics and the stage times as metrics, fingerprints
(and the Prefect flow run, given as ``links``) as tags, the corpus as dataset inputs, the
evaluation and diagnostics files and plots as artifacts, and the model itself
(:func:`~xmc_core.serving.package.log_model`). A process killed inside the run leaves it
RUNNING; ``serving.registry.reconcile`` closes it. ``register_tracked`` (the ``registration``
stage, after the run has ended) registers the logged model as a version, or takes the version
that holds an identical model already (so a rerun of the stage adds none), and describes it
(:mod:`xmc_core.serving.run_lineage`). The global MLflow tracking URI is set only for the
duration of each call and restored after.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.evaluation.report import read_json
from xmc_core.model.layout import model_layout
from xmc_core.serving.registry.store import sqlite_path, tracking_client
from xmc_core.serving.run_lineage import describe_version, log_dataset_inputs, version_description
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.fingerprint import code_fingerprint, path_fingerprint

MAX_PARAM_LENGTH = 500
"""Longest parameter value logged (MLflow's historical limit; longer values are cut)."""
MLFLOW_REPORT_DIR = "report"
"""Where the run report goes in the MLflow run."""
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_.\-/ ]")
_REPO_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def flatten_config(cfg: XmcConfig) -> dict[str, str]:
    """Every config value under its dotted key (``tree.branching``): strings as they are,
    other values as JSON (``true``, ``null``, ``[1, 3, 5]``), cut to ``MAX_PARAM_LENGTH``."""
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
            return
        text = value if isinstance(value, str) else json.dumps(value)
        flat[prefix] = (
            text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
        )

    walk("", cfg.model_dump(mode="json"))
    return flat


def metric_key(name: str) -> str:
    """An MLflow-safe key: ``test.P@1`` -> ``test.P_at_1``; other characters MLflow refuses
    become ``_``."""
    return _UNSAFE_KEY.sub("_", name.replace("@", "_at_"))


def split_metrics(eval_dirs: Mapping[str, str | Path]) -> dict[str, dict[str, float]]:
    """``{split: metrics.json of its evaluation folder}``."""
    return {split: read_json(Path(d) / "metrics.json") for split, d in eval_dirs.items()}


@contextmanager
def tracking_uri_scope(uri: str) -> Iterator[str]:
    """Set MLflow's global tracking URI (and ``$MLFLOW_TRACKING_URI``, which mlflow sets with
    it) for the block; restore both afterwards."""
    import mlflow
    from mlflow.tracking._tracking_service import utils as tracking_utils

    previous = getattr(tracking_utils, "_tracking_uri", None)
    previous_env = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield uri
    finally:
        mlflow.set_tracking_uri(previous)
        if previous_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = previous_env


def experiment_id(client: Any, name: str, tracking_uri: str) -> str:
    """Id of experiment ``name``, created if missing (restored if deleted). With a SQLite
    store its artifacts go to ``artifacts/`` beside the database, not ``./mlruns``."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is None:
        db = sqlite_path(tracking_uri)
        location = None if db is None else (db.parent / "artifacts").resolve().as_uri()
        try:
            return client.create_experiment(name, artifact_location=location)
        except MlflowException:  # created meanwhile by a concurrent run
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage == "deleted":
        client.restore_experiment(found.experiment_id)
    return found.experiment_id


def reconcile_before_run(cfg: XmcConfig, client: Any, experiment: str) -> list[str]:
    """Repair what an earlier run killed half-way left (one line per repair): with the registry
    on, ``xmc_core.serving.registry.reconcile`` (stuck runs, undecided versions, the alias
    holder's decision); else only the runs of ``experiment`` stuck RUNNING by a process that is
    gone."""
    from xmc_core.serving.registry.reconcile import close_stuck_runs, reconcile

    if cfg.registry.enabled:
        return reconcile(cfg, [experiment])
    return close_stuck_runs(client, [], [experiment], datetime.now(UTC).isoformat())


def run_url(tracking_uri: str, experiment: str, run_id: str) -> str | None:
    """The run's page in the MLflow UI when the store is a tracking server."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}"
    return None


def run_tags(
    cfg: XmcConfig, model_dir: str | Path, corpus_dir: str | Path, links: Mapping[str, str]
) -> dict[str, str]:
    """Fingerprints of config, data and code, the model kind and folder, the git commit, and
    ``links`` (the Prefect flow run of a flow's run, ``{}`` for ``xmc train``)."""
    folder = Path(model_dir)
    kind = model_layout(folder, read_meta(folder, "XmcModel", verify=False))["family"]
    tags = {
        "xmc.config_fingerprint": cfg.fingerprint(),
        "xmc.data_fingerprint": path_fingerprint(corpus_dir),
        "xmc.code_version": code_fingerprint(),
        "xmc.model_kind": str(kind),
        "xmc.model_dir": str(model_dir),
    }
    commit = _git("rev-parse", "HEAD")
    if commit:
        tags["xmc.git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
        tags["xmc.git_dirty"] = str(bool(_git("status", "--porcelain", "--untracked-files=no")))
    return tags | dict(links)


def _git(*args: str) -> str:
    """Output of a git command in the project's checkout, "" when git or the checkout is absent."""
    try:
        done = subprocess.run(
            ["git", "-C", str(_REPO_ROOT), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def run_metrics(
    eval_dirs: Mapping[str, str | Path],
    timings: Mapping[str, float],
    diagnostics: Mapping[str, Any],
) -> list[tuple[str, float, int]]:
    """(key, value, step): split metrics (``test.P_at_1``), stage times (``time.<stage>_s``),
    per tree level (step = level) beam recall and ranker loss, the matcher's loss (step = its
    training step)."""
    out = [
        (metric_key(f"{split}.{name}"), float(value), 0)
        for split, values in split_metrics(eval_dirs).items()
        for name, value in values.items()
    ]
    out += [(metric_key(f"time.{stage}_s"), float(s), 0) for stage, s in timings.items()]
    for name in ("beam_recall", "training_loss"):
        for split, values in diagnostics.get(name, {}).items():
            out += [(metric_key(f"{split}.{name}"), float(v), t) for t, v in enumerate(values)]
    for level, points in diagnostics.get("matcher_loss", {}).items():
        out += [(f"matcher.level_{level}.loss", float(loss), int(step)) for step, loss in points]
    return out


def track_run(
    cfg: XmcConfig,
    model_dir: Path,
    corpus_dir: Path,
    eval_dirs: Mapping[str, Path],
    diagnostics: Path,
    timings: Mapping[str, float],
    links: Mapping[str, str],
) -> dict[str, Any]:
    """Record the training run in MLflow (see the module doc).

    ``model_dir``: the model folder; ``corpus_dir``: its dataset folder; ``eval_dirs``:
    ``{split: folder with metrics.json}``; ``diagnostics``: a folder with ``diagnostics.json``
    (and ``plots/``); ``timings``: wall seconds per stage; ``links``: more tags. Returns
    ``run_id``, ``experiment_id``, ``model_uri``, ``version`` (None: :func:`register_tracked`
    sets it), ``artifact_uri``, ``tracking_uri`` and ``run_url`` (None unless a tracking
    server).
    """
    import mlflow

    from xmc_core.serving.package import log_model
    from xmc_core.serving.registry.lineage import for_corpus
    from xmc_core.serving.registry.locking import PROCESS_TAG, process_identity

    cfg = for_corpus(cfg, corpus_dir)  # registry.model_name's {dataset}
    uri = cfg.tracking_uri()
    db = sqlite_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    with tracking_uri_scope(uri):
        client = tracking_client(uri)
        exp = experiment_id(client, cfg.tracking.experiment, uri)
        reconcile_before_run(cfg, client, exp)  # each repair is logged where it is made
        name = cfg.tracking.run_name or default_run_name(cfg)
        tags = run_tags(cfg, model_dir, corpus_dir, links) | {PROCESS_TAG: process_identity()}
        with mlflow.start_run(experiment_id=exp, run_name=name, tags=tags) as run:
            run_id = run.info.run_id
            _log_run_contents(client, run_id, cfg, eval_dirs, timings, diagnostics)
            log_dataset_inputs(client, run_id, corpus_dir)
            info = log_model(Path(model_dir), cfg)
            artifact_uri = run.info.artifact_uri
    log.info("MLflow run %s (experiment %s), model %s", run_id, exp, info.model_uri)
    return {
        "run_id": run_id, "experiment_id": exp, "model_uri": info.model_uri, "version": None,
        "artifact_uri": artifact_uri, "tracking_uri": uri, "run_url": run_url(uri, exp, run_id),
    }  # fmt: skip


def register_tracked(
    cfg: XmcConfig,
    tracked: Mapping[str, Any],
    model_dir: Path,
    corpus_dir: Path,
    test_metrics: Mapping[str, float],
) -> dict[str, Any]:
    """The model of the run ``tracked`` (what :func:`track_run` returned) registered as a version
    of ``registry.model_name`` (the version holding an identical model already, if any), tagged
    with the training data's lineage and described with ``test_metrics`` -> ``tracked`` with its
    ``version`` (str)."""
    from xmc_core.serving.package import register_logged
    from xmc_core.serving.registry.lineage import for_corpus, version_tags

    cfg = for_corpus(cfg, corpus_dir)  # registry.model_name's {dataset}
    uri, run_id = str(tracked["tracking_uri"]), str(tracked["run_id"])
    name = cfg.registry.model_name
    with tracking_uri_scope(uri):
        client = tracking_client(uri)
        version = str(register_logged(
            str(tracked["model_uri"]), Path(model_dir), cfg, name, reuse_identical=True,
            version_tags=version_tags(corpus_dir),
        ))  # fmt: skip
        tags = client.get_run(run_id).data.tags
        text = version_description(tags["xmc.model_kind"], corpus_dir, test_metrics, tags, run_id)
        describe_version(client, name, version, run_id, text)
    log.info("model of MLflow run %s: version %s of %s", run_id, version, name)
    return {**tracked, "version": version}


def _log_run_contents(
    client: Any,
    run_id: str,
    cfg: XmcConfig,
    eval_dirs: Mapping[str, Path],
    timings: Mapping[str, float],
    diagnostics: Path,
) -> None:
    """Params (the flattened config), metrics, ``config.yaml``, evaluation JSON and plots."""
    from mlflow.entities import Metric, Param

    summary = read_json(diagnostics / "diagnostics.json")
    now = int(time.time() * 1000)
    client.log_batch(
        run_id,
        params=[Param(k, v) for k, v in flatten_config(cfg).items()],
        metrics=[Metric(k, v, now, s) for k, v, s in run_metrics(eval_dirs, timings, summary)],
    )
    client.log_text(run_id, cfg.to_yaml(), "config.yaml")
    for split, folder in eval_dirs.items():
        client.log_artifact(run_id, str(Path(folder) / "metrics.json"), f"evaluation/{split}")
    client.log_artifact(run_id, str(diagnostics / "diagnostics.json"), "evaluation")
    if (diagnostics / "plots").is_dir():
        client.log_artifacts(run_id, str(diagnostics / "plots"), "plots")


def default_run_name(cfg: XmcConfig) -> str:
    """``<kind>-<dataset folder name>-<time>`` (``synthetic`` without a dataset)."""
    dataset = Path(cfg.data.dataset).name if cfg.data.dataset else "synthetic"
    return f"{cfg.model.kind}-{dataset}-{time.strftime('%Y%m%d-%H%M%S')}"


def attach_report(tracked: Mapping[str, Any], report: Path) -> None:
    """Log the run report file ``report`` into the MLflow run ``tracked`` (what
    :func:`track_run` returned) under ``report/``."""
    from mlflow import MlflowClient

    uri = str(tracked["tracking_uri"])
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.log_artifact(str(tracked["run_id"]), str(report), MLFLOW_REPORT_DIR)
