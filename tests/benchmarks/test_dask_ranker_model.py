"""The simulation of XR-Linear's levels on N machines (benchmarks/dask_ranker_model.py): the
target tree, the tree copy, the projection of a level and the machine table, on hand-made
measurements."""

from __future__ import annotations

import math

import pytest
from dask_ranker_model import broadcast_copies, level_time, project_level, simulate, target_levels

from xmc_core.config import TreeConfig


def _measured() -> list[dict]:
    """Two measured levels of 1,000 docs, 10,000 nnz: a root over 4 nodes, 4 parents over 64."""
    common = {
        "docs": 1_000, "nnz": 10_000, "n_features": 999, "bytes_per_weight": 8.0,
        "x_bytes": 80_000, "label_bytes": 20_000, "plan_s": 0.1, "assemble_s": 0.2,
    }  # fmt: skip
    return [
        common | {"level": 0, "parents": 1, "nodes": 4, "block_entries": 10_000, "batches": 1,
                  "s_per_work": 1e-6, "weights_per_node": 100.0, "result_bytes": 3_200},
        common | {"level": 1, "parents": 4, "nodes": 64, "block_entries": 20_000, "batches": 2,
                  "s_per_work": 2e-6, "weights_per_node": 50.0, "result_bytes": 25_600},
    ]  # fmt: skip


def _target(**more: object) -> dict:
    return {"labels": 64, "docs": 4_000, "labels_per_doc": 3.0, "tree": {"branching": 4,
            "max_leaf_size": 1}, "batch_entries": 50_000, "bandwidth_gbps": 8e-9 * 1e3,
            "slots": 1, "overhead_per_task_s": 0.0} | more  # fmt: skip


def test_the_target_tree_and_the_tree_copy() -> None:
    assert target_levels(1_000_000, TreeConfig()) == [
        (1, 4), (4, 64), (64, 1024), (1024, 16384), (16384, 1_000_000)
    ]  # fmt: skip
    assert [broadcast_copies(n) for n in (1, 2, 3, 4, 8, 9, 16)] == [1, 2, 3, 4, 5, 5, 6]


def test_a_level_scales_with_nnz_and_keeps_parents_whole() -> None:
    top = project_level(_measured(), 1, 4, _target())
    # 4x the documents: 40,000 entries in one block (a parent is never split), 4 nodes each
    assert top["mapped_to_level"] == 0 and top["parents_per_doc"] == 1.0
    assert top["tasks"] == 1 and top["compute_s"] == pytest.approx(1e-6 * 4 * 40_000)
    assert top["ship_bytes"] == pytest.approx(4 * 80_000 + 4 * 20_000)
    assert top["result_bytes"] == pytest.approx(4 * 400 * 8)  # weights/node x 4 (block x 4)
    assert top["client_serial_s"] == pytest.approx(0.4 + 0.2 * 12_800 / 3_200)
    low = project_level(_measured(), 4, 64, _target())
    # 80,000 entries (2 per entry) cut like the measured batches (10,000 entries): 8 > 4 parents
    assert low["tasks"] == 4 and low["compute_s"] == pytest.approx(2e-6 * 16 * 80_000)


def test_machines_share_the_tasks_and_pay_for_the_copies() -> None:
    level = {"tasks": 5, "task_s": 2.0, "ship_bytes": 1_000, "result_bytes": 500,
             "client_serial_s": 1.0}  # fmt: skip
    cfg = {"bandwidth_gbps": 8e-6, "slots": 1, "overhead_per_task_s": 0.5}  # 1,000 bytes/s
    one, four = level_time(level, 1, cfg), level_time(level, 4, cfg)
    assert (one["compute_s"], one["ship_s"], one["total_s"]) == (12.5, 1.0, 14.5)
    assert (four["compute_s"], four["ship_s"], four["total_s"]) == (5.0, 4.0, 10.0)
    sim = simulate(_measured(), _target(), [1, 2])
    assert sim["label"].startswith("SIMULATION") and len(sim["levels"]) == 4  # [4, 16, 64, 64]
    first, second = sim["machines"]
    assert first["speedup"] == 1.0 and math.isclose(second["efficiency"], second["speedup"] / 2)
