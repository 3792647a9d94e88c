"""MLflow tracking of a training run, and the wall time of its stages from the Prefect API.

``log_training_run`` records one MLflow run per training flow run: the full configuration as
parameters, the metrics of every split, the per-level diagnostics and the stage times as
metrics, fingerprints and the Prefect flow run as tags, the corpus as dataset inputs, the
evaluation and diagnostics files and plots as artifacts, and the model itself
(``xmc_core.serving.package.log_model``, registered when the registry is on, the new version
described: see ``tasks.lineage``).
The global MLflow tracking URI is set only for the duration of the call and restored after.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterParentFlowRunId,
)
from prefect.runtime import flow_run as current_flow_run
from prefect.runtime import task_run as current_task_run

from tasks.lineage import describe_version, flow_run_links, log_dataset_inputs, version_description
from tasks.stage_task import STAGE_TAG
from xmc_core.config import XmcConfig
from xmc_core.evaluation.report import read_json
from xmc_core.model.xmc_model import model_layout
from xmc_core.serving.registry.store import sqlite_path, tracking_client
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.fingerprint import code_fingerprint, path_fingerprint

MAX_PARAM_LENGTH = 500
"""Longest parameter value logged (MLflow's historical limit; longer values are cut)."""
PAGE = 200
"""Task runs read per Prefect API call."""
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_.\-/ ]")
_REPO_ROOT = Path(__file__).resolve().parents[1]


def stage_timings(flow_run_id: UUID | str | None = None, wait_s: float = 15.0) -> dict[str, float]:
    """Wall seconds per task run name of a flow run and of its subflow runs (recursively).

    ``flow_run_id``: default the current flow run. Task runs with the same name are summed;
    Cached runs count 0; the task runs that stand for subflows are replaced by the subflows'
    own task runs. Task states reach the API asynchronously: this waits up to ``wait_s``
    seconds for every task run (except the calling one) to be final; runs still unfinished
    then count the time they ran so far.
    """
    timings: dict[str, float] = {}
    for run in _final_task_runs(flow_run_id, wait_s):
        timings[run.name] = timings.get(run.name, 0.0) + _seconds(run)
    return dict(sorted(timings.items()))


def cached_stages(flow_run_id: UUID | str | None = None, wait_s: float = 15.0) -> tuple[int, int]:
    """(Cached, all) stage task runs (``tasks.stage_task.STAGE_TAG``) of a flow run and its
    subflow runs, as :func:`stage_timings` reads them: how many stages an earlier run had done
    already."""
    runs = [r for r in _final_task_runs(flow_run_id, wait_s) if STAGE_TAG in r.tags]
    return sum(1 for r in runs if r.state is not None and r.state.name == "Cached"), len(runs)


def _final_task_runs(flow_run_id: UUID | str | None, wait_s: float) -> list[Any]:
    """The task runs of :func:`stage_timings`, but the calling one, once final (or after
    ``wait_s`` seconds)."""
    flow_run_id = flow_run_id or current_flow_run.get_id()
    if flow_run_id is None:
        raise ValueError("stage_timings needs a flow run id outside of a flow run")
    root = UUID(str(flow_run_id))
    calling = current_task_run.get_id()
    deadline = time.monotonic() + wait_s
    with get_client(sync_client=True) as client:
        while True:
            runs = [r for r in _task_runs_of_tree(client, root) if str(r.id) != calling]
            if all(_is_final(r) for r in runs) or time.monotonic() > deadline:
                return runs
            time.sleep(0.25)


def _task_runs_of_tree(client: SyncPrefectClient, root: UUID) -> list[Any]:
    """Task runs of ``root`` and its subflow runs, minus the subflows' stand-in task runs."""
    runs, stand_ins, queue = [], set(), [root]
    while queue:
        flow_run_id = queue.pop()
        runs += _paged(client.read_task_runs, FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        parent = FlowRunFilterParentFlowRunId(any_=[flow_run_id])
        for sub in _paged(client.read_flow_runs, FlowRunFilter(parent_flow_run_id=parent)):
            queue.append(sub.id)
            if sub.parent_task_run_id is not None:
                stand_ins.add(sub.parent_task_run_id)
    return [r for r in runs if r.id not in stand_ins]


def _paged(read: Any, flt: FlowRunFilter) -> list[Any]:
    out, offset = [], 0
    while True:
        page = read(flow_run_filter=flt, limit=PAGE, offset=offset)
        out += page
        if len(page) < PAGE:
            return out
        offset += PAGE


def _is_final(run: Any) -> bool:
    return run.state is not None and run.state.is_final()


def _seconds(run: Any) -> float:
    """Time spent running (summed over retries); 0 for a Cached run."""
    if run.state is not None and run.state.name == "Cached":
        return 0.0
    seconds = run.total_run_time.total_seconds()
    if seconds <= 0 and run.start_time is not None:
        end = run.end_time or datetime.now(UTC)
        seconds = (end - run.start_time).total_seconds()
    return max(0.0, float(seconds))


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


def split_metrics(eval_dirs: Mapping[str, str]) -> dict[str, dict[str, float]]:
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
    on, ``xmc_core.serving.registry.reconcile`` (stuck runs, undecided versions, the alias holder's
    decision); else only the runs of ``experiment`` stuck RUNNING by a process that is gone."""
    from xmc_core.serving.registry.reconcile import close_stuck_runs, reconcile

    if cfg.registry.enabled:
        return reconcile(cfg, [experiment])
    return close_stuck_runs(client, [], [experiment], datetime.now(UTC).isoformat())


def run_url(tracking_uri: str, experiment: str, run_id: str) -> str | None:
    """The run's page in the MLflow UI when the store is a tracking server."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}"
    return None


def run_tags(cfg: XmcConfig, outputs: Mapping[str, str]) -> dict[str, str]:
    """Fingerprints of config, data and code, the model kind and the Prefect flow run
    (:func:`tasks.lineage.flow_run_links`)."""
    folder = Path(outputs["model"])
    kind = model_layout(folder, read_meta(folder, "XmcModel", verify=False))["family"]
    tags = {
        "xmc.config_fingerprint": cfg.fingerprint(),
        "xmc.data_fingerprint": path_fingerprint(outputs["corpus"]),
        "xmc.code_version": code_fingerprint(),
        "xmc.model_kind": str(kind),
        "xmc.model_dir": str(outputs["model"]),
    }
    commit = _git("rev-parse", "HEAD")
    if commit:
        tags["xmc.git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit
        tags["xmc.git_dirty"] = str(bool(_git("status", "--porcelain", "--untracked-files=no")))
    return tags | flow_run_links()


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
    eval_dirs: Mapping[str, str], timings: Mapping[str, float], diagnostics: Mapping[str, Any]
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


@task(name="log-training-run", task_run_name="log-training-run", cache_policy=NO_CACHE)
def log_training_run(
    cfg: XmcConfig,
    outputs: dict[str, str],
    timings: dict[str, float],
    diagnostics_dir: str,
    eval_dirs: dict[str, str],
) -> dict[str, Any]:
    """Record the training run in MLflow (see the module doc); ``{}`` when tracking is off.

    ``outputs``: the train pipeline's artifact folders (``corpus`` and ``model`` are read);
    ``timings``: :func:`stage_timings`; ``diagnostics_dir``: the ``diagnose`` task's folder;
    ``eval_dirs``: ``{split: evaluation folder with metrics.json}``. Returns ``run_id``,
    ``experiment_id``, ``model_uri``, ``version`` (registered version, str, or None),
    ``artifact_uri``, ``tracking_uri`` and ``run_url`` (None unless a tracking server).
    """
    if not cfg.tracking.enabled:
        return {}
    import mlflow

    from xmc_core.serving.package import log_model
    from xmc_core.serving.registry.lineage import for_corpus, version_tags
    from xmc_core.serving.registry.locking import PROCESS_TAG, process_identity

    cfg = for_corpus(cfg, outputs["corpus"])  # registry.model_name's {dataset}
    log = get_run_logger()
    uri = cfg.tracking_uri()
    db = sqlite_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    diagnostics = Path(diagnostics_dir)
    with tracking_uri_scope(uri):
        client = tracking_client(uri)
        exp = experiment_id(client, cfg.tracking.experiment, uri)
        reconcile_before_run(cfg, client, exp)  # each repair is logged where it is made
        name = cfg.tracking.run_name or _default_run_name(cfg)
        tags = run_tags(cfg, outputs) | {PROCESS_TAG: process_identity()}
        with mlflow.start_run(experiment_id=exp, run_name=name, tags=tags) as run:
            run_id = run.info.run_id
            _log_run_contents(client, run_id, cfg, eval_dirs, timings, diagnostics)
            log_dataset_inputs(client, run_id, outputs["corpus"])
            registered = cfg.registry.model_name if cfg.registry.enabled else None
            info = log_model(
                Path(outputs["model"]), cfg, registered_model_name=registered,
                reuse_identical=True, version_tags=version_tags(outputs["corpus"]),
            )  # fmt: skip
            artifact_uri = run.info.artifact_uri
    version = info.registered_model_version
    if version is not None:
        test = split_metrics(eval_dirs).get("test", {})
        text = version_description(tags["xmc.model_kind"], outputs["corpus"], test, tags, run_id)
        describe_version(client, cfg.registry.model_name, str(version), run_id, text)
    result = {
        "run_id": run_id,
        "experiment_id": exp,
        "model_uri": info.model_uri,
        "version": None if version is None else str(version),
        "artifact_uri": artifact_uri,
        "tracking_uri": uri,
        "run_url": run_url(uri, exp, run_id),
    }
    log.info(
        "MLflow run %s (experiment %s), model %s version %s", run_id, exp, info.model_uri, version
    )
    return result


def _log_run_contents(
    client: Any,
    run_id: str,
    cfg: XmcConfig,
    eval_dirs: dict[str, str],
    timings: dict[str, float],
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


def _default_run_name(cfg: XmcConfig) -> str:
    dataset = Path(cfg.data.dataset).name if cfg.data.dataset else "synthetic"
    return f"{cfg.model.kind}-{dataset}-{time.strftime('%Y%m%d-%H%M%S')}"
