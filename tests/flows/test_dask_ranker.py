"""Tree levels trained on a real Dask cluster of two worker processes: the same W as in one
process, the level's job shipped once per worker (not per task), the config switch."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from dataclasses import fields

import numpy as np
import pytest
import scipy.sparse as sp
from distributed import Client, LocalCluster

from tasks.dask_ranker import DaskBatchMapper, ranker_cluster, train_ranker_batch
from xmc_core.config import DaskConfig, PredictConfig, RankerConfig, TreeConfig
from xmc_core.features.pifa import pifa, pifa_partial
from xmc_core.linear import solver
from xmc_core.linear.level_batches import current_mapper, in_process, use_mapper
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.solver import LevelJob, plan_level, train_level
from xmc_core.linear.tree import LabelTree
from xmc_core.progress import RateLog


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """Two worker processes of one thread each (started once for the module)."""
    with (
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster, set_as_default=False) as c,
    ):
        yield c


def _problem(n: int = 240, d: int = 60, k: int = 12, p: int = 4) -> tuple[sp.csr_matrix, ...]:
    """X csr (n, d) L2-normalized; Y (n, k); C (k, p): node j under parent j % p; M (n, p):
    each document in two parents."""
    rng = np.random.default_rng(0)
    X = sp.random(n, d, density=0.2, random_state=1, format="csr", dtype=np.float32)
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1) + 1e-12)))
    Y = sp.csr_matrix((X @ rng.normal(size=(d, k)) > 0.4).astype(np.float32))
    C = sp.csr_matrix((np.ones(k), (np.arange(k), np.arange(k) % p)), shape=(k, p))
    rows = np.repeat(np.arange(n), 2)
    cols = np.c_[np.arange(n) % p, (np.arange(n) + 1) % p].ravel()
    M = sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, p))
    return X, Y, C, M


def _same(a: sp.csc_matrix, b: sp.csc_matrix) -> None:
    assert a.shape == b.shape and a.nnz == b.nnz > 0
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_a_level_on_two_workers_equals_one_process(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(solver, "BATCH_ENTRIES", 1)  # one parent per batch: 4 tasks
    X, Y, C, M = _problem()
    cfg = RankerConfig(max_iter=5, threshold=0.01)
    mapper = DaskBatchMapper(client=client)
    R = sp.csr_matrix(Y * 2.0)  # importance weights travel with the job too
    for weights in (None, R):
        _same(
            train_level(X, Y, C, M, cfg, weights, mapper=mapper),
            train_level(X, Y, C, M, cfg, weights),
        )
    record = mapper.records[-1]
    assert record["batches"] == 4 and record["workers"] == 2 and record["nodes"] == 12
    # each parent (3 nodes) holds about a quarter of the work, above 1/8 (4 tasks per worker):
    # cut into chunks of its nodes
    assert 8 <= record["tasks_n"] <= 12 and all(t["node_chunk"] for t in record["tasks"])
    assert sum(t["nodes"] for t in record["tasks"]) == 12
    assert record["shipped_bytes"] > X.data.nbytes + X.indices.nbytes
    assert all(t["result_bytes"] > 0 and t["s"] > 0 for t in record["tasks"])


def test_a_whole_model_on_two_workers_equals_one_process(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(solver, "BATCH_ENTRIES", 2_000)
    X, Y, _, _ = _problem(n=300, d=80, k=40)
    tree = LabelTree.build(pifa([pifa_partial(X, Y)]), TreeConfig(branching=4, max_leaf_size=4))
    ranker = RankerConfig(max_iter=5, negatives="tfn+man", matcher_topk=2)
    here = XRLinearModel(ranker, PredictConfig()).fit(X, Y, tree)
    mapper = DaskBatchMapper(client=client)
    with use_mapper(mapper):
        there = XRLinearModel(ranker, PredictConfig()).fit(X, Y, tree)
    # one record per level, and per training of the leaf-cost search (scale 1 and its neighbours)
    assert tree.depth >= 3 and len(mapper.records) >= tree.depth + 3
    assert max(r["batches"] for r in mapper.records) >= 4
    for a, b in zip(here.weights_, there.weights_, strict=True):
        _same(a, b)


class CountingJob(LevelJob):
    """A LevelJob that counts, in each process, how many times it was deserialized there."""

    def __reduce__(self) -> tuple:
        return (_unpickled_job, tuple(getattr(self, f.name) for f in fields(self)))


UNPICKLED = 0


def _unpickled_job(*values: object) -> CountingJob:
    global UNPICKLED
    UNPICKLED += 1
    return CountingJob(*values)


def _unpickled_here() -> int:
    return UNPICKLED


def test_the_job_is_shipped_once_per_worker_not_per_task(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(solver, "BATCH_ENTRIES", 1)
    X, Y, C, M = _problem(p=8, k=24)
    planned = plan_level(X, Y, C, M, RankerConfig(max_iter=3))
    job = CountingJob(*(getattr(planned, f.name) for f in fields(planned)))
    assert len(job.batches) == 8
    before = client.run(_unpickled_here)
    mapper = DaskBatchMapper(client=client)
    pieces = mapper(job, RateLog(logging.getLogger(__name__), "level", total=job.n_nodes))
    after = client.run(_unpickled_here)
    # each worker deserialized the job exactly once, however many of the tasks it ran
    assert {w: after[w] - before[w] for w in after} == {w: 1 for w in after}
    ran = [t["worker"] for t in mapper.records[-1]["tasks"]]
    assert len(ran) >= 8 and max(ran.count(w) for w in after) >= 4
    _same(job.assemble(pieces), job.assemble(in_process(job, RateLog(solver.log, "", 0))))
    # the counter does see per-task shipping: the job given to each task deserializes per task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dask warns about a large object in the task graph
        futures = [
            client.submit(train_ranker_batch, job, (b, None), 1, pure=False)
            for b in job.batches[:3]
        ]
        client.gather(futures)
    assert sum(client.run(_unpickled_here).values()) - sum(after.values()) == 3


def test_progress_counts_the_batches_done(client: Client) -> None:
    X, Y, C, M = _problem()
    job = plan_level(X, Y, C, M, RankerConfig(max_iter=3))
    progress = RateLog(logging.getLogger(__name__), "level", job.n_nodes, total_work=job.total_work)
    DaskBatchMapper(client=client)(job, progress)
    assert (progress.count, progress.work) == (12, job.total_work)


def test_the_config_sets_the_mapper_only_with_an_address(client: Client) -> None:
    with ranker_cluster(DaskConfig()) as none, ranker_cluster(None) as also_none:
        assert none is None and also_none is None and current_mapper() is in_process
    address = client.scheduler.address
    with ranker_cluster(DaskConfig(address=address, threads_per_worker=2)) as mapper:
        assert isinstance(mapper, DaskBatchMapper) and current_mapper() is mapper
        assert mapper.client is None  # connected at the first level only
        X, Y, C, M = _problem()
        cfg = RankerConfig(max_iter=3)
        _same(train_level(X, Y, C, M, cfg), train_level(X, Y, C, M, cfg, mapper=in_process))
        assert mapper.client is not None and len(mapper.records) == 1
    assert mapper.client is None and current_mapper() is in_process  # closed, unset
