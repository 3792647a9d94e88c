"""Prefect cache keys for the tasks outside the stage graph (batch prediction, diagnostics,
the synthetic corpus); the stage graph's tasks are made by :mod:`tasks.stage_task`.

Every such task writes into ``<work_dir>/artifacts/<stage>/<key>/`` (see
:class:`xmc_core.stages.store.ArtifactStore`). ``key`` hashes the stage name, its inputs'
fingerprints, its settings and the code it runs (each task module passes
``code=closure_fingerprint(__name__)``: its own source and the ``xmc_core`` modules it imports,
transitively), so a docstring edit in ``xmc_core/serving/http.py`` leaves its results cached.
The key is also the task's Prefect cache key, and Prefect's cache record lands inside the
artifact folder it points at, so deleting an artifact also forgets its cache entry. Prefect
reads the records only through ``tasks.cache_records.CacheRecords``, which verifies them first
(no pickle, no code).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect.context import TaskRunContext

from xmc_core.stages.store import ArtifactStore
from xmc_core.storage.fingerprint import code_fingerprint, combine, path_fingerprint
from xmc_core.storage.work_dir import RESULT_FILE, WorkDir

__all__ = [
    "RESULT_FILE", "TASK_OPTIONS", "artifact_dir", "cache_key", "fp", "produce", "results_root",
]  # fmt: skip

TASK_OPTIONS: dict[str, Any] = {"persist_result": True, "result_serializer": "json"}
"""Every cached task: its result (an artifact folder's path) persisted as JSON, never pickled."""


def stage_key(stage: str, *parts: object, code: str | None = None) -> str:
    """Cache key of a stage (32 hex chars) from its inputs' fingerprints and config values.

    ``code`` is the fingerprint of the code the stage runs, normally
    ``closure_fingerprint(<the stage's module>)``; without it, every ``xmc_core`` source file
    counts (:func:`~xmc_core.storage.fingerprint.code_fingerprint`).
    """
    return combine(stage, code_fingerprint() if code is None else code, *parts)[:32]


def artifact_dir(work_dir: str | Path, stage: str, key: str) -> Path:
    """Where the artifact of ``stage`` with ``key`` lives."""
    return WorkDir.of(work_dir).artifact(stage, key)


def results_root(work_dir: str | Path) -> Path:
    """Prefect's result storage: the artifacts folder itself (see :func:`cache_key`)."""
    return WorkDir.of(work_dir).artifacts


def is_complete(folder: Path) -> bool:
    """An artifact folder is complete once it exists: it is renamed into place only when done."""
    return folder.is_dir()


def cache_key(
    stage: str, key_fn: Callable[..., str]
) -> Callable[[TaskRunContext, dict[str, Any]], str]:
    """A Prefect ``cache_key_fn``: ``<stage>/<key>/prefect-result.json``."""

    def fn(_ctx: TaskRunContext, params: dict[str, Any]) -> str:
        return f"{stage}/{key_fn(**params)}/{RESULT_FILE}"

    return fn


def fp(path: str | Path) -> str:
    """Fingerprint of an input path (dataset folder, artifact folder or file)."""
    return path_fingerprint(path)


def produce(work_dir: str | Path, stage: str, key: str, logger: Any) -> Any:
    """:meth:`ArtifactStore.produce` of ``work_dir``: a temporary folder to write the artifact
    into, or None if it is complete."""
    return ArtifactStore(work_dir).produce(stage, key, logger)
