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
evaluation for every method; PSP@k with the training label counts, A=0.55, B=1.5).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import scipy.sparse as sp

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.schema import Policies
from xmc_core.evaluation.metrics import evaluate
from xmc_core.families.train import featurize_in_process
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.model.contract import label_counts

REPO = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).resolve().with_name("peer_runner.py")
DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
METHODS = ("ours", "pecos", "napkinxc", "omikuji")
PEER_LIBS = ("libpecos", "napkinxc", "omikuji", "numpy", "scipy", "scikit-learn", "torch")
SAMPLE_S = 0.05
METRICS = [f"{m}@{k}" for m in ("P", "nDCG", "PSP") for k in (1, 3, 5)]
TABLE_HEAD = (
    "| method | train s | predict ms/1k docs | peak RSS MB | model MB | "
    + " | ".join(METRICS)
    + " |\n|---|"
    + "---:|" * (4 + len(METRICS))
)


# ---------------------------------------------------------------- the shared features
def prepare(src: Path, workdir: Path) -> dict[str, Any]:
    """Ingest and featurize ``src`` once; write ``{X,Y}_{train,test}.npz`` to ``workdir``.

    Also checks that PIFA recomputed from X/Y (as the ``ours`` runner does, timed) equals the
    label features of our pipeline. Returns dataset statistics.
    """
    options = IngestOptions(policies=Policies(on_unlabeled="keep"))
    manifest = ingest("lines", src, workdir / "corpus", options)
    t0 = time.perf_counter()
    feats = featurize_in_process(Corpus(workdir / "corpus"), XmcConfig())
    featurize_s = time.perf_counter() - t0
    train, test = feats["train"], feats["test"]
    arrays = {"X_train": train.X, "Y_train": train.Y, "X_test": test.X, "Y_test": test.Y}
    for name, m in arrays.items():  # csr float32, uncompressed: scipy 1.13 reads them too
        sp.save_npz(workdir / f"{name}.npz", sp.csr_matrix(m, dtype=np.float32), compressed=False)
    Z = concat_label_features([pifa([pifa_partial(train.X, train.Y)])], [1.0])
    diff = abs(Z - feats["label_features"].z)
    shutil.rmtree(workdir / "corpus")
    return {
        "source": str(src),
        "ingest": {s: v.model_dump() for s, v in manifest.splits.items()},
        "featurize_s": featurize_s,
        "n_train": train.X.shape[0],
        "n_test": test.X.shape[0],
        "n_features": train.X.shape[1],
        "n_labels": train.Y.shape[1],
        "nnz_train": int(train.X.nnz),
        "test_label_assignments_outside_train_labels": test.unknown_labels,
        "test_docs_without_train_label": int((np.diff(test.Y.indptr) == 0).sum()),
        "pifa_max_abs_diff_vs_pipeline": float(diff.max()) if diff.nnz else 0.0,
    }


# ---------------------------------------------------------------- one run in a subprocess
def process_tree(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and its descendants (empty once it has exited)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss(tree: list[psutil.Process]) -> int:
    """Sum of the RSS of ``tree`` in bytes; processes that vanish count 0."""
    total = 0
    for p in tree:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def kill_tree(proc: psutil.Process) -> None:
    """Kill the child this script started, and its descendants."""
    for p in reversed(process_tree(proc)):
        with contextlib.suppress(psutil.Error):
            p.kill()


def measure(cmd: list[str], log: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``cmd``, sampling its tree's RSS every SAMPLE_S; kill it after ``timeout_s``."""
    peak, n, t0 = 0, 0, time.perf_counter()
    with open(log, "w") as fh, subprocess.Popen(cmd, stdout=fh, stderr=fh, cwd=REPO) as child:
        proc, tree, status = psutil.Process(child.pid), [], "ok"
        while child.poll() is None:
            if time.perf_counter() - t0 > timeout_s:
                kill_tree(proc)
                child.wait()
                status = "timeout"
                break
            tree = process_tree(proc) if n % 5 == 0 else tree
            peak, n = max(peak, tree_rss(tree)), n + 1
            time.sleep(SAMPLE_S)
    if status == "ok" and child.returncode != 0:
        status = f"failed (exit code {child.returncode})"
    wall = time.perf_counter() - t0
    return {"status": status, "process_wall_s": wall, "peak_rss_mb": peak / 2**20}


def dir_mb(path: Path) -> float:
    """Total size of the files under ``path``, in MiB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def run_once(method: str, python: str, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """One subprocess run: timings, peak RSS, model size and all metrics (ours computes them)."""
    outdir = workdir / f"out-{method}"
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir()
    log = workdir / f"{method}.log"
    run: dict[str, Any] = {"load_avg_before": os.getloadavg(), "xmc_core_digest": xmc_digest()}
    run |= measure([python, str(RUNNER), method, str(workdir), str(outdir)], log, timeout_s)
    run["load_avg_after"] = os.getloadavg()
    if run["status"] != "ok":
        run["log_tail"] = log.read_text(errors="replace")[-3000:]
        return run
    run |= json.loads((outdir / "result.json").read_text())
    for key in ("predict", "predict_again"):
        run[f"{key}_ms_per_1k_docs"] = 1e6 * run[f"{key}_s"] / run["n_test"]
    run["model_mb"] = dir_mb(outdir / "model")
    Y_test = sp.load_npz(workdir / "Y_test.npz").tocsr()
    Y_train = sp.load_npz(workdir / "Y_train.npz").tocsr()
    pred = sp.load_npz(outdir / "pred.npz").tocsr()
    cfg = XmcConfig().eval
    run["metrics"] = evaluate(Y_test, pred, cfg, label_counts(Y_train), Y_train.shape[0])
    run["pred_nnz_per_doc"] = pred.nnz / pred.shape[0]
    shutil.rmtree(outdir)
    return run


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of train time, predict time and each metric, max peak RSS, over the successful
    runs (napkinXC and Omikuji are not deterministic from run to run)."""
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {"status": runs[-1]["status"], "runs": runs}
    return {
        "status": "ok",
        "n_ok_runs": len(ok),
        "train_s_median": statistics.median(r["train_s"] for r in ok),
        "train_s_min": min(r["train_s"] for r in ok),
        "predict_ms_per_1k_median": statistics.median(r["predict_ms_per_1k_docs"] for r in ok),
        "predict_again_ms_per_1k_median": statistics.median(
            r["predict_again_ms_per_1k_docs"] for r in ok
        ),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in ok),
        "model_mb": ok[0]["model_mb"],
        "metrics": {k: statistics.median(r["metrics"][k] for r in ok) for k in ok[0]["metrics"]},
        "P@1_range": [min(r["metrics"]["P@1"] for r in ok), max(r["metrics"]["P@1"] for r in ok)],
        "metrics_equal_across_runs": all(r["metrics"] == ok[0]["metrics"] for r in ok),
        "runs": runs,
    }


def bench_dataset(src: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare one dataset, then every method ``--repeats`` times, methods interleaved."""
    result: dict[str, Any] = {"stats": prepare(src, workdir)}
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.methods}
    for _ in range(args.repeats):
        for method in args.methods:
            python = sys.executable if method == "ours" else str(args.peers_python)
            runs[method].append(run_once(method, python, workdir, args.timeout))
            print(f"  {src.name} {method}: {brief(runs[method][-1])}", flush=True)
    result["methods"] = {m: summarize(rs) for m, rs in runs.items()}
    result["targets"] = targets(result["methods"])
    return result


def brief(run: dict[str, Any]) -> str:
    """One progress line."""
    if run["status"] != "ok":
        return run["status"]
    return (
        f"train {run['train_s']:.2f} s, predict {run['predict_ms_per_1k_docs']:.0f} ms/1k, "
        f"peak RSS {run['peak_rss_mb']:.0f} MB, P@1 {100 * run['metrics']['P@1']:.2f}"
    )


# ---------------------------------------------------------------- targets vs PECOS
def targets(methods: dict[str, Any]) -> dict[str, Any]:
    """P@1 ours >= PECOS; train, predict, peak RSS ratios ours / PECOS <= 1.5 (medians; also
    the train-time ratio of each repeat, whose two runs ran minutes apart)."""
    ours, pecos = methods.get("ours", {}), methods.get("pecos", {})
    if ours.get("status") != "ok" or pecos.get("status") != "ok":
        return {"available": False}
    out: dict[str, Any] = {"available": True}
    p1, p1_ref = ours["metrics"]["P@1"], pecos["metrics"]["P@1"]
    out["P@1"] = {"ours": p1, "pecos": p1_ref, "met": p1 >= p1_ref}
    for key in ("train_s_median", "predict_ms_per_1k_median", "peak_rss_mb_max"):
        ratio = ours[key] / pecos[key]
        out[key] = {"ours": ours[key], "pecos": pecos[key], "ratio": ratio, "met": ratio <= 1.5}
    pairs = zip(ours["runs"], pecos["runs"], strict=False)
    out["train_ratio_per_repeat"] = [
        a["train_s"] / b["train_s"] for a, b in pairs if a["status"] == b["status"] == "ok"
    ]
    return out


# ---------------------------------------------------------------- provenance
def xmc_digest() -> str:
    """sha256 over the library sources (the solver may change while the benchmark runs)."""
    h = hashlib.sha256()
    for path in sorted((REPO / "xmc_core").rglob("*.py")):
        h.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def git_state() -> dict[str, str]:
    """HEAD and the uncommitted changes under xmc_core (read-only git commands)."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout

    return {
        "head": git("rev-parse", "HEAD").strip(),
        "status_xmc_core": git("status", "--short", "xmc_core"),
        "xmc_core_digest": xmc_digest(),
    }


def peers_versions(python: Path) -> dict[str, str]:
    """Versions installed in the peers venv."""
    code = (
        "import json, platform, importlib.metadata as m;"
        f"print(json.dumps({{'python': platform.python_version(), "
        f"**{{p: m.version(p) for p in {list(PEER_LIBS)!r}}}}}))"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def machine_basics() -> dict[str, Any]:
    """CPU, memory and platform of this machine."""
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        models = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
    return {
        "nproc": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "cpu_model": models[0] if models else platform.processor(),
        "memory_gb": psutil.virtual_memory().total / 2**30,
        "platform": platform.platform(),
    }


def machine_info(peers_python: Path) -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    libs = ["numpy", "scipy", "numba", "pyarrow", "psutil", "xmc"]
    return machine_basics() | {
        "project_venv": {"python": platform.python_version()} | {lib: version(lib) for lib in libs},
        "peers_venv": peers_versions(peers_python),
    }


# ---------------------------------------------------------------- report
def table_head(name: str, stats: dict[str, Any]) -> list[str]:
    """A dataset's heading, size line and the head of its method table."""
    return [
        f"#### {name}",
        "",
        f"{stats['n_train']} train / {stats['n_test']} test docs, {stats['n_features']} "
        f"features, {stats['n_labels']} labels.",
        "",
        TABLE_HEAD,
    ]


def markdown(name: str, result: dict[str, Any]) -> str:
    """One dataset's table (metrics in %) and its target lines."""
    lines = table_head(name, result["stats"])
    for method, r in result["methods"].items():
        if r["status"] != "ok":
            lines.append(f"| {method} | {r['status']} |" + " |" * (3 + len(METRICS)))
            continue
        cells = [
            f"{r['train_s_median']:.2f}",
            f"{r['predict_ms_per_1k_median']:.0f}",
            f"{r['peak_rss_mb_max']:.0f}",
            f"{r['model_mb']:.1f}",
            *(f"{100 * r['metrics'][m]:.2f}" for m in METRICS),
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *verdict_lines(result["targets"]), ""])


def verdict_lines(t: dict[str, Any]) -> list[str]:
    """The four targets, met or not, with the numbers."""
    if not t["available"]:
        return ["- targets: not evaluated (ours or PECOS did not finish)"]

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    p = t["P@1"]
    lines = [f"- P@1 ours {100 * p['ours']:.2f} vs PECOS {100 * p['pecos']:.2f}: {met(p['met'])}"]
    names = {
        "train_s_median": "train",
        "predict_ms_per_1k_median": "predict",
        "peak_rss_mb_max": "peak RSS",
    }
    for key, name in names.items():
        r = t[key]
        lines.append(
            f"- {name} ours/PECOS {r['ours']:.4g} / {r['pecos']:.4g} = {r['ratio']:.2f}x "
            f"(target <= 1.5x): {met(r['met'])}"
        )
    per_repeat = ", ".join(f"{x:.2f}x" for x in t["train_ratio_per_repeat"])
    return [*lines, f"- train ours/PECOS repeat by repeat: {per_repeat}"]


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
