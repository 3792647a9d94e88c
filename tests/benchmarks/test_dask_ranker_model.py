"""The simulation of XR-Linear's levels on N machines (benchmarks/dask_ranker_model.py): the
target tree, the tree copy, the projection of a level, both schedules and the machine table, on
hand-made measurements."""

from __future__ import annotations

import pytest
from dask_ranker_model import (
    broadcast_copies,
    level_time,
    makespan,
    project_level,
    schedule,
    simulate,
    target_levels,
)

from xmc_core.config import TreeConfig


def _measured() -> list[dict]:
    """Two measured levels of 1,000 docs, 10,000 nnz: a root over 4 nodes, 4 parents over 64
    (its largest task: one parent of 16 nodes, twice as slow per unit of work as the mean)."""
    common = {
        "docs": 1_000, "nnz": 10_000, "n_features": 999, "bytes_per_weight": 8.0,
        "x_bytes": 80_000, "label_bytes": 20_000, "plan_s": 0.1, "assemble_s": 0.2,
    }  # fmt: skip
    return [
        common | {"level": 0, "parents": 1, "nodes": 4, "block_entries": 10_000, "batches": 1,
                  "s_per_work": 1e-6, "weights_per_node": 100.0, "result_bytes": 3_200,
                  "max_task_s": 0.04, "max_task_nodes": 4, "skew": 1.0},
        common | {"level": 1, "parents": 4, "nodes": 64, "block_entries": 20_000, "batches": 2,
                  "s_per_work": 2e-6, "weights_per_node": 50.0, "result_bytes": 25_600,
                  "max_task_s": 0.3, "max_task_nodes": 16, "skew": 2.0},
    ]  # fmt: skip


def _target() -> dict:
    return {
        "labels": 64, "docs": 4_000, "labels_per_doc": 3.0,
        "tree": {"branching": 4, "max_leaf_size": 1}, "batch_entries": 50_000,
        "bandwidth_gbps": 8e-6, "slots": 1, "tasks_per_slot": 4, "overhead_per_task_s": 0.0,
    }  # fmt: skip


def test_the_target_tree_and_the_tree_copy() -> None:
    assert target_levels(1_000_000, TreeConfig()) == [
        (1, 4), (4, 64), (64, 1024), (1024, 16384), (16384, 1_000_000)
    ]  # fmt: skip
    assert [broadcast_copies(n) for n in (1, 2, 3, 4, 8, 9, 16)] == [1, 2, 3, 4, 5, 5, 6]


def test_a_level_scales_with_nnz_and_keeps_the_skew() -> None:
    top = project_level(_measured(), 1, 4, _target())
    # 4x the documents: 40,000 entries in one block, 4 nodes; one task, its nodes a quarter
    assert top["mapped_to_level"] == 0 and top["parents_per_doc"] == 1.0
    assert top["parent_tasks"] == 1 and top["compute_s"] == pytest.approx(1e-6 * 4 * 40_000)
    assert top["largest_task_s"] == top["compute_s"] and top["node_s"] == pytest.approx(0.04)
    assert top["ship_bytes"] == pytest.approx(4 * 80_000 + 4 * 20_000)
    assert top["result_bytes"] == pytest.approx(4 * 400 * 8)  # weights/node x 4 (block x 4)
    assert top["client_serial_s"] == pytest.approx(0.4 + 0.2 * 12_800 / 3_200)
    low = project_level(_measured(), 4, 64, _target())
    # 80,000 entries (2 per nnz) cut like the measured batches (10,000 entries): 8 > 4 parents;
    # the largest task grows 4x (nnz) with the same children per parent: 1.2 s of 16 nodes
    assert low["parent_tasks"] == 4 and low["compute_s"] == pytest.approx(2e-6 * 16 * 80_000)
    assert low["largest_task_s"] == pytest.approx(1.2) and low["node_s"] == pytest.approx(0.075)


def test_node_chunks_cut_the_largest_parent_but_never_a_node() -> None:
    level = {"compute_s": 12.0, "largest_task_s": 6.0, "parent_tasks": 3, "node_s": 0.5,
             "skew": 2.0, "nodes": 100}  # fmt: skip
    largest, others = schedule(level, 2, chunks=False, per_slot=4)
    assert (largest, others) == (6.0, [3.0, 3.0]) and makespan(largest, others, 2, 0.0) == 6.0
    # chunks of 12 / (4 x 2) = 1.5 s, the largest parent's twice as long (skew 2)
    largest, others = schedule(level, 2, chunks=True, per_slot=4)
    assert (largest, others) == (3.0, [1.5] * 6) and makespan(largest, others, 2, 0.0) == 6.0
    largest, others = schedule(level | {"node_s": 4.0}, 4, chunks=True, per_slot=4)
    assert largest == 4.0 and makespan(largest, others, 4, 0.0) == 4.0  # one node: 4 s


def test_machines_pay_for_the_copies_and_the_results() -> None:
    level = {"compute_s": 8.0, "largest_task_s": 2.0, "parent_tasks": 4, "node_s": 0.1,
             "skew": 1.0, "nodes": 64, "ship_bytes": 1_000, "result_bytes": 500,
             "client_serial_s": 1.0}  # fmt: skip
    cfg = {"bandwidth_gbps": 8e-6, "slots": 1, "tasks_per_slot": 1, "overhead_per_task_s": 0.5}
    one, four = level_time(level, 1, cfg), level_time(level, 4, cfg)  # 1,000 bytes/s
    assert (one["compute_s"], one["ship_s"], one["gather_s"], one["total_s"]) == (
        10.0, 1.0, 0.5, 12.0
    )  # fmt: skip
    assert (four["compute_s"], four["ship_s"], four["total_s"]) == (2.5, 4.0, 7.5)
    sim = simulate(_measured(), _target(), [1, 2])
    assert sim["label"].startswith("SIMULATION") and len(sim["levels"]) == 4  # [4, 16, 64, 64]
    first, second = sim["machines"]
    assert first["speedup"] == 1.0 and second["efficiency"] == pytest.approx(second["speedup"] / 2)
