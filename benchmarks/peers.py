"""XR-Linear vs peers: xmc, PECOS XR-Linear, napkinXC PLT and Omikuji on one shared TF-IDF.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/peers.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps]
        [--methods ours,pecos,napkinxc,omikuji] [--repeats 1] [--timeout 1200]
        [--peers-python .venv-peers/bin/python] [--out benchmarks/results/peers-<date>.json]
    python benchmarks/peers.py --report benchmarks/results/peers-<date>.json  # re-summarize only

Each dataset is ingested (``lines`` importer) and featurized ONCE with our pipeline and the
default ``XmcConfig`` (word uni+bigram TF-IDF, 200,000 features, sublinear tf) into a temporary
folder, as float32 csr ``.npz`` files. Each method then runs ``benchmarks/peer_runner.py`` in its
own subprocess (ours with this interpreter, the peers with ``--peers-python``), which builds its
own label tree from X/Y, trains, predicts the top 20 labels of every test document and saves its
model. This process samples the peak RSS of the child's process tree every 50 ms, measures the
saved model folder and computes every metric with ``xmc_core.evaluation.metrics`` (the same
evaluation for every method; PSP@k with the training label counts, A=0.55, B=1.5). The shared
parts live in ``benchmarks/bench_common.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_common import (  # benchmarks/ (the script's folder) is on sys.path
    METRICS,
    REPO,
    git_state,
    machine_info,
    prepare,
    result_cells,
    run_once,
    summarize,
    table_head,
)

from xmc_core.config import XmcConfig

DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
METHODS = ("ours-cold", "ours", "pecos", "napkinxc", "omikuji")
PEERS = ("pecos", "napkinxc", "omikuji")
LIMITS = {"train_s_median": 1.0, "predict_ms_per_1k_median": 0.15, "peak_rss_mb_max": 1.0}
"""Issue 38's ceilings on ours / PECOS (medians; peak RSS the largest over the repeats); the
train time must also be <= that of the peer with the best P@1."""


def bench_dataset(src: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare one dataset, then every method ``--repeats`` times, methods interleaved, repeat
    r with seed r (``XMC_BENCH_SEED``: every method that takes a seed); ``ours-cold`` runs
    once, first, with an empty numba cache."""
    result: dict[str, Any] = {"stats": prepare(src, workdir)}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.methods}
    for repeat in range(args.repeats):
        for method in args.methods:
            if method == "ours-cold" and repeat > 0:
                continue
            python = sys.executable if method.startswith("ours") else str(args.peers_python)
            env = {"XMC_BENCH_SEED": str(repeat)}  # each repeat its own seed
            if method == "ours-cold":
                env["NUMBA_CACHE_DIR"] = str(workdir / "numba-cold")
            runs[method].append(run_once(method, python, workdir, args.timeout, env))
            print(f"  {src.name} {method}: {brief(runs[method][-1])}", flush=True)
    shutil.rmtree(workdir / "numba-cold", ignore_errors=True)
    result["methods"] = {m: summarize(rs) for m, rs in runs.items()}
    result["targets"] = targets(result["methods"])
    return result


def brief(run: dict[str, Any]) -> str:
    """One progress line."""
    if run["status"] != "ok":
        return run["status"]
    cold = f" (compile {run['compile_s']:.1f} s)" if "compile_s" in run else ""
    return (
        f"train {run['train_s']:.2f} s{cold}, predict {run['predict_ms_per_1k_docs']:.0f} ms/1k, "
        f"peak RSS {run['peak_rss_mb']:.0f} MB, P@1 {100 * run['metrics']['P@1']:.2f}"
    )


# ---------------------------------------------------------------- targets
def targets(methods: dict[str, Any]) -> dict[str, Any]:
    """Issue 38's targets for ``ours`` (medians): P@1 >= the best peer's; P@5 and PSP@5 >=
    PECOS's; train, predict and peak RSS ratios to PECOS within :data:`LIMITS`, train time <=
    the best-P@1 peer's; plus the train-time ratio of each repeat (its runs ran minutes apart)."""
    ours, pecos = methods.get("ours", {}), methods.get("pecos", {})
    if ours.get("status") != "ok" or pecos.get("status") != "ok":
        return {"available": False}
    out: dict[str, Any] = {"available": True}
    peers = {
        m: methods[m]["metrics"]["P@1"] for m in PEERS if methods.get(m, {}).get("status") == "ok"
    }
    best = max(peers, key=peers.__getitem__)
    p1 = ours["metrics"]["P@1"]
    out["P@1"] = {"ours": p1, "best_peer": best, "peer": peers[best], "met": p1 >= peers[best]}
    for metric in ("P@5", "PSP@5"):
        mine, ref = ours["metrics"][metric], pecos["metrics"][metric]
        out[metric] = {"ours": mine, "pecos": ref, "met": mine >= ref}
    for key, limit in LIMITS.items():
        ratio = ours[key] / pecos[key]
        out[key] = {"ours": ours[key], "pecos": pecos[key], "ratio": ratio, "limit": limit,
                    "met": ratio <= limit}  # fmt: skip
    best_s = methods[best]["train_s_median"]
    out["train_vs_best_peer"] = {"peer": best, "ours": ours["train_s_median"], "theirs": best_s,
                                 "met": ours["train_s_median"] <= best_s}  # fmt: skip
    pairs = zip(ours["runs"], pecos["runs"], strict=False)
    out["train_ratio_per_repeat"] = [
        a["train_s"] / b["train_s"] for a, b in pairs if a["status"] == b["status"] == "ok"
    ]
    cold = methods.get("ours-cold", {})
    if cold.get("status") == "ok":
        run = cold["runs"][0]
        out["cold"] = {k: run[k] for k in ("train_s", "warm_train_s", "compile_s")}
    return out


# ---------------------------------------------------------------- report
def markdown(name: str, result: dict[str, Any]) -> str:
    """One dataset's table (metrics in %) and its target lines."""
    lines = table_head(name, result["stats"])
    for method, r in result["methods"].items():
        if r["status"] != "ok":
            lines.append(f"| {method} | {r['status']} |" + " |" * (3 + len(METRICS)))
            continue
        lines.append(f"| {method} | " + " | ".join(result_cells(r)) + " |")
    return "\n".join([*lines, "", *verdict_lines(result["targets"]), ""])


def verdict_lines(t: dict[str, Any]) -> list[str]:
    """The targets, met or not, with the numbers."""
    if not t["available"]:
        return ["- targets: not evaluated (ours or PECOS did not finish)"]

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    p = t["P@1"]
    lines = [
        f"- P@1 ours {100 * p['ours']:.2f} vs best peer ({p['best_peer']}) "
        f"{100 * p['peer']:.2f}: {met(p['met'])}"
    ]
    for metric in ("P@5", "PSP@5"):
        m = t[metric]
        ours, pecos = f"{100 * m['ours']:.2f}", f"{100 * m['pecos']:.2f}"
        lines.append(f"- {metric} ours {ours} vs PECOS {pecos}: {met(m['met'])}")
    names = {"train_s_median": "train", "predict_ms_per_1k_median": "predict",
             "peak_rss_mb_max": "peak RSS"}  # fmt: skip
    for key, name in names.items():
        r = t[key]
        lines.append(
            f"- {name} ours/PECOS {r['ours']:.4g} / {r['pecos']:.4g} = {r['ratio']:.2f}x "
            f"(target <= {r['limit']}x): {met(r['met'])}"
        )
    if "train_vs_best_peer" in t:  # results written before issue 38 lack it
        b = t["train_vs_best_peer"]
        lines.append(
            f"- train ours {b['ours']:.4g} s vs the best-P@1 peer ({b['peer']}) "
            f"{b['theirs']:.4g} s: {met(b['met'])}"
        )
    per_repeat = ", ".join(f"{x:.2f}x" for x in t["train_ratio_per_repeat"])
    lines.append(f"- train ours/PECOS repeat by repeat: {per_repeat}")
    if "cold" in t:
        c = t["cold"]
        lines.append(
            f"- first run with an empty numba cache: train {c['train_s']:.2f} s (warm, same "
            f"process: {c['warm_train_s']:.2f} s); compiling train + predict kernels "
            f"{c['compile_s']:.1f} s, paid once per install"
        )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    p.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers/bin/python")
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/peers-{today}.json")
    p.add_argument("--report", type=Path, help="only re-summarize this results JSON and print")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := set(args.methods) - set(METHODS):
        p.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    return args


def resummarize(path: Path) -> None:
    """Recompute the summaries and targets of a results file from its runs; print Markdown."""
    report = json.loads(path.read_text(encoding="utf-8"))
    for name, result in report["datasets"].items():
        result["methods"] = {m: summarize(r["runs"]) for m, r in result["methods"].items()}
        result["targets"] = targets(result["methods"])
        print(markdown(name, result))
    report["resummarized_by"] = shlex.join(["python", *sys.argv])
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def main() -> int:
    """Benchmark every dataset, write the JSON, print Markdown."""
    args = parse_args()
    if args.report:
        resummarize(args.report)
        return 0
    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(args.peers_python),
        "git_start": git_state(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "xmc_config": XmcConfig().model_dump(mode="json"),
        "load_average_start": os.getloadavg(),
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="xmc-peers-") as tmp:
        for name in args.datasets.split(","):
            workdir = Path(tmp) / name
            workdir.mkdir()
            result = bench_dataset(args.datasets_root / name, workdir, args)
            report["datasets"][name] = result
            print(markdown(name, result), flush=True)
            shutil.rmtree(workdir)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = git_state()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
