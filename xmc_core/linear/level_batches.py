"""Where the batches of a tree level train: the mapper of ``solver.train_level``.

A level's training is a :class:`~xmc_core.linear.solver.LevelJob`: independent batches of
parents. A :class:`BatchMapper` trains every batch and returns their pieces; the default,
:func:`in_process`, loops over them here (numba threads inside each batch). Another mapper (the
Dask one in ``tasks/dask_ranker.py``) can be passed to ``train_level`` or set around any code
that trains levels with :func:`use_mapper`; this package never imports a cluster library. A
mapper may cut heavy batches into smaller tasks first (:func:`split_batches`: runs of parents,
chunks of a parent's children); the weights do not change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from xmc_core.linear._batch import Level
    from xmc_core.progress import RateLog

Pieces = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""What a batch returns: (nodes, counts, rows, values), see ``LevelJob.train``."""
Task = tuple[np.ndarray, np.ndarray | None]
"""One piece of a level's work: (parents, nodes): every child of ``parents`` when ``nodes`` is
None, else only ``nodes`` (``LevelJob.train(parents, nodes=nodes)``)."""


class BatchedJob(Protocol):
    """What a mapper reads of a level's job, :class:`~xmc_core.linear.solver.LevelJob` (named
    here by its shape, so that this module, which the solver imports, never imports it)."""

    batches: list[np.ndarray]
    parent_entries: np.ndarray

    @property
    def level(self) -> Level: ...

    def batch_size(self, parents: np.ndarray) -> tuple[int, int]: ...

    def train(
        self, parents: np.ndarray, progress: RateLog | None = None, nodes: np.ndarray | None = None
    ) -> Pieces: ...


class BatchMapper(Protocol):
    """Trains every node of ``job``'s batches (``job.train(parents)`` for each of
    ``job.batches``, or ``job.train(parents, nodes=nodes)`` for each task of
    :func:`split_batches`), counts the nodes done into ``progress``
    (``progress.update(nodes, work)``, see :func:`task_size`) and returns the pieces, in any
    order."""

    def __call__(self, job: BatchedJob, progress: RateLog) -> list[Pieces]: ...


def in_process(job: BatchedJob, progress: RateLog) -> list[Pieces]:
    """The batches one after the other in this process (progress counted per node chunk)."""
    return [job.train(parents, progress) for parents in job.batches]


def split_batches(job: BatchedJob, max_work: int) -> list[Task]:
    """``job``'s batches as tasks of at most about ``max_work`` work where they can be cut:
    a heavier batch is cut into runs of its parents, a heavier parent into chunks of its
    children (a node, the unit, is never cut). A node's work is its parent's block entries."""
    children = np.split(
        np.argsort(job.level.parent, kind="stable"),
        np.cumsum(np.bincount(job.level.parent, minlength=job.parent_entries.size)),
    )
    tasks: list[Task] = []
    for batch in job.batches:
        if job.batch_size(batch)[1] <= max_work:
            tasks.append((batch, None))
            continue
        run: list[int] = []
        used = 0
        for p in batch.tolist():
            kids, per_node = children[p], max(int(job.parent_entries[p]), 1)
            if kids.size * per_node > max_work:  # a heavy parent: chunks of its children
                n_chunks = min(kids.size, -(-kids.size * per_node // max_work))
                parents = np.array([p], dtype=np.int64)
                tasks += [(parents, chunk) for chunk in np.array_split(kids, n_chunks)]
                continue
            if run and used + kids.size * per_node > max_work:
                tasks.append((np.array(run, dtype=np.int64), None))
                run, used = [], 0
            run.append(p)
            used += kids.size * per_node
        if run:
            tasks.append((np.array(run, dtype=np.int64), None))
    return tasks


def task_size(job: BatchedJob, task: Task) -> tuple[int, int]:
    """(nodes, work) of a task, as ``LevelJob.batch_size`` counts a batch."""
    parents, nodes = task
    if nodes is None:
        return job.batch_size(parents)
    return int(nodes.size), int(job.parent_entries[job.level.parent[nodes]].sum())


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
