"""End to end from raw text: xmc (ingest, featurize, train XR-Linear, predict) against PECOS's
own pipeline (its C++ TF-IDF, PIFA, ``Indexer.gen``, ``XLinearModel``), stage by stage.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/end_to_end.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,debian-deps] [--methods ours,pecos] [--repeats 3]
        [--no-cold] [--timeout 1800] [--peers-python .venv-peers/bin/python]
        [--out benchmarks/results/end-to-end-<date>.json]
    python benchmarks/end_to_end.py --report FILE   # re-summarize a results file and print

Each method runs ``benchmarks/end_to_end_runner.py`` in a fresh subprocess that starts from the
dataset's raw ``lines`` files and times every step (see that file); this process samples the
peak RSS of the child's process tree every 50 ms. Per dataset, first one **cold** run of ours
with an empty ``NUMBA_CACHE_DIR`` (a new folder: numba compiles every kernel on first use and
writes it there), then ``--repeats`` rounds of the methods, ours with that same, now filled,
cache folder (**warm**: each process still loads the cached kernels, and that is timed). The
cold run is reported apart and left out of the medians (``--no-cold``: no cold run; ours then
uses numba's default cache, next to the sources).

Metrics: the dataset is ingested once here (untimed) to build the reference label index (the
labels of the train split) and the test label matrix; each method's top-20 scores are mapped
to it by label name and scored with ``xmc_core.evaluation.metrics.evaluate`` (PSP@k with the
train label counts). Test labels outside the train labels count as misses for both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import scipy.sparse as sp
from families_runner import to_shared

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.schema import Policies
from xmc_core.evaluation.metrics import evaluate
from xmc_core.features.stages import fit_label_index
from xmc_core.model.contract import label_counts
from xmc_core.storage.atomic import write_text

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "end_to_end_runner.py"
DATASETS = "reuters21578-modapte,debian-deps"
METHODS = ("ours", "pecos")
TARGET = 0.8
"""Our total time / PECOS's, medians: at most this."""
COLD = "ours-cold"
SPLITS = ("train", "test")


# ---------------------------------------------------------------- reference labels
def reference(src: Path, workdir: Path) -> dict[str, Any]:
    """Ingest ``src`` (untimed) and build the reference label index and label matrices."""
    options = IngestOptions(policies=Policies(on_unlabeled="keep"))
    manifest = ingest("lines", src, workdir / "reference", options)
    corpus = Corpus(workdir / "reference")
    index = fit_label_index(corpus)
    Y = {s: index.encode(corpus.read_split(s, ["labels"]).column("labels")) for s in SPLITS}
    shutil.rmtree(workdir / "reference")
    return {
        "names": index.names.to_pylist(),
        "Y_train": Y["train"][0],
        "Y_test": Y["test"][0],
        "stats": {
            "source": str(src),
            "n_train": Y["train"][0].shape[0],
            "n_test": Y["test"][0].shape[0],
            "n_labels": len(index),
            "test_label_assignments_outside_train_labels": Y["test"][1],
            "ingest": {s: v.model_dump() for s, v in manifest.splits.items()},
        },
    }


def score(ref: dict[str, Any], outdir: Path) -> dict[str, Any]:
    """Every metric of the method's ``pred.npz`` (its columns named by ``labels.json``) on the
    reference test labels, and whether its label space is the reference's."""
    names = json.loads((outdir / "labels.json").read_text(encoding="utf-8"))
    pred = to_shared(sp.load_npz(outdir / "pred.npz").tocsr(), names, ref["names"])
    Y_train = ref["Y_train"]
    metrics = evaluate(
        ref["Y_test"], pred, XmcConfig().eval, label_counts(Y_train), Y_train.shape[0]
    )
    return {
        "metrics": metrics,
        "label_space_equal": sorted(names) == sorted(ref["names"]),
        "label_order_equal": names == ref["names"],
        "pred_nnz_per_doc": pred.nnz / pred.shape[0],
    }


# ---------------------------------------------------------------- one run
def run_method(
    method: str, src: Path, workdir: Path, ref: dict[str, Any], args: argparse.Namespace,
    numba_cache: Path | None,
) -> dict[str, Any]:  # fmt: skip
    """One runner subprocess of ``method`` (``ours-cold``: ours with an empty numba cache)."""
    name = "ours" if method == COLD else method
    python = sys.executable if name == "ours" else str(args.peers_python)
    outdir = workdir / f"out-{method}"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [python, str(RUNNER), name, str(src), str(outdir)]
    env = {"NUMBA_CACHE_DIR": str(numba_cache)} if numba_cache and name == "ours" else {}
    run: dict[str, Any] = {
        "command": shlex.join(cmd),
        "numba_cache_dir": env.get("NUMBA_CACHE_DIR", os.environ.get("NUMBA_CACHE_DIR")),
        "load_avg_before": os.getloadavg(),
    }
    log = workdir / f"{method}.log"
    run |= bench_common.measure(cmd, log, args.timeout, env=env)
    run["load_avg_after"] = os.getloadavg()
    if run["status"] != "ok":
        run["log_tail"] = log.read_text(errors="replace")[-3000:]
        return run
    run |= json.loads((outdir / "result.json").read_text(encoding="utf-8"))
    run |= score(ref, outdir)
    shutil.rmtree(outdir)
    return run


def brief(run: dict[str, Any]) -> str:
    """One progress line."""
    if run["status"] != "ok":
        return run["status"]
    stages = ", ".join(f"{k} {v:.2f}" for k, v in run["stages_s"].items())
    return (
        f"total {run['total_s']:.2f} s ({stages}), peak RSS {run['peak_rss_mb']:.0f} MB, "
        f"P@1 {100 * run['metrics']['P@1']:.2f}"
    )


def bench_dataset(src: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The reference labels, the cold run, then ``--repeats`` rounds of the methods."""
    ref = reference(src, workdir)
    cache = None if args.no_cold else workdir / "numba-cache"
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.methods}
    order = ([COLD] if cache is not None and "ours" in args.methods else []) + [
        m for _ in range(args.repeats) for m in args.methods
    ]
    cold: dict[str, Any] | None = None
    for method in order:
        run = run_method(method, src, workdir, ref, args, cache)
        print(f"  {src.name} {method}: {brief(run)}", flush=True)
        if method == COLD:
            cold = run
        else:
            runs[method].append(run)
    result = {"stats": ref["stats"], "methods": {m: summarize(r) for m, r in runs.items()}}
    if cold is not None:
        result["cold"] = cold
    result["target"] = target(result["methods"])
    return result


# ---------------------------------------------------------------- summaries
def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (stages, steps, total, metrics) and the max peak RSS over the successful runs."""
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {"status": runs[-1]["status"] if runs else "no runs", "runs": runs}

    def med(key: str) -> dict[str, float]:
        return {k: statistics.median(r[key][k] for r in ok) for k in ok[0][key]}

    return {
        "status": "ok",
        "n_ok_runs": len(ok),
        "stages_s_median": med("stages_s"),
        "steps_s_median": med("steps_s"),
        "total_s_median": statistics.median(r["total_s"] for r in ok),
        "total_s_min": min(r["total_s"] for r in ok),
        "total_cpu_s_median": statistics.median(r["total_cpu_s"] for r in ok),
        "untimed_s_median": statistics.median(r["untimed_s"] for r in ok),
        "process_wall_s_median": statistics.median(r["process_wall_s"] for r in ok),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in ok),
        "metrics": med("metrics"),
        "metrics_equal_across_runs": all(r["metrics"] == ok[0]["metrics"] for r in ok),
        "label_space_equal": all(r["label_space_equal"] for r in ok),
        "runs": runs,
    }


def target(methods: dict[str, Any]) -> dict[str, Any]:
    """Our median total / PECOS's <= TARGET; also the ratio of each repeat's pair of runs."""
    ours, pecos = methods.get("ours", {}), methods.get("pecos", {})
    if ours.get("status") != "ok" or pecos.get("status") != "ok":
        return {"available": False}
    ratio = ours["total_s_median"] / pecos["total_s_median"]
    pairs = zip(ours["runs"], pecos["runs"], strict=False)
    per_repeat = [
        a["total_s"] / b["total_s"] for a, b in pairs if a["status"] == b["status"] == "ok"
    ]
    return {
        "available": True, "ours_s": ours["total_s_median"], "pecos_s": pecos["total_s_median"],
        "ratio": ratio, "met": ratio <= TARGET, "ratio_per_repeat": per_repeat,
    }  # fmt: skip


# ---------------------------------------------------------------- report
TABLE_HEAD = (
    "| method | ingest / read s | featurize s | train s | predict s | total s | peak RSS MB "
    "| P@1 | P@5 |\n|---|" + "---:|" * 8
)


def row(name: str, stages: dict[str, float], total: float, rss: float, m: dict) -> str:
    """One table row: stages, total and peak RSS, P@1 and P@5 in %."""
    first = stages.get("ingest", stages.get("read", 0.0))
    cells = [first, stages["featurize"], stages["train"], stages["predict"], total]
    return (
        f"| {name} | " + " | ".join(f"{c:.2f}" for c in cells)
        + f" | {rss:.0f} | {100 * m['P@1']:.2f} | {100 * m['P@5']:.2f} |"
    )  # fmt: skip


def markdown(name: str, result: dict[str, Any]) -> str:
    """One dataset's table, its steps, the cold run and the target line."""
    s = result["stats"]
    lines = [f"#### {name}", "", f"{s['n_train']} train / {s['n_test']} test docs, "
             f"{s['n_labels']} labels (those of the train split).", "", TABLE_HEAD]  # fmt: skip
    steps = []
    for method, r in result["methods"].items():
        if r["status"] != "ok":
            lines.append(f"| {method} | {r['status']} |" + " |" * 7)
            continue
        lines.append(row(method, r["stages_s_median"], r["total_s_median"],
                         r["peak_rss_mb_max"], r["metrics"]))  # fmt: skip
        listed = ", ".join(f"{k} {v:.2f}" for k, v in r["steps_s_median"].items())
        steps.append(f"- {method} steps (median s): {listed}")
        steps.append(
            f"- {method}: CPU {r['total_cpu_s_median']:.2f} s in the timed steps, imports "
            f"{r['untimed_s_median']:.2f} s (untimed), whole process "
            f"{r['process_wall_s_median']:.2f} s"
        )
    cold = result.get("cold")
    if cold is not None and cold["status"] == "ok":
        lines.append(row("ours, cold (first process, empty numba cache)", cold["stages_s"],
                         cold["total_s"], cold["peak_rss_mb"], cold["metrics"]))  # fmt: skip
    elif cold is not None:
        lines.append(f"| ours, cold | {cold['status']} |" + " |" * 7)
    return "\n".join([*lines, "", *steps, *target_lines(result["target"]), ""])


def target_lines(t: dict[str, Any]) -> list[str]:
    """The target, met or not, with the numbers."""
    if not t["available"]:
        return ["- target: not evaluated (ours or PECOS did not finish)"]
    per = ", ".join(f"{x:.2f}x" for x in t["ratio_per_repeat"])
    verdict = "met" if t["met"] else "NOT met"
    return [
        f"- total ours/PECOS {t['ours_s']:.2f} / {t['pecos_s']:.2f} s = {t['ratio']:.2f}x "
        f"(target <= {TARGET}x): {verdict}",
        f"- total ours/PECOS repeat by repeat: {per}",
    ]


def resummarize(report: dict[str, Any]) -> None:
    """Recompute the summaries and targets of ``report`` from its runs (in place)."""
    for result in report["datasets"].values():
        result["methods"] = {m: summarize(r["runs"]) for m, r in result["methods"].items()}
        result["target"] = target(result["methods"])


# ---------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    today = dt.date.today().isoformat()
    repo = bench_common.REPO
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=repo.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-cold", action="store_true", help="no cold run of ours")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--peers-python", type=Path, default=repo / ".venv-peers/bin/python")
    p.add_argument("--out", type=Path, default=repo / f"benchmarks/results/end-to-end-{today}.json")
    p.add_argument("--report", type=Path, help="only re-summarize this results file and print")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := set(args.methods) - set(METHODS):
        p.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Benchmark every dataset, write the JSON atomically, print Markdown (or ``--report``)."""
    args = parse_args(argv)
    if args.report:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        resummarize(report)
        print("\n".join(markdown(n, r) for n, r in report["datasets"].items()))
        return 0
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/end_to_end.py", *given]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": bench_common.machine_info(
            args.peers_python if "pecos" in args.methods else None, ("libpecos", "numpy", "scipy")
        ),
        "git_start": bench_common.git_state(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "xmc_config": XmcConfig().model_dump(mode="json"),
        "load_average_start": os.getloadavg(),
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="xmc-end-to-end-") as tmp:
        for name in args.datasets.split(","):
            workdir = Path(tmp) / name
            workdir.mkdir()
            result = bench_dataset(args.datasets_root / name, workdir, args)
            report["datasets"][name] = result
            print(markdown(name, result), flush=True)
            shutil.rmtree(workdir)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = bench_common.git_state()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
