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
  documents. Work = (K / P) x nnz x c. Seconds = work x the seconds per unit of work of the
  mapped measured level (its 1-thread task times over its tasks' work).
- Tasks: a parent is never split. A parent's block of more than ``batch_entries`` entries is a
  task of its own (P tasks); else the level's entries are cut into batches of as many entries
  as the mapped measured level's batches held (its weight slots may have made them smaller than
  ``batch_entries``), at most P. Tasks of a level are taken as equal; N machines with
  ``slots`` task slots each run them in ceil(tasks / (N slots)) rounds, plus the measured Dask
  overhead per task, once per round.
- Shipping: the level's job (X, its targets and matching matrix) goes to every machine once:
  client -> first machine, then Dask's tree copy (``Scheduler.replicate``: each holder feeds up
  to two more per round, one after the other on its link): :func:`broadcast_copies` transfer
  times of ``bytes / bandwidth`` (2 for N=2, 4 for N=4, 6 for N=16). X's bytes scale with
  nnz, the label-side bytes with documents.
- Results: W's bytes per node grow with the parent's block (linearly, at most dense); they all
  reach the client, so a level takes at least ``result bytes / bandwidth``.
- The client's serial part per level (validate + plan, assemble) scales with nnz and with the
  result bytes. Deriving the targets and matching matrices, the tree and featurization are
  outside this model.
"""

from __future__ import annotations

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
    first = measured[0]
    docs_ratio = target["docs"] / first["docs"]
    nnz = first["nnz"] / first["docs"] * target["docs"]
    c = parents_joined(measured, parents, target["labels_per_doc"])
    ref = nearest_level(measured, parents)
    entries = nnz * c  # all the level's blocks
    block = entries / parents
    ref_block = ref["block_entries"] / ref["parents"]
    compute_s = ref["s_per_work"] * nodes / parents * entries
    n_tasks = parents  # a parent is never split
    if block < target["batch_entries"]:  # batches of the measured level's entries each
        per_batch = min(target["batch_entries"], ref["block_entries"] / ref["batches"])
        n_tasks = min(parents, math.ceil(entries / per_batch))
    weights_per_node = min(first["n_features"] + 1, ref["weights_per_node"] * block / ref_block)
    result_bytes = nodes * weights_per_node * ref["bytes_per_weight"]
    ship_bytes = ref["x_bytes"] * nnz / first["nnz"] + ref["label_bytes"] * docs_ratio
    serial_s = ref["plan_s"] * nnz / first["nnz"]
    serial_s += ref["assemble_s"] * result_bytes / max(ref["result_bytes"], 1)
    return {
        "parents": parents, "nodes": nodes, "mapped_to_level": ref["level"],
        "parents_per_doc": c, "compute_s": compute_s, "tasks": n_tasks,
        "task_s": compute_s / n_tasks, "ship_bytes": ship_bytes, "result_bytes": result_bytes,
        "client_serial_s": serial_s,
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


def level_time(level: dict[str, Any], machines: int, cfg: dict[str, Any]) -> dict[str, float]:
    """Seconds of one projected level on ``machines`` machines."""
    bandwidth = cfg["bandwidth_gbps"] * 1e9 / 8
    rounds = math.ceil(level["tasks"] / (machines * cfg["slots"]))
    compute = rounds * (level["task_s"] + cfg["overhead_per_task_s"])
    ship = broadcast_copies(machines) * level["ship_bytes"] / bandwidth
    gather = level["result_bytes"] / bandwidth
    total = level["client_serial_s"] + ship + max(compute, gather)
    return {"compute_s": compute, "ship_s": ship, "gather_s": gather, "total_s": total}


def simulate(
    measured: list[dict[str, Any]], target: dict[str, Any], machines: list[int]
) -> dict[str, Any]:
    """The projected levels of ``target`` and their cost on each machine count."""
    levels = [
        project_level(measured, p, k, target)
        for p, k in target_levels(target["labels"], TreeConfig(**target["tree"]))
    ]
    rows = []
    for n in machines:
        times = [level_time(level, n, target) for level in levels]
        total = sum(t["total_s"] for t in times)
        rows.append(
            {
                "machines": n, "total_s": total,
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
        f"{t['slots']} task slot(s) per machine, {t['bandwidth_gbps']:g} Gbit/s network.",
        "",
        "| level | parents | nodes | tasks | s per task | compute s | shipped MB | W MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, lv in enumerate(sim["levels"]):
        lines.append(
            f"| {i} | {lv['parents']:,} | {lv['nodes']:,} | {lv['tasks']:,} | {lv['task_s']:.2f} "
            f"| {lv['compute_s']:.0f} | {lv['ship_bytes'] / 1e6:.0f} "
            f"| {lv['result_bytes'] / 1e6:.0f} |"
        )
    lines += [
        "",
        "| machines | total s | compute s | shipping s | W to client s | client serial s "
        "| speedup | efficiency |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sim["machines"]:
        lines.append(
            f"| {r['machines']} | {r['total_s']:.0f} | {r['compute_s']:.0f} | {r['ship_s']:.1f} "
            f"| {r['gather_s']:.1f} | {r['client_serial_s']:.1f} | {r['speedup']:.1f} "
            f"| {100 * r['efficiency']:.0f}% |"
        )
    return lines
