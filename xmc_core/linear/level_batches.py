"""Where the batches of a tree level train: the mapper of ``solver.train_level``.

A level's training is a :class:`~xmc_core.linear.solver.LevelJob`: independent batches of
parents. A :class:`BatchMapper` trains every batch and returns their pieces; the default,
:func:`in_process`, loops over them here (numba threads inside each batch). Another mapper (the
Dask one in ``tasks/dask_ranker.py``) can be passed to ``train_level`` or set around any code
that trains levels with :func:`use_mapper`; this package never imports a cluster library.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from xmc_core.linear.solver import LevelJob
    from xmc_core.progress import RateLog

Pieces = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""What a batch returns: (nodes, counts, rows, values), see ``LevelJob.train``."""


class BatchMapper(Protocol):
    """Trains every batch of ``job`` (``job.train(parents)`` for each of ``job.batches``),
    counts the nodes done into ``progress`` (``progress.update(nodes, work)``, see
    ``job.batch_size``) and returns the pieces of every batch, in any order."""

    def __call__(self, job: LevelJob, progress: RateLog) -> list[Pieces]: ...


def in_process(job: LevelJob, progress: RateLog) -> list[Pieces]:
    """The batches one after the other in this process (progress counted per node chunk)."""
    return [job.train(parents, progress) for parents in job.batches]


_MAPPER: ContextVar[BatchMapper | None] = ContextVar("xmc_batch_mapper", default=None)


def current_mapper() -> BatchMapper:
    """The mapper set by :func:`use_mapper` around this call, else :func:`in_process`."""
    return _MAPPER.get() or in_process


@contextmanager
def use_mapper(mapper: BatchMapper | None) -> Iterator[None]:
    """Train the levels of the enclosed code with ``mapper`` (None: in this process)."""
    token = _MAPPER.set(mapper)
    try:
        yield
    finally:
        _MAPPER.reset(token)
