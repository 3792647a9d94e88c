"""Content-addressed artifact folders: ``<work_dir>/artifacts/<stage>/<key>/``, written once.

A stage's output is written into a temporary folder and renamed into place only when complete,
so a folder that exists is finished, and a rerun (or a later stage's crash) reuses it instead of
computing it again. Two runs writing the same artifact serialize on its writer lock; the second
then reuses the first one's folder.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from xmc_core.storage.atomic import atomic_dir
from xmc_core.storage.work_dir import WorkDir

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""Errors of writing an artifact that its folder names: the disk that is full."""


class ArtifactStore:
    """The artifact folders of one ``work_dir``."""

    def __init__(self, work_dir: str | Path) -> None:
        self.work = WorkDir.of(work_dir)

    def path(self, stage: str, key: str) -> Path:
        """Where the artifact of ``stage`` with ``key`` lives (finished or not)."""
        return self.work.artifact(stage, key)

    def is_complete(self, stage: str, key: str) -> bool:
        """A folder is complete once it exists: it is renamed into place only when done."""
        return self.path(stage, key).is_dir()

    def produce(
        self, stage: str, key: str, logger: logging.Logger | logging.LoggerAdapter,
        name: str | None = None, reused: str = "reusing finished artifact",
    ) -> AbstractContextManager[Path | None]:  # fmt: skip
        """Yield a temporary folder to write the artifact into, or None if it is complete.

        The folder is renamed into place only when the block finishes without error. A run
        that finds another run writing the same artifact (two flows on one ``work_dir``)
        waits for it on the writer lock and then reuses its folder. Log lines start with
        ``name`` (default: the stage); a complete folder is logged as ``name: <reused> <path>``.
        A full disk met in the block (an OSError that names no file) names the folder.
        """
        return self.produce_at(self.path(stage, key), logger, name or stage, reused)

    @contextmanager
    def produce_at(
        self, out: Path, logger: logging.Logger | logging.LoggerAdapter, name: str, reused: str
    ) -> Iterator[Path | None]:
        """:meth:`produce` for a content-addressed folder ``out`` of this ``work_dir`` outside
        the stage artifacts (a published model folder)."""
        if out.is_dir():
            logger.info("%s: %s %s", name, reused, out)
            yield None
            return
        start = time.perf_counter()
        try:
            with atomic_dir(out, overwrite=True, wait=True) as tmp:
                if out.is_dir():  # finished by the writer this run waited for
                    raise _FinishedMeanwhile
                yield tmp
        except _FinishedMeanwhile:
            logger.info("%s: reusing %s, finished by another run meanwhile", name, out)
            yield None
            return
        except OSError as err:
            if err.filename is None and err.errno in _DISK_FULL:  # pyarrow, numpy name no file
                raise OSError(err.errno, os.strerror(err.errno), str(out)) from err
            raise
        logger.info("%s: wrote %s in %.2f s", name, out, time.perf_counter() - start)


class _FinishedMeanwhile(Exception):
    """Leaves :meth:`ArtifactStore.produce`'s block unpublished: another run wrote it."""
