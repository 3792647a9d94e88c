"""The per-level ranker training on a Dask cluster: each piece of a tree level is one Dask task.

:class:`DaskBatchMapper` is a :class:`~xmc_core.linear.level_batches.BatchMapper`. For each level
it ships the level's job (the training matrix X, the targets, the matching matrix: what
``LevelJob.train`` reads) to every worker ONCE, with ``client.scatter(broadcast=True)``: the
client sends one copy to one worker and the scheduler copies it on, worker to worker, as a tree
(``Scheduler.replicate``). It then submits one task per piece of work (a batch of parents, a run
of a heavy batch's parents or a chunk of a heavy parent's children: ``split_batches``) that
receives the future of that copy, so a task carries only parent and node ids; the tasks run
where the copy already is. The pieces come back as the tasks finish, the level's progress
counting the nodes done, and the copies are released. The result is the same W as in one
process (a node's random stream depends on its id only).

:func:`ranker_cluster` sets such a mapper (connected lazily, at the first level it trains) around
a stage call when ``dask.address`` is set: ``tasks/stage_task.py`` does it for the stages of the
flows, so the XR-Linear levels of the train flow fan out to the cluster.

Threads: a batch task runs numba with ``threads_per_worker // (the worker's Dask threads)``
threads (at least one), so a worker never runs more than ``dask.threads_per_worker`` solver
threads at once, however many of its Dask threads are busy.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numba
from distributed import Client, as_completed, get_worker
from distributed.protocol import serialize

from xmc_core.config import DaskConfig
from xmc_core.linear.level_batches import Pieces, Task, split_batches, task_size, use_mapper
from xmc_core.linear.solver import LevelJob
from xmc_core.progress import RateLog
from xmc_core.threads import scoped_threads
from xmc_core.wording import counted

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 30


def train_ranker_batch(job: LevelJob, task: Task, threads: int) -> dict[str, Any]:
    """On a worker: train one task of ``job`` (parents, nodes or None) with at most ``threads``
    solver threads in this process; returns its pieces, its seconds (wall, and CPU of the
    worker process) and the worker's address."""
    worker = get_worker()
    n_threads = max(1, threads // max(1, worker.state.nthreads))
    n_threads = min(n_threads, numba.config.NUMBA_NUM_THREADS)
    start, cpu = time.perf_counter(), time.process_time()
    with scoped_threads(numba.get_num_threads, numba.set_num_threads, n_threads):
        pieces = job.train(task[0], nodes=task[1])
    return {
        "pieces": pieces, "s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu, "worker": worker.address,
    }  # fmt: skip


def wire_bytes(obj: Any) -> int:
    """Bytes of ``obj`` as Dask sends it (its serialized frames)."""
    _, frames = serialize(obj, on_error="raise")
    return sum(memoryview(f).nbytes for f in frames)


def pieces_bytes(pieces: Pieces) -> int:
    """Bytes of a batch's result arrays (what a task sends back)."""
    return sum(int(a.nbytes) for a in pieces)


@dataclass
class DaskBatchMapper:
    """Trains a level's batches on the cluster at ``address`` (see the module's docstring);
    ``client``: an open client to use instead (else one is connected at the first level and
    closed by :meth:`close`). The batches are cut into about ``tasks_per_slot`` tasks per
    worker thread where they are heavier (``split_batches``: runs of parents, chunks of a large
    parent's children), so one large parent does not hold the level on one worker.
    ``records``: per level, what was shipped and each task's time."""

    address: str | None = None
    threads_per_worker: int = 1
    tasks_per_slot: int = 4
    client: Client | None = None
    logger: logging.Logger | logging.LoggerAdapter = log
    records: list[dict[str, Any]] = field(default_factory=list)
    _owned: bool = False

    def connect(self) -> Client:
        """The client, connected at the first call when none was given."""
        if self.client is None:
            if not self.address:
                raise ValueError("DaskBatchMapper needs an address or a client")
            self.client = Client(self.address, set_as_default=False, timeout=CONNECT_TIMEOUT_S)
            self._owned = True
        return self.client

    def close(self) -> None:
        """Close the client this mapper connected (not one it was given)."""
        if self._owned and self.client is not None:
            self.client.close()
            self.client, self._owned = None, False

    def __call__(self, job: LevelJob, progress: RateLog) -> list[Pieces]:
        if not job.batches:
            return []
        client = self.connect()
        start = time.perf_counter()
        slots = sum(client.nthreads().values())
        tasks = split_batches(job, max(1, job.total_work // (self.tasks_per_slot * slots)))
        [shipped] = client.scatter([job], broadcast=True, direct=True, hash=False)
        ship_s = time.perf_counter() - start
        tag = uuid.uuid4().hex[:8]
        futures = {
            client.submit(
                train_ranker_batch, shipped, task, self.threads_per_worker,
                key=f"ranker-batch-{tag}-{i}", pure=False,
            ): i
            for i, task in enumerate(tasks)
        }  # fmt: skip
        try:
            done = self._collect(job, tasks, futures, progress)
        finally:
            client.cancel([shipped, *futures])
        record = self._record(job, tasks, done, ship_s, time.perf_counter() - start, client)
        self.logger.info(
            "%s: %s on %s, %.1f MB shipped once per worker, %.1f s",
            progress.what, counted(len(tasks), "task"), counted(record["workers"], "Dask worker"),
            record["shipped_bytes"] / 1e6, record["wall_s"],
        )  # fmt: skip
        return [done[i]["pieces"] for i in range(len(tasks))]

    @staticmethod
    def _collect(
        job: LevelJob, tasks: list[Task], futures: dict[Any, int], progress: RateLog
    ) -> dict[int, dict]:
        """Every task's result, counted into ``progress`` as it arrives."""
        done: dict[int, dict] = {}
        for future in as_completed(futures, loop=next(iter(futures)).client.loop):
            i = futures[future]
            done[i] = future.result()
            progress.update(*task_size(job, tasks[i]))
        return done

    def _record(
        self, job: LevelJob, tasks: list[Task], done: dict[int, dict], ship_s: float,
        wall_s: float, client: Client,
    ) -> dict[str, Any]:  # fmt: skip
        rows = []
        for i in sorted(done):
            nodes, work = task_size(job, tasks[i])
            rows.append(
                {
                    "task": i, "s": done[i]["s"], "cpu_s": done[i]["cpu_s"],
                    "worker": done[i]["worker"], "nodes": nodes, "work": work,
                    "node_chunk": tasks[i][1] is not None,
                    "result_bytes": pieces_bytes(done[i]["pieces"]),
                }
            )  # fmt: skip
        record = {
            "nodes": job.n_nodes, "batches": len(job.batches), "tasks_n": len(tasks),
            "total_work": job.total_work, "workers": len(client.nthreads()),
            "shipped_bytes": wire_bytes(job), "ship_s": ship_s, "wall_s": wall_s, "tasks": rows,
        }  # fmt: skip
        self.records.append(record)
        return record


@contextmanager
def ranker_cluster(
    dask: DaskConfig | None, logger: logging.Logger | logging.LoggerAdapter = log
) -> Iterator[DaskBatchMapper | None]:
    """Train the tree levels of the enclosed code on the cluster at ``dask.address`` (nothing
    changes when it is None or not set); yields the mapper (None when not set)."""
    if dask is None or not dask.address:
        yield None
        return
    mapper = DaskBatchMapper(dask.address, dask.threads_per_worker, logger=logger)
    try:
        with use_mapper(mapper):
            yield mapper
    finally:
        mapper.close()
