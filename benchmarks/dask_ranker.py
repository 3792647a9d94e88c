"""XR-Linear's level training in one process vs on a Dask cluster of 1 and 2 worker processes,
and a SIMULATION of the cost on N machines for a larger problem (issue 17, point 5).

Usage, from the repository root::

    python benchmarks/dask_ranker.py [--dataset ../shared/datasets/debian-deps]
        [--prepared DIR] [--workers 1,2] [--machines 1,2,4,8,16]
        [--target-labels 1000000] [--target-docs 1000000] [--bandwidth-gbps 10] [--slots 1]
        [--out benchmarks/results/dask-ranker-<date>.json]

1. Features: ``bench_common.prepare`` (ingest + featurize once, reused from ``--prepared``).
2. The problem of every level, untimed: PIFA label features, the label tree, each level's
   targets and matching matrix (the default ``XmcConfig``: ``tfn`` negatives, so a level does
   not need the levels above).
3. In one process (numba on every core): each level's validate + plan, its batches (each
   timed), assemble.
4. For each worker count: a ``LocalCluster`` of that many worker processes of one thread,
   warmed up (imports, compiled kernels), then each level through ``DaskBatchMapper``: wall
   time, the time to ship the job, each task's time on its worker, the bytes shipped (the
   job's serialized frames, once per worker) and returned (each batch's arrays). Every W is
   checked identical to the one-process W (the script exits 1 otherwise).
5. The simulation (``benchmarks/dask_ranker_model.py``, its model in its docstring) from the
   1-worker task times (one thread each, no other worker competing for the cores).

Writes the results JSON and prints a markdown summary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numba
import numpy as np
import scipy.sparse as sp
from dask_ranker_model import simulate, simulation_table
from distributed import Client, LocalCluster

from tasks.dask_ranker import DaskBatchMapper, wire_bytes
from xmc_core.config import XmcConfig
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.linear import solver
from xmc_core.linear.levels import level_problems
from xmc_core.linear.solver import LevelJob, plan_level
from xmc_core.linear.tree import LabelTree
from xmc_core.progress import RateLog

REPO = bench_common.REPO
log = logging.getLogger("dask_ranker")
Problem = tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]  # (targets, C, M) of a level


def load_features(args: argparse.Namespace) -> tuple[sp.csr_matrix, sp.csr_matrix, dict]:
    """X, Y of the training split (prepared once) and the dataset's statistics."""
    folder = args.prepared or Path(tempfile.mkdtemp(prefix="dask-ranker-"))
    stats_file = folder / "stats.json"
    if not stats_file.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        stats_file.write_text(json.dumps(bench_common.prepare(args.dataset, folder)) + "\n")
    X = sp.load_npz(folder / "X_train.npz").tocsr()
    Y = sp.load_npz(folder / "Y_train.npz").tocsr()
    return X, Y, json.loads(stats_file.read_text())


def level_inputs(X: sp.csr_matrix, Y: sp.csr_matrix, cfg: XmcConfig) -> tuple[list[Problem], dict]:
    """Every level's (targets, C, M) and the tree's sizes and build time."""
    start = time.perf_counter()
    Z = concat_label_features([pifa([pifa_partial(X, Y)])], [1.0])
    tree = LabelTree.build(Z, cfg.tree)
    tree_s = time.perf_counter() - start
    problems = []
    for t in range(tree.depth):
        targets, M = level_problems(X, Y, tree.C, t, [], cfg.ranker, cfg.predict.post_processor)
        problems.append((targets[t], tree.C[t], M))
    return problems, {"level_sizes": tree.level_sizes(), "tree_s": tree_s}


def job_bytes(job: LevelJob) -> dict[str, int]:
    """Bytes of the job on the wire, and of its X arrays (the rest: targets, matching matrix)."""
    X = job.level.X
    x_bytes = int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    total = wire_bytes(job)
    return {"shipped_bytes": total, "x_bytes": x_bytes, "label_bytes": total - x_bytes}


def in_process(X: sp.csr_matrix, problems: list[Problem], cfg: XmcConfig) -> list[dict]:
    """Each level in this process: plan, every batch (timed), assemble; with W."""
    out = []
    for t, (targets, C, M) in enumerate(problems):
        start = time.perf_counter()
        job = plan_level(X, targets, C, M, cfg.ranker)
        plan_s = time.perf_counter() - start
        pieces, batch_s, cpu_s = [], [], []
        for parents in job.batches:
            begin, cpu = time.perf_counter(), time.process_time()
            pieces.append(job.train(parents))
            batch_s.append(time.perf_counter() - begin)
            cpu_s.append(time.process_time() - cpu)
        begin = time.perf_counter()
        W = job.assemble(pieces)
        assemble_s = time.perf_counter() - begin
        out.append(
            {
                "level": t, "parents": C.shape[1], "nodes": C.shape[0], "docs": X.shape[0],
                "docs_in_parents": int(M.nnz), "batches": len(job.batches),
                "block_entries": int(job.parent_entries.sum()),
                "total_work": job.total_work, "plan_s": plan_s, "batch_s": batch_s,
                "batch_cpu_s": cpu_s, "assemble_s": assemble_s,
                "wall_s": time.perf_counter() - start,
                "W_nnz": int(W.nnz), "W": W, **job_bytes(job),
            }
        )  # fmt: skip
    return out


def warm_worker() -> int:
    """On a worker: import the solver and load its compiled kernels (a tiny level)."""
    rng = np.random.default_rng(0)
    X = sp.random(40, 10, density=0.3, random_state=0, format="csr", dtype=np.float32)
    Y = sp.csr_matrix((rng.random((40, 2)) > 0.5).astype(np.float32))
    solver.train_level(X, Y, sp.csr_matrix(np.ones((2, 1))), sp.csr_matrix(np.ones((40, 1))),
                       XmcConfig().ranker)  # fmt: skip
    return numba.get_num_threads()


def on_cluster(
    X: sp.csr_matrix, problems: list[Problem], cfg: XmcConfig, n_workers: int, here: list[dict]
) -> dict[str, Any]:
    """Each level through the Dask mapper on ``n_workers`` worker processes of one thread."""
    start = time.perf_counter()
    with (
        LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                     dashboard_address=None) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):  # fmt: skip
        started_s = time.perf_counter() - start
        client.run(warm_worker)
        levels = []
        for t, (targets, C, M) in enumerate(problems):
            mapper = DaskBatchMapper(client=client)
            begin = time.perf_counter()
            job = plan_level(X, targets, C, M, cfg.ranker)
            progress = RateLog(log, f"level {t}", job.n_nodes, total_work=job.total_work)
            W = job.assemble(mapper(job, progress))
            wall = time.perf_counter() - begin
            record = mapper.records[-1] | {
                "level": t,
                "wall_s": wall,
                "mapper_wall_s": mapper.records[-1]["wall_s"],
            }
            record["identical_to_in_process"] = bool((here[t]["W"] != W).nnz == 0)
            levels.append(record)
    return {"workers": n_workers, "cluster_start_s": started_s, "levels": levels}


def model_inputs(here: list[dict], one_worker: dict, stats: dict) -> list[dict[str, Any]]:
    """Per measured level, what the simulation reads: the 1-worker tasks' CPU seconds (their
    wall seconds in results written before CPU time was recorded)."""
    out = []
    for h, d in zip(here, one_worker["levels"], strict=True):
        tasks = d["tasks"]
        cpu = [task.get("cpu_s", task["s"]) for task in tasks]
        result = sum(task["result_bytes"] for task in tasks)
        big = tasks[int(np.argmax(cpu))]
        time_share, work_share = max(cpu) / sum(cpu), big["work"] / max(d["total_work"], 1)
        out.append(
            {
                "level": h["level"], "parents": h["parents"], "nodes": h["nodes"],
                "docs": h["docs"], "block_entries": h["block_entries"], "batches": h["batches"],
                "nnz": stats["nnz_train"], "n_features": stats["n_features"],
                "s_per_work": sum(cpu) / max(d["total_work"], 1), "max_task_s": max(cpu),
                "max_task_nodes": big["nodes"], "skew": time_share / max(work_share, 1e-12),
                "weights_per_node": h["W_nnz"] / h["nodes"],
                "bytes_per_weight": result / max(h["W_nnz"], 1), "result_bytes": result,
                "x_bytes": h["x_bytes"], "label_bytes": h["label_bytes"],
                "plan_s": h["plan_s"], "assemble_s": h["assemble_s"],
            }
        )  # fmt: skip
    return out


def overhead_per_task(run: dict[str, Any]) -> float:
    """Seconds per task a level spends beyond shipping and the tasks themselves (scheduling,
    results coming back), over every level of a 1-worker run."""
    extra = sum(lv["mapper_wall_s"] - lv["ship_s"] - sum(t["s"] for t in lv["tasks"])
                for lv in run["levels"])  # fmt: skip
    return max(0.0, extra / sum(lv["batches"] for lv in run["levels"]))


def spread(times: list[float]) -> str:
    """min / median / max of task times, in seconds."""
    return f"{min(times):.2f} / {float(np.median(times)):.2f} / {max(times):.2f}"


def measured_table(here: list[dict], runs: list[dict]) -> list[str]:
    """The measured figures as markdown lines."""
    names = [f"{r['workers']}w" for r in runs]
    lines = [
        f"| level | nodes | batches | tasks ({', '.join(names)}) | in-process s | "
        + " | ".join(f"{n} s" for n in names)
        + " | shipped MB (per worker) | returned MB | task s, min / median / max ("
        + ", ".join(names) + ") | task CPU s, sum (" + ", ".join(names) + ") |",
        "|---:|---:|---:|---:|---:|" + "---:|" * len(runs) + "---:|---:|---|---|",
    ]  # fmt: skip
    for t, h in enumerate(here):
        levels = [r["levels"][t] for r in runs]
        tasks = "; ".join(spread([x["s"] for x in lv["tasks"]]) for lv in levels)
        cpu = ", ".join(f"{sum(x.get('cpu_s', 0.0) for x in lv['tasks']):.1f}" for lv in levels)
        lines.append(
            f"| {t} | {h['nodes']:,} | {h['batches']} "
            f"| {', '.join(str(len(lv['tasks'])) for lv in levels)} | {h['wall_s']:.2f} | "
            + " | ".join(f"{lv['wall_s']:.2f}" for lv in levels)
            + f" | {h['shipped_bytes'] / 1e6:.1f} "
            f"| {sum(x['result_bytes'] for x in levels[0]['tasks']) / 1e6:.1f} | {tasks} | {cpu} |"
        )
    totals = " | ".join(f"**{sum(lv['wall_s'] for lv in r['levels']):.2f}**" for r in runs)
    lines.append(f"| all | | | | **{sum(h['wall_s'] for h in here):.2f}** | {totals} | | | | |")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, default=REPO.parent / "shared/datasets/debian-deps")
    p.add_argument("--prepared", type=Path, help="folder of prepare()'s output (made if absent)")
    p.add_argument("--workers", default="1,2", help="worker process counts, comma-separated")
    p.add_argument("--machines", default="1,2,4,8,16", help="simulated machine counts")
    p.add_argument("--target-labels", type=int, default=1_000_000)
    p.add_argument("--target-docs", type=int, default=1_000_000)
    p.add_argument("--bandwidth-gbps", type=float, default=10.0, help="simulated network")
    p.add_argument("--slots", type=int, default=1, help="simulated task slots per machine")
    p.add_argument("--from-results", type=Path, help="redo only the simulation from this file")
    p.add_argument(
        "--out", type=Path, default=REPO / f"benchmarks/results/dask-ranker-{today}.json"
    )
    return p.parse_args(argv)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every measured figure (see the module's docstring), with the machine's load."""
    cfg = XmcConfig()
    X, Y, stats = load_features(args)
    problems, tree = level_inputs(X, Y, cfg)
    load = [os.getloadavg()[0]]
    here = in_process(X, problems, cfg)
    load.append(os.getloadavg()[0])
    runs = []
    for n in args.workers.split(","):
        runs.append(on_cluster(X, problems, cfg, int(n), here))
        load.append(os.getloadavg()[0])
    return {
        "dataset": stats | {"name": args.dataset.name, "labels_per_doc": Y.nnz / Y.shape[0]},
        "tree": tree, "numba_threads_in_process": numba.get_num_threads(),
        "in_process": [{k: v for k, v in h.items() if k != "W"} for h in here], "dask": runs,
        "all_identical": all(lv["identical_to_in_process"] for r in runs for lv in r["levels"]),
        "load_average_1min": load, "machine": bench_common.machine_basics(),
        "git": bench_common.git_state(),
    }  # fmt: skip


def with_simulation(result: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``result`` with the simulation made from its 1-worker run (see dask_ranker_model)."""
    one = next(r for r in result["dask"] if r["workers"] == 1)
    target = {
        "labels": args.target_labels, "docs": args.target_docs,
        "labels_per_doc": result["dataset"]["labels_per_doc"],
        "tree": XmcConfig().tree.model_dump(), "batch_entries": solver.BATCH_ENTRIES,
        "bandwidth_gbps": args.bandwidth_gbps, "slots": args.slots,
        "tasks_per_slot": DaskBatchMapper.tasks_per_slot,
        "overhead_per_task_s": overhead_per_task(one),
    }  # fmt: skip
    measured = model_inputs(result["in_process"], one, result["dataset"])
    machines = [int(n) for n in args.machines.split(",")]
    return result | {"model_inputs": measured, "simulation": simulate(measured, target, machines)}


def summary(result: dict[str, Any], out: Path) -> list[str]:
    """The markdown summary of a results file."""
    stats, runs = result["dataset"], result["dask"]
    load = ", ".join(f"{x:.1f}" for x in result.get("load_average_1min", []))
    return [
        f"## XR-Linear levels on Dask: {stats['name']} ({stats['n_train']:,} docs, "
        f"{stats['n_labels']:,} labels, levels {result['tree']['level_sizes']})", "",
        *measured_table(result["in_process"], runs), "",
        f"W identical in every run: {result['all_identical']}; in-process numba threads: "
        f"{result['numba_threads_in_process']}; 1-min load average before/after each: {load}",
        "", *simulation_table(result["simulation"]), "", f"results: {out}",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_results:  # only the simulation again, from measured figures
        result = json.loads(args.from_results.read_text())
        result["dataset"].setdefault("name", args.dataset.name)
        result["dataset"].setdefault(
            "labels_per_doc", result["simulation"]["target"]["labels_per_doc"]
        )
    else:
        result = measure(args)
    result = with_simulation(result, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(args.out)
    print("\n".join(summary(result, args.out)))
    return 0 if result["all_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
