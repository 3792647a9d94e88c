"""The one task of the stage graph: every stage runs as a cached Prefect task made here.

The task loads its artifact inputs by path, runs the stage's pure function from ``xmc_core``,
saves the output atomically into ``<work_dir>/artifacts/<stage>/<key>/`` and returns that
folder. The key hashes the stage's code (module closure), its settings and the fingerprints of
its input folders; it is also the Prefect cache key, so an unchanged rerun reports Cached
states, a changed setting recomputes only the stages that read it, and a run that failed at
tree level 2 resumes at level 2.

With ``level_cluster`` (the config's ``dask`` section, ``address`` set) the tree levels a stage
trains run their batches on that Dask cluster (:mod:`tasks.dask_ranker`); the result, hence the
key, is the same as in the flow's process.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from prefect import Task, get_run_logger, task
from prefect.context import TaskRunContext

from tasks.dask_ranker import ranker_cluster
from xmc_core.config import DaskConfig
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import Stage, each
from xmc_core.stages.store import ArtifactStore
from xmc_core.storage.fingerprint import path_fingerprint
from xmc_core.storage.work_dir import RESULT_FILE

_TASKS: dict[str, Task[..., str]] = {}
TASK_OPTIONS: dict[str, Any] = {"persist_result": True, "result_serializer": "json"}
"""Every stage task: its result (an artifact folder's path) persisted as JSON, never pickled;
the cache key is the stage's key (``<stage>/<key>/prefect-result.json``, inside the artifact
folder: ``tasks.cache_records`` reads it back)."""
SHARED_LOADS: tuple[type, ...] = (XmcModel,)
"""Artifacts loaded once per process and content: every partition task of a batch prediction
shares its model."""
STAGE_TAG = "xmc-stage"
"""Every stage task's run carries this tag (what a run summary counts as its stages)."""


def artifact_key(stage: Stage, args: dict[str, Any]) -> str:
    """The key of ``stage`` called on ``args`` whose artifacts are folders."""
    return stage.key(args, lambda _name, path: path_fingerprint(path))


def stage_task(stage: Stage) -> Task[..., str]:
    """The Prefect task of ``stage`` (one per stage; call it with ``(args, work_dir)``, and
    ``level_cluster``: where its tree levels train, see the module)."""
    if stage.name not in _TASKS:

        def cache_key(_ctx: TaskRunContext, params: dict[str, Any]) -> str:
            return f"{stage.name}/{artifact_key(stage, params['args'])}/{RESULT_FILE}"

        def run_stage(
            args: dict[str, Any], work_dir: str, level_cluster: DaskConfig | None = None
        ) -> str:
            return execute(stage, args, work_dir, level_cluster)

        run_stage.__qualname__ = run_stage.__name__ = stage.name.replace("-", "_")
        _TASKS[stage.name] = task(
            run_stage, name=stage.name, cache_key_fn=cache_key, tags=[STAGE_TAG], **TASK_OPTIONS
        )
    return _TASKS[stage.name]


def execute(
    stage: Stage, args: dict[str, Any], work_dir: str, level_cluster: DaskConfig | None = None
) -> str:
    """Run ``stage`` unless its artifact folder is complete; returns the folder. Its tree
    levels train on the Dask cluster of ``level_cluster`` when its ``address`` is set."""
    log = get_run_logger()
    store = ArtifactStore(work_dir)
    key = artifact_key(stage, args)
    with store.produce(stage.name, key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            loaded = {name: _load(stage, name, value) for name, value in args.items()}
            with ranker_cluster(level_cluster, log):
                if stage.writes_folder:
                    stage.fn(**loaded, out=tmp)
                    output = stage.output.load(tmp) if stage.describe else None
                else:
                    output = stage.fn(**loaded)
            if not stage.writes_folder:
                output.save(tmp)
            if stage.describe is not None:
                log.info(
                    "%s: %s (%.1f s)", stage.name, stage.describe(output),
                    time.perf_counter() - start,
                )  # fmt: skip
    return str(store.path(stage.name, key))


def _load(stage: Stage, name: str, value: Any) -> Any:
    """An argument as the stage takes it: artifact folders loaded by their class."""
    if name not in stage.artifacts:
        return value
    cls = stage.artifacts[name]
    if cls in SHARED_LOADS:
        return each(value, lambda path: _shared(cls, path, path_fingerprint(path)))
    return each(value, cls.load)


@functools.lru_cache(maxsize=2)
def _shared(cls: type, path: str, fingerprint: str) -> Any:
    """One loaded artifact per process, class and content (``fingerprint``)."""
    return cls.load(path)
