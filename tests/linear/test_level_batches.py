"""A level's work as independent tasks: batches cut into runs of parents and chunks of a
parent's children, each trained alone, the same W whichever mapper trains them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear.level_batches import (
    current_mapper,
    in_process,
    split_batches,
    task_size,
    use_mapper,
)
from xmc_core.linear.solver import LevelJob, plan_level, train_level

CFG = RankerConfig(max_iter=5, threshold=0.0)


def _job() -> tuple[LevelJob, tuple[sp.csr_matrix, ...]]:
    """10 docs of 2 nonzeros each; parent 0 (docs 0-9) has nodes 0-3, parent 1 (docs 0-4)
    nodes 4-5, parent 2 (docs 5-9) nodes 6-7: work 4 x 20 + 2 x 10 + 2 x 10 = 120."""
    rows = np.repeat(np.arange(10), 2)
    X = sp.csr_matrix((np.full(20, 0.5**0.5), (rows, np.arange(20) % 7)), shape=(10, 7))
    Y = sp.csr_matrix((np.ones(10), (np.arange(10), np.arange(10) % 8)), shape=(10, 8))
    C = sp.csr_matrix((np.ones(8), (np.arange(8), [0, 0, 0, 0, 1, 1, 2, 2])), shape=(8, 3))
    M = sp.lil_matrix((10, 3))
    M[:, 0], M[:5, 1], M[5:, 2] = 1, 1, 1
    inputs = (X, Y, C, sp.csr_matrix(M))
    return plan_level(*inputs, CFG), inputs


def _tasks(tasks: list) -> list:
    return [(p.tolist(), None if n is None else n.tolist()) for p, n in tasks]


def test_heavy_batches_are_cut_into_parents_and_node_chunks() -> None:
    job, _ = _job()
    assert job.total_work == 120 and job.parent_entries.tolist() == [20, 10, 10]
    assert _tasks(split_batches(job, 120)) == [([0, 1, 2], None)]
    tasks = split_batches(job, 40)
    assert _tasks(tasks) == [([0], [0, 1]), ([0], [2, 3]), ([1, 2], None)]
    assert [task_size(job, t) for t in tasks] == [(2, 40), (2, 40), (4, 40)]
    # a node is the unit: never cut further
    assert _tasks(split_batches(job, 1)) == [
        ([p], [n]) for n, p in enumerate([0] * 4 + [1, 1, 2, 2])
    ]


def test_a_node_chunk_trains_only_its_nodes_with_the_same_weights() -> None:
    job, inputs = _job()
    whole = train_level(*inputs, CFG)
    pieces = [job.train(parents, nodes=nodes) for parents, nodes in split_batches(job, 40)]
    assert pieces[1][0].tolist() == [2, 3]  # (nodes, counts, rows, values) of the chunk
    W = job.assemble(pieces)
    assert whole.nnz > 0 and (whole != W).nnz == 0
    np.testing.assert_array_equal(W.indptr, whole.indptr)


def test_the_mapper_is_injected_or_set_around_the_code() -> None:
    _, inputs = _job()
    seen: list[int] = []

    def counting(job: LevelJob, progress: object) -> list:
        seen.append(len(job.batches))
        return in_process(job, progress)  # type: ignore[arg-type]

    assert current_mapper() is in_process
    expected = train_level(*inputs, CFG)
    assert (train_level(*inputs, CFG, mapper=counting) != expected).nnz == 0
    with use_mapper(counting):
        assert current_mapper() is counting
        assert (train_level(*inputs, CFG) != expected).nnz == 0
    assert current_mapper() is in_process and seen == [1, 1]


def test_a_chunk_must_hold_nodes_of_the_parents() -> None:
    job, _ = _job()
    pieces = job.train(np.array([1]), nodes=np.array([0, 4]))  # node 0 is under parent 0
    assert pieces[0].tolist() == [4]
    with pytest.raises(IndexError):
        job.train(np.array([1]), nodes=np.array([8]))
