"""A SIMULATION, not a measurement: the projected cost of training XR-Linear's levels on N
machines for a larger problem, from the per-task times and transfer sizes measured by
``benchmarks/dask_ranker.py`` on a real (smaller) dataset.

The model, level by level (``tfn`` negatives: a document joins the parents of its labels):

- Tree: the target's level sizes are those ``LabelTree.build`` makes for ``labels`` labels
  (``planned_level_sizes``: branching 16, leaves of <= 100 labels). A target level with P
  parents maps to the measured level whose parent count is nearest in log scale.
- Work: a node's work is the entries (nonzeros of X) of its parent's block, as the solver's
  progress counts it. A level's blocks hold ``nnz x c`` entries, ``c`` (how many of the
  level's parents a document joins, entry-weighted) interpolated from the measured levels in
  log2(P), at most the labels per document; ``nnz`` = measured nnz per document x target
  documents. Work = (K / P) x nnz x c. Seconds = work x the CPU seconds per unit of work of
  the mapped measured level's 1-worker tasks (one solver thread; the worker process's CPU
  time, so the contention of a busy machine does not count): one dedicated core per slot.
- Skew: the measured level's largest task keeps its share (the head labels cover the same
  share of the documents at any size): its time grows with nnz and with the level's children
  per parent, at most the level's compute. One of its nodes (the unit no schedule cuts) takes
  its mean node time x the nnz growth (a node's block grows with the documents). ``skew`` =
  the largest task's share of the level's time / its share of the work.
- Two schedules. *Parents whole* (batches of parents only): a parent's block of more than
  ``batch_entries`` entries is a task of its own (P tasks), else the level is cut into
  batches of as many entries as the mapped level's batches held, at most P; the largest task
  as above, the others equal. *Node chunks* (what ``DaskBatchMapper`` does): tasks of
  1 / (``tasks_per_slot`` x slots) of the level's work; the largest parent's chunks take
  ``skew`` times the mean task, at least one node, at most the whole parent. Either way the
  largest task starts first, each other on the slot free first (:func:`makespan`), each task
  plus the measured Dask overhead per task.
- Shipping: the level's job (X, its targets and matching matrix) goes to every machine once:
  client -> first machine, then Dask's tree copy (``Scheduler.replicate``: each holder feeds up
  to two more per round, one after the other on its link): :func:`broadcast_copies` transfer
  times of ``bytes / bandwidth``. X's bytes scale with nnz, the label-side bytes with
  documents.
- Results: W's bytes per node grow with the parent's block (linearly, at most dense); they all
  reach the client, so a level takes at least ``result bytes / bandwidth``.
- The client's serial part per level (validate + plan, assemble) scales with nnz and with the
  result bytes. Deriving the targets and matching matrices, the tree and featurization are
  outside this model.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from xmc_core.config import TreeConfig
from xmc_core.linear.tree import planned_level_sizes


def target_levels(n_labels: int, tree: TreeConfig) -> list[tuple[int, int]]:
    """(parents, nodes) of every ranker level of the tree built for ``n_labels`` labels."""
    sizes = planned_level_sizes(n_labels, tree)
    return list(zip([1, *sizes[:-1]], sizes, strict=True))


def parents_joined(measured: list[dict[str, Any]], parents: int, cap: float) -> float:
    """Mean parents a document's entries join at a level of ``parents`` parents (the level's
    block entries / nnz): linear in log2 of the parent count through the measured levels, the
    last slope extended past the finest one, at most ``cap``."""
    xs = np.log2([m["parents"] for m in measured])
    ys = np.array([m["block_entries"] / m["nnz"] for m in measured])
    x = math.log2(parents)
    if x > xs[-1] and len(xs) > 1:
        slope = (ys[-1] - ys[-2]) / max(xs[-1] - xs[-2], 1e-9)
        return float(min(cap, ys[-1] + slope * (x - xs[-1])))
    return float(min(cap, np.interp(x, xs, ys)))


def nearest_level(measured: list[dict[str, Any]], parents: int) -> dict[str, Any]:
    """The measured level whose parent count is nearest to ``parents`` in log scale."""
    return min(measured, key=lambda m: (abs(math.log2(m["parents"] / parents)), -m["parents"]))


def project_level(
    measured: list[dict[str, Any]], parents: int, nodes: int, target: dict[str, Any]
) -> dict[str, Any]:
    """What one target level costs, machine count aside (see the module's docstring)."""
    first, ref = measured[0], nearest_level(measured, parents)
    nnz_ratio = target["docs"] * first["nnz"] / first["docs"] / first["nnz"]
    entries = first["nnz"] * nnz_ratio * parents_joined(measured, parents, target["labels_per_doc"])
    block, ref_block = entries / parents, ref["block_entries"] / ref["parents"]
    compute_s = ref["s_per_work"] * nodes / parents * entries
    n_tasks = parents  # parents whole: a parent is one task at least
    if block < target["batch_entries"]:  # batches of the measured level's entries each
        per_batch = min(target["batch_entries"], ref["block_entries"] / ref["batches"])
        n_tasks = min(parents, math.ceil(entries / per_batch))
    children_ratio = (nodes / parents) / (ref["nodes"] / ref["parents"])
    growth = nnz_ratio * children_ratio
    largest = compute_s if n_tasks == 1 else min(compute_s, ref["max_task_s"] * growth)
    largest = max(largest, compute_s / n_tasks)
    weights_per_node = min(first["n_features"] + 1, ref["weights_per_node"] * block / ref_block)
    result_bytes = nodes * weights_per_node * ref["bytes_per_weight"]
    serial_s = ref["plan_s"] * nnz_ratio
    serial_s += ref["assemble_s"] * result_bytes / max(ref["result_bytes"], 1)
    return {
        "parents": parents, "nodes": nodes, "mapped_to_level": ref["level"],
        "parents_per_doc": entries / (first["nnz"] * nnz_ratio), "compute_s": compute_s,
        "parent_tasks": n_tasks, "largest_task_s": largest,
        "node_s": min(largest, ref["max_task_s"] / ref["max_task_nodes"] * nnz_ratio),
        "skew": ref["skew"],
        "ship_bytes": ref["x_bytes"] * nnz_ratio + ref["label_bytes"] * target["docs"]
        / first["docs"],
        "result_bytes": result_bytes, "client_serial_s": serial_s,
    }  # fmt: skip


def broadcast_copies(machines: int) -> int:
    """Transfer times of one object to ``machines`` machines: client -> the first, then each
    round every holder sends it to up to two more (one after the other on its link)."""
    holders, steps = 1, 1
    while holders < machines:
        new = min(machines - holders, 2 * holders)
        steps += math.ceil(new / holders)
        holders += new
    return steps


def makespan(largest: float, others: list[float], slots: int, overhead_s: float) -> float:
    """Seconds until a level's last task ends on ``slots`` slots: the largest task first,
    then each of the others on the slot free first (Dask's greedy placement)."""
    loads = [0.0] * slots
    heapq.heapreplace(loads, largest + overhead_s)
    for task in others:
        heapq.heapreplace(loads, loads[0] + task + overhead_s)
    return max(loads)


def schedule(level: dict[str, Any], slots: int, chunks: bool, per_slot: int) -> tuple:
    """(largest task, the other tasks) of a level on ``slots`` slots, by either schedule."""
    compute, largest = level["compute_s"], level["largest_task_s"]
    n = level["parent_tasks"]
    if chunks:  # batches, heavier ones cut to a share of the level; a node is never cut
        mean = min(compute / n, compute / (per_slot * slots))
        largest = max(level["node_s"], mean, min(largest, level["skew"] * mean))
        n = min(level["nodes"], 1 + math.ceil(max(compute - largest, 0.0) / mean))
    rest = (compute - largest) / max(n - 1, 1)
    return largest, [rest] * (n - 1)


def level_time(
    level: dict[str, Any], machines: int, cfg: dict[str, Any], chunks: bool = True
) -> dict[str, float]:
    """Seconds of one projected level on ``machines`` machines."""
    bandwidth = cfg["bandwidth_gbps"] * 1e9 / 8
    slots = machines * cfg["slots"]
    largest, others = schedule(level, slots, chunks, cfg["tasks_per_slot"])
    compute = makespan(largest, others, slots, cfg["overhead_per_task_s"])
    ship = broadcast_copies(machines) * level["ship_bytes"] / bandwidth
    gather = level["result_bytes"] / bandwidth
    total = level["client_serial_s"] + ship + max(compute, gather)
    return {"compute_s": compute, "ship_s": ship, "gather_s": gather, "total_s": total}


def simulate(
    measured: list[dict[str, Any]], target: dict[str, Any], machines: list[int]
) -> dict[str, Any]:
    """The projected levels of ``target`` and their cost on each machine count, by either
    schedule (node chunks: the mapper's; parents whole: for comparison)."""
    levels = [
        project_level(measured, p, k, target)
        for p, k in target_levels(target["labels"], TreeConfig(**target["tree"]))
    ]
    rows = []
    for n in machines:
        times = [level_time(level, n, target) for level in levels]
        whole = sum(level_time(level, n, target, chunks=False)["total_s"] for level in levels)
        rows.append(
            {
                "machines": n, "total_s": sum(t["total_s"] for t in times),
                "parents_whole_total_s": whole,
                **{k: sum(t[k] for t in times) for k in ("compute_s", "ship_s", "gather_s")},
                "client_serial_s": sum(level["client_serial_s"] for level in levels),
                "network_bytes": sum(lv["ship_bytes"] * n + lv["result_bytes"] for lv in levels),
                "levels_s": [t["total_s"] for t in times],
            }
        )  # fmt: skip
    for row in rows:
        row["speedup"] = rows[0]["total_s"] / row["total_s"] * machines[0]
        row["efficiency"] = row["speedup"] / row["machines"]
    return {"label": "SIMULATION (projected, not measured)", "target": target,
            "levels": levels, "machines": rows}  # fmt: skip


def simulation_table(sim: dict[str, Any]) -> list[str]:
    """The simulation as markdown lines, labelled as such."""
    t = sim["target"]
    lines = [
        f"**Simulation, not a measurement**: {t['labels']:,} labels, {t['docs']:,} documents, "
        f"{t['slots']} task slot(s) (one core) per machine, {t['bandwidth_gbps']:g} Gbit/s.",
        "",
        "| level | parents | nodes | compute s | largest parent s | one node s | parent tasks "
        "| shipped MB | W MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, lv in enumerate(sim["levels"]):
        lines.append(
            f"| {i} | {lv['parents']:,} | {lv['nodes']:,} | {lv['compute_s']:.0f} "
            f"| {lv['largest_task_s']:.0f} | {lv['node_s']:.2f} | {lv['parent_tasks']:,} "
            f"| {lv['ship_bytes'] / 1e6:.0f} | {lv['result_bytes'] / 1e6:.0f} |"
        )
    lines += [
        "",
        "| machines | total s (node chunks) | speedup | efficiency | total s (parents whole) "
        "| compute s | shipping s | W to client s | client serial s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sim["machines"]:
        lines.append(
            f"| {r['machines']} | {r['total_s']:.0f} | {r['speedup']:.1f} "
            f"| {100 * r['efficiency']:.0f}% | {r['parents_whole_total_s']:.0f} "
            f"| {r['compute_s']:.0f} | {r['ship_s']:.1f} | {r['gather_s']:.1f} "
            f"| {r['client_serial_s']:.1f} |"
        )
    return lines
