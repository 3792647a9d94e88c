"""What the benchmark scripts share: the dataset prepared once, a method run in a measured
subprocess, medians over repeats, scoring, provenance and the table head.

Used by ``benchmarks/peers.py``, ``benchmarks/xr_transformer.py`` and ``benchmarks/families.py``
(and the serving benchmarks for the process-tree helpers). ``prepare`` ingests a dataset with
the ``lines`` importer and featurizes it ONCE with our pipeline and the default ``XmcConfig``
(word uni+bigram TF-IDF, 200,000 features, sublinear tf) into float32 csr ``.npz`` files;
``measure`` runs a command, sampling the peak RSS of its process tree every 50 ms; ``score``
computes every metric with ``xmc_core.evaluation.metrics`` (the same evaluation for every
method; PSP@k with the training label counts, A=0.55, B=1.5).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
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
PEER_RUNNER = Path(__file__).resolve().with_name("peer_runner.py")
PEER_LIBS = ("libpecos", "napkinxc", "omikuji", "numpy", "scipy", "scikit-learn", "torch")
LABELS_FILE = "labels.json"
"""In a prepared folder: the label names of the shared label index, in column order."""
SAMPLE_S = 0.05
METRICS = [f"{m}@{k}" for m in ("P", "nDCG", "PSP") for k in (1, 3, 5)]


def result_cells(r: dict[str, Any]) -> list[str]:
    """One method's row of a results table: train s, predict ms/1k, peak RSS, model MB, then
    every metric of :data:`METRICS` in %."""
    return [
        f"{r['train_s_median']:.2f}",
        f"{r['predict_ms_per_1k_median']:.0f}",
        f"{r['peak_rss_mb_max']:.0f}",
        f"{r['model_mb']:.1f}",
        *(f"{100 * r['metrics'][m]:.2f}" for m in METRICS),
    ]


TABLE_HEAD = (
    "| method | train s | predict ms/1k docs | peak RSS MB | model MB | "
    + " | ".join(METRICS)
    + " |\n|---|"
    + "---:|" * (4 + len(METRICS))
)


# ---------------------------------------------------------------- the shared features
def prepare(src: Path, workdir: Path, keep_corpus: bool = False) -> dict[str, Any]:
    """Ingest and featurize ``src`` once; write ``{X,Y}_{train,test}.npz`` and the label names
    (``labels.json``) to ``workdir``; keep the ingested ``corpus/`` there if ``keep_corpus``.

    Also checks that PIFA recomputed from X/Y (as the ``ours`` runner does, timed) equals the
    label features of our pipeline. Returns dataset statistics.
    """
    options = IngestOptions(policies=Policies(on_unlabeled="keep"))
    manifest = ingest("lines", src, workdir / "corpus", options)
    stats = write_features(workdir / "corpus", workdir, check_pifa=True)
    if not keep_corpus:
        shutil.rmtree(workdir / "corpus")
    return {
        "source": str(src),
        "ingest": {s: v.model_dump() for s, v in manifest.splits.items()},
        **stats,
    }


def write_features(corpus_dir: Path, workdir: Path, check_pifa: bool) -> dict[str, Any]:
    """Featurize the dataset folder ``corpus_dir`` with our pipeline and the default config
    (timed: ``featurize_s``) into ``workdir``'s shared ``.npz`` files and ``labels.json``.

    ``check_pifa`` also computes the PIFA the ``ours`` runner computes from X/Y and records its
    largest difference to the pipeline's label features (one more label matrix in memory).
    """
    t0 = time.perf_counter()
    feats = featurize_in_process(Corpus(corpus_dir), XmcConfig())
    featurize_s = time.perf_counter() - t0
    train, test = feats["train"], feats["test"]
    arrays = {"X_train": train.X, "Y_train": train.Y, "X_test": test.X, "Y_test": test.Y}
    for name, m in arrays.items():  # csr float32, uncompressed: scipy 1.13 reads them too
        sp.save_npz(workdir / f"{name}.npz", sp.csr_matrix(m, dtype=np.float32), compressed=False)
    names = feats["label_index"].names.to_pylist()
    (workdir / LABELS_FILE).write_text(json.dumps(names) + "\n", encoding="utf-8")
    stats = {
        "featurize_s": featurize_s,
        "n_train": train.X.shape[0],
        "n_test": test.X.shape[0],
        "n_features": train.X.shape[1],
        "n_labels": train.Y.shape[1],
        "nnz_train": int(train.X.nnz),
        "test_label_assignments_outside_train_labels": test.unknown_labels,
        "test_docs_without_train_label": int((np.diff(test.Y.indptr) == 0).sum()),
    }
    if check_pifa:
        Z = concat_label_features([pifa([pifa_partial(train.X, train.Y)])], [1.0])
        diff = abs(Z - feats["label_features"].z)
        stats["pifa_max_abs_diff_vs_pipeline"] = float(diff.max()) if diff.nnz else 0.0
    return stats


def carve_rows(n: int, fraction: float, seed: int, max_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows) of ``n`` documents, both sorted: ``round(fraction * n)``
    of them (at least 1, at most ``max_docs``), drawn by ``default_rng(seed)``."""
    n_val = min(max_docs, max(1, round(fraction * n)))
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def validation_source(src: Path, dest: Path, fraction: float, seed: int) -> dict[str, Any]:
    """A ``lines`` dataset in ``dest`` whose train and test splits are the fit and validation
    parts of ``src``'s TRAIN split (``src``'s test split is never read), by :func:`carve_rows`
    (at least one document left to fit), both parts in their original order. Copies
    ``label_map.txt``. Choosing settings on this split, never on the test split, is how a
    preset's choice is made."""
    parts = {"texts": src / "train_texts.txt", "labels": src / "train_labels.txt"}
    for path in parts.values():
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (a `lines` dataset's train split)")
    if (src / "train_ids.txt").is_file():
        parts["ids"] = src / "train_ids.txt"
    lines = {}
    for key, path in parts.items():
        with open(path, "rb") as fh:  # lines end at b"\n" only, as the importer reads them
            lines[key] = fh.readlines()
    if len({len(v) for v in lines.values()}) != 1:
        counts = {str(parts[k]): len(v) for k, v in lines.items()}
        raise ValueError(f"the train files of {src} differ in line count: {counts}")
    n = len(lines["texts"])
    fit, val = carve_rows(n, fraction, seed, max_docs=n - 1)
    dest.mkdir(parents=True)
    for key, rows in lines.items():
        for split, chosen in (("train", fit), ("test", val)):
            whole = [rows[i] if rows[i].endswith(b"\n") else rows[i] + b"\n" for i in chosen]
            (dest / f"{split}_{key}.txt").write_bytes(b"".join(whole))
    if (src / "label_map.txt").is_file():
        shutil.copyfile(src / "label_map.txt", dest / "label_map.txt")
    return {
        "of": str(src), "fraction": fraction, "seed": seed, "n_fit": len(fit),
        "n_validation": len(val),
    }  # fmt: skip


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


def measure(
    cmd: list[str],
    log: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    max_rss_mb: float | None = None,
) -> dict[str, Any]:
    """Run ``cmd`` (with ``env`` added to the environment), sampling its tree's RSS every
    SAMPLE_S; kill it after ``timeout_s``, or as soon as the tree's RSS passes ``max_rss_mb``
    (status ``memory limit``). ``cpu_s``: the user and system CPU seconds of the finished
    child and the descendants it waited for."""
    peak, n, t0, cpu0 = 0, 0, time.perf_counter(), _children_cpu_s()
    full_env = {**os.environ, **(env or {})}
    with (
        open(log, "w") as fh,
        subprocess.Popen(cmd, stdout=fh, stderr=fh, cwd=REPO, env=full_env) as child,
    ):
        proc, tree, status = psutil.Process(child.pid), [], "ok"
        while child.poll() is None:
            if time.perf_counter() - t0 > timeout_s:
                status = "timeout"
            elif max_rss_mb is not None and peak > max_rss_mb * 2**20:
                status = "memory limit"
            if status != "ok":
                kill_tree(proc)
                child.wait()
                break
            tree = process_tree(proc) if n % 5 == 0 else tree
            peak, n = max(peak, tree_rss(tree)), n + 1
            time.sleep(SAMPLE_S)
    if status == "ok" and child.returncode != 0:
        status = f"failed (exit code {child.returncode})"
    wall, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
    return {"status": status, "process_wall_s": wall, "peak_rss_mb": peak / 2**20, "cpu_s": cpu}


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's waited-for children, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dir_mb(path: Path) -> float:
    """Total size of the files under ``path``, in MiB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def score(workdir: Path, pred_path: Path) -> dict[str, Any]:
    """Every metric of the predictions at ``pred_path`` (csr (n_test, n_labels) in the shared
    label index of ``workdir``) against the test labels, with the training label counts."""
    Y_test = sp.load_npz(workdir / "Y_test.npz").tocsr()
    Y_train = sp.load_npz(workdir / "Y_train.npz").tocsr()
    pred = sp.load_npz(pred_path).tocsr()
    metrics = evaluate(Y_test, pred, XmcConfig().eval, label_counts(Y_train), Y_train.shape[0])
    return {"metrics": metrics, "pred_nnz_per_doc": pred.nnz / pred.shape[0]}


def run_once(
    method: str,
    python: str,
    workdir: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    max_rss_mb: float | None = None,
) -> dict[str, Any]:
    """One ``peer_runner.py`` subprocess run (``env`` added to its environment): timings, peak
    RSS, model size and all metrics (``max_rss_mb``: see :func:`measure`)."""
    outdir = workdir / f"out-{method}"
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir()
    log = workdir / f"{method}.log"
    run: dict[str, Any] = {"load_avg_before": os.getloadavg(), "xmc_core_digest": xmc_digest()}
    cmd = [python, str(PEER_RUNNER), method, str(workdir), str(outdir)]
    run |= measure(cmd, log, timeout_s, env, max_rss_mb)
    run["load_avg_after"] = os.getloadavg()
    if run["status"] != "ok":
        run["log_tail"] = log.read_text(errors="replace")[-3000:]
        return run
    run |= json.loads((outdir / "result.json").read_text())
    for key in ("predict", "predict_again"):
        run[f"{key}_ms_per_1k_docs"] = 1e6 * run[f"{key}_s"] / run["n_test"]
    run["model_mb"] = dir_mb(outdir / "model")
    run |= score(workdir, outdir / "pred.npz")
    shutil.rmtree(outdir)
    return run


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of train time, predict time and each metric, max peak RSS, over the successful
    runs (repeats differ: ``peers.py`` gives each its own seed, and Omikuji is not
    deterministic); the second prediction's median is None when no run timed one."""
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {"status": runs[-1]["status"], "runs": runs}
    again = [r["predict_again_ms_per_1k_docs"] for r in ok if "predict_again_ms_per_1k_docs" in r]
    return {
        "status": "ok",
        "n_ok_runs": len(ok),
        "train_s_median": statistics.median(r["train_s"] for r in ok),
        "train_s_min": min(r["train_s"] for r in ok),
        "predict_ms_per_1k_median": statistics.median(r["predict_ms_per_1k_docs"] for r in ok),
        "predict_again_ms_per_1k_median": statistics.median(again) if again else None,
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in ok),
        "model_mb": ok[0]["model_mb"],
        "metrics": {k: statistics.median(r["metrics"][k] for r in ok) for k in ok[0]["metrics"]},
        "P@1_range": [min(r["metrics"]["P@1"] for r in ok), max(r["metrics"]["P@1"] for r in ok)],
        "metrics_equal_across_runs": all(r["metrics"] == ok[0]["metrics"] for r in ok),
        "runs": runs,
    }


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
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout
        except OSError:  # no git on this machine (a copied work tree): the digest still says
            return "no git"

    return {
        "head": git("rev-parse", "HEAD").strip(),
        "status_xmc_core": git("status", "--short", "xmc_core"),
        "xmc_core_digest": xmc_digest(),
    }


def peers_versions(python: Path, libs: tuple[str, ...] = PEER_LIBS) -> dict[str, str]:
    """Versions of ``libs`` in the peers venv (``not installed`` for those it lacks)."""
    code = (
        "import json, platform, importlib.metadata as m\n"
        "def v(p):\n"
        "    try:\n        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n        return 'not installed'\n"
        f"print(json.dumps({{'python': platform.python_version(), "
        f"**{{p: v(p) for p in {list(libs)!r}}}}}))"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def write_json(path: Path, report: dict[str, Any]) -> None:
    """``report`` as JSON at ``path`` (folders made), atomically: a temporary name, then a
    rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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


def installed_version(lib: str) -> str:
    """``lib``'s installed version, or ``not installed`` (xmc run from a copied work tree)."""
    try:
        return version(lib)
    except PackageNotFoundError:
        return "not installed"


def machine_info(
    peers_python: Path | None, peer_libs: tuple[str, ...] = PEER_LIBS
) -> dict[str, Any]:
    """Where and with what the benchmark ran (no ``peers_venv`` when ``peers_python`` is None)."""
    libs = ["numpy", "scipy", "numba", "pyarrow", "psutil", "xmc"]
    venv = {"python": platform.python_version()} | {lib: installed_version(lib) for lib in libs}
    info = machine_basics() | {"project_venv": venv}
    if peers_python is not None:
        info["peers_venv"] = peers_versions(peers_python, peer_libs)
    return info


def add_dataset_and_out(p: argparse.ArgumentParser, stem: str) -> None:
    """``--dataset`` (default debian-deps beside the repository) and ``--out`` (default
    ``benchmarks/results/<stem>-<today>.json``), the arguments of the torch benchmarks."""
    today = dt.date.today().isoformat()
    default = REPO.parent / "shared" / "datasets" / "debian-deps"
    p.add_argument("--dataset", type=Path, default=default)
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/{stem}-{today}.json")


def write_torch_report(out: Path, script: str, argv: list[str] | None, **fields: Any) -> None:
    """A torch benchmark's results file at ``out`` (see :func:`write_json`): the command that
    made it (``python benchmarks/<script>`` and ``argv``, default the process's arguments), the
    date, the machine with torch's version and threads, the git state; then ``fields``."""
    import torch

    given = sys.argv[1:] if argv is None else argv
    report = {
        "command": shlex.join(["python", f"benchmarks/{script}", *given]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_basics() | {"torch": torch.__version__,
                                       "torch_threads": torch.get_num_threads()},
        "git": git_state(),
    } | fields  # fmt: skip
    write_json(out, report)
    print(f"wrote {out}")


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
