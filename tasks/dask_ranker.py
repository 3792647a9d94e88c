"""The per-level ranker training on a Dask cluster: each batch of a tree level is one Dask task.

:class:`DaskBatchMapper` is a :class:`~xmc_core.linear.level_batches.BatchMapper`. For each level
it ships the level's job (the training matrix X, the targets, the matching matrix: what
``LevelJob.train`` reads) to every worker ONCE, with ``client.scatter(broadcast=True)``: the
client sends one copy to one worker and the scheduler copies it on, worker to worker, as a tree
(``Scheduler.replicate``). It then submits one task per batch that receives the future of that
copy, so a task carries only its parents' ids; the tasks run where the copy already is. The
pieces come back as the tasks finish, the level's progress counting the batches done, and the
copies are released. The result is the same W as in one process.

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
import numpy as np
from distributed import Client, as_completed, get_worker
from distributed.protocol import serialize

from xmc_core.config import DaskConfig
from xmc_core.linear.level_batches import Pieces, use_mapper
from xmc_core.linear.solver import LevelJob
from xmc_core.progress import RateLog

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 30


def train_ranker_batch(job: LevelJob, parents: np.ndarray, threads: int) -> dict[str, Any]:
    """On a worker: train one batch of ``job`` with at most ``threads`` solver threads in this
    process; returns its pieces, its seconds and the worker's address."""
    worker = get_worker()
    n_threads = max(1, threads // max(1, worker.state.nthreads))
    previous = numba.get_num_threads()
    numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
    start = time.perf_counter()
    try:
        pieces = job.train(parents)
    finally:
        numba.set_num_threads(previous)
    return {"pieces": pieces, "s": time.perf_counter() - start, "worker": worker.address}


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
    closed by :meth:`close`). ``records``: per level, what was shipped and each task's time."""

    address: str | None = None
    threads_per_worker: int = 1
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
        [shipped] = client.scatter([job], broadcast=True, direct=True, hash=False)
        ship_s = time.perf_counter() - start
        tag = uuid.uuid4().hex[:8]
        futures = {
            client.submit(
                train_ranker_batch, shipped, parents, self.threads_per_worker,
                key=f"ranker-batch-{tag}-{i}", pure=False,
            ): i
            for i, parents in enumerate(job.batches)
        }  # fmt: skip
        try:
            done = self._collect(job, futures, progress)
        finally:
            client.cancel([shipped, *futures])
        record = self._record(job, done, ship_s, time.perf_counter() - start, client)
        self.logger.info(
            "%s: %d batches on %d Dask workers, %.1f MB shipped once per worker, %.1f s",
            progress.what, len(job.batches), record["workers"], record["shipped_bytes"] / 1e6,
            record["wall_s"],
        )  # fmt: skip
        return [done[i]["pieces"] for i in range(len(job.batches))]

    @staticmethod
    def _collect(job: LevelJob, futures: dict[Any, int], progress: RateLog) -> dict[int, dict]:
        """Every task's result, counted into ``progress`` as it arrives."""
        done: dict[int, dict] = {}
        for future in as_completed(futures, loop=next(iter(futures)).client.loop):
            i = futures[future]
            done[i] = future.result()
            progress.update(*job.batch_size(job.batches[i]))
        return done

    def _record(
        self, job: LevelJob, done: dict[int, dict], ship_s: float, wall_s: float, client: Client
    ) -> dict[str, Any]:
        tasks = [
            {
                "batch": i, "s": done[i]["s"], "worker": done[i]["worker"],
                "nodes": job.batch_size(job.batches[i])[0],
                "work": job.batch_size(job.batches[i])[1],
                "result_bytes": pieces_bytes(done[i]["pieces"]),
            }
            for i in sorted(done)
        ]  # fmt: skip
        record = {
            "nodes": job.n_nodes, "batches": len(job.batches), "total_work": job.total_work,
            "workers": len(client.nthreads()),
            "shipped_bytes": wire_bytes(job), "ship_s": ship_s, "wall_s": wall_s, "tasks": tasks,
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
