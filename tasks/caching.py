"""Content-addressed artifacts and the Prefect cache keys that point at them.

Every stage writes into ``<work_dir>/artifacts/<stage>/<key>/`` where ``key`` hashes the stage
name, the fingerprints of its inputs, its config section and the fingerprint of the code it
runs: each task module passes ``code=closure_fingerprint(__name__)``, its own source and the
``xmc_core`` modules it imports, transitively. The same key is the task's Prefect cache key, so
an unchanged rerun reports Cached states, a changed config section recomputes only the stages
that read it, a change in code a stage runs never reuses a stale result, and a change elsewhere
(say a docstring in ``xmc_core/serving/http.py``) leaves its results cached. A stage whose
folder is already complete (e.g. after a crash of a later stage) returns it without
recomputing. Prefect reads the cache records only through ``tasks.cache_records.CacheRecords``,
which verifies them first (no pickle, no code).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect.context import TaskRunContext

from xmc_core.atomic import atomic_dir
from xmc_core.fingerprint import code_fingerprint, combine, path_fingerprint

RESULT_FILE = "prefect-result.json"


def stage_key(stage: str, *parts: object, code: str | None = None) -> str:
    """Cache key of a stage (32 hex chars) from its inputs' fingerprints and config values.

    ``code`` is the fingerprint of the code the stage runs, normally
    ``closure_fingerprint(<the stage's module>)``; without it, every ``xmc_core`` source file
    counts (:func:`~xmc_core.fingerprint.code_fingerprint`).
    """
    return combine(stage, code_fingerprint() if code is None else code, *parts)[:32]


def artifact_dir(work_dir: str | Path, stage: str, key: str) -> Path:
    """Where the artifact of ``stage`` with ``key`` lives."""
    return Path(work_dir) / "artifacts" / stage / key


def results_root(work_dir: str | Path) -> Path:
    """Prefect's result storage: the artifacts folder itself (see :func:`cache_key`)."""
    return Path(work_dir) / "artifacts"


def is_complete(folder: Path) -> bool:
    """An artifact folder is complete once it exists: it is renamed into place only when done."""
    return folder.is_dir()


def cache_key(
    stage: str, key_fn: Callable[..., str]
) -> Callable[[TaskRunContext, dict[str, Any]], str]:
    """A Prefect ``cache_key_fn``: ``<stage>/<key>/prefect-result.json``.

    With the flow's result storage at :func:`results_root`, Prefect's cache record lands inside
    the artifact folder it points at, so deleting an artifact also forgets its cache entry.
    """

    def fn(_ctx: TaskRunContext, params: dict[str, Any]) -> str:
        return f"{stage}/{key_fn(**params)}/{RESULT_FILE}"

    return fn


def fp(path: str | Path) -> str:
    """Fingerprint of an input path (dataset folder, artifact folder or file)."""
    return path_fingerprint(path)


@contextmanager
def produce(
    work_dir: str | Path, stage: str, key: str, logger: logging.Logger | logging.LoggerAdapter
) -> Iterator[Path | None]:
    """Yield a temporary folder to write the artifact into, or None if it is already complete.

    The folder is renamed into place only when the block finishes without error. A run that
    finds another run writing the same artifact (two flows on one ``work_dir``) waits for it
    on the writer lock and then reuses its folder instead of computing it again.
    """
    out = artifact_dir(work_dir, stage, key)
    if is_complete(out):
        logger.info("%s: reusing finished artifact %s", stage, out)
        yield None
        return
    start = time.perf_counter()
    try:
        with atomic_dir(out, overwrite=True, wait=True) as tmp:
            if is_complete(out):  # finished by the writer this run waited for
                raise _FinishedMeanwhile
            yield tmp
    except _FinishedMeanwhile:
        logger.info("%s: reusing %s, finished by another run meanwhile", stage, out)
        yield None
        return
    logger.info("%s: wrote %s in %.2f s", stage, out, time.perf_counter() - start)


class _FinishedMeanwhile(Exception):
    """Leaves :func:`produce`'s writer block unpublished: another run wrote the artifact."""
