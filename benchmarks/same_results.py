"""Same-results record of XR-Linear on the shared datasets, through the ``xmc`` command line only.

Usage, from the repository root, with the project venv and ``PYTHONPATH`` on the checkout::

    python benchmarks/same_results.py --work /tmp/same-X --out X.json
        [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps]
    python benchmarks/same_results.py --out AFTER.json --compare BEFORE.json   # compare only

For each dataset, in ``--work/NAME`` (wiped first): ``xmc ingest lines --on-unlabeled keep``
(as ``benchmarks/peers.py`` ingests), ``xmc train`` with the default configuration (no
``--config``/``--set``: the default seeds), ``xmc predict --split test --topk 20`` to a JSON
lines file and ``xmc evaluate --split test``. Only the command line is used, so the script runs
unchanged on the code before and after a refactor. Recorded per dataset: every exact command,
its wall and CPU (user+sys) seconds, the metrics printed by ``train`` and ``evaluate`` (percent,
2 decimals, as printed), P@k and nDCG@k recomputed here in full precision from the prediction
file and ``test_labels.txt``, the sha256 of the prediction file (raw bytes and a canonical form:
records re-serialized with sorted keys, lines sorted), the dataset fingerprint printed by
``ingest``, and, for information (the model folder layout may change), the sha256 of every model
file, the contents digest of each ``.npz`` and the model's ``metrics.json`` if it has one.
``--compare`` prints per dataset whether metrics and prediction digests are identical and the
ratio of the wall times (this run / other); it exits 1 if anything differs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.util
import json
import math
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

CLI_MODULE = (
    "xmc_core.app.cli" if importlib.util.find_spec("xmc_core.app") is not None else "xmc_core.cli"
)

REPO = Path(__file__).resolve().parents[1]
DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
TOPK = 20
KS = (1, 3, 5)
STEPS = ("ingest", "train", "predict", "evaluate")


# ---------------------------------------------------------------- running the command line
def xmc(*args: str | Path) -> list[str]:
    """The argv of ``python -m <the xmc CLI module> ARGS`` with this interpreter: the module is
    ``xmc_core.app.cli`` since the layout of issue 13, ``xmc_core.cli`` before it."""
    return [sys.executable, "-m", CLI_MODULE, *map(str, args)]


def run_step(cmd: list[str], log: Path) -> dict[str, Any]:
    """Run ``cmd`` (cwd: the repository root), output to ``log``; wall and CPU seconds, status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.write_text(f"$ {shlex.join(cmd)}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "command": shlex.join(cmd),
        "status": "ok" if proc.returncode == 0 else f"failed (exit code {proc.returncode})",
        "wall_s": wall,
        "cpu_s": cpu,
        "load_avg_before": load,
        "stdout": proc.stdout,
        "stderr_tail": proc.stderr[-3000:],
    }


def parse_metrics(text: str) -> dict[str, float]:
    """Metrics of a ``format_metrics`` table: ``{"P@1": 92.94, ...}`` in percent, as printed.

    The table starts at a line ``(%)  @1  @3 ...``; a row is a name then one value per k; a row
    with a single value (a key without ``@k``) is kept under its name.
    """
    out: dict[str, float] = {}
    ks: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["(%)"]:
            ks = parts[1:]
            continue
        if not ks or len(parts) < 2:
            continue
        try:
            values = [float(v) if v != "-" else math.nan for v in parts[1:]]
        except ValueError:
            continue
        if len(values) == len(ks):
            out |= {f"{parts[0]}{k}": v for k, v in zip(ks, values, strict=True)}
        elif len(values) == 1:
            out[parts[0]] = values[0]
    return out


def fingerprint(ingest_stdout: str) -> str | None:
    """The ``fingerprint: HEX`` line that ``xmc ingest`` prints, if any."""
    for line in ingest_stdout.splitlines():
        if line.startswith("fingerprint:"):
            return line.split(":", 1)[1].strip()
    return None


# ---------------------------------------------------------------- digests
def sha256_file(path: Path) -> str:
    """sha256 of the bytes of ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def npz_contents_digest(path: Path) -> str:
    """sha256 over (member name, member bytes) of a ``.npz`` zip, members sorted by name.

    Independent of zip timestamps and compression: two files holding the same arrays agree.
    """
    h = hashlib.sha256()
    with zipfile.ZipFile(path) as z:
        for name in sorted(z.namelist()):
            data = z.read(name)
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def canonical_predictions_digest(path: Path) -> str:
    """sha256 of the prediction records re-serialized with sorted keys, lines sorted."""
    with open(path, encoding="utf-8") as fh:
        lines = sorted(
            json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False) for line in fh
        )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def model_files(model: Path) -> dict[str, Any]:
    """sha256 of every file under ``model`` (relative path -> hex), the contents digest of each
    ``.npz``, and the ranker weight files (names ``W*.npz``) on their own."""
    files = sorted(p for p in model.rglob("*") if p.is_file())
    raw = {str(p.relative_to(model)): sha256_file(p) for p in files}
    npz = {str(p.relative_to(model)): npz_contents_digest(p) for p in files if p.suffix == ".npz"}
    weights = {k: v for k, v in npz.items() if Path(k).name.startswith("W")}
    metrics_json = model / "metrics.json"
    return {
        "file_sha256": raw,
        "npz_contents_sha256": npz,
        "ranker_weights_contents_sha256": weights,
        "metrics_json": json.loads(metrics_json.read_text()) if metrics_json.is_file() else None,
    }


# ---------------------------------------------------------------- metrics from the predictions
def read_label_sets(path: Path) -> list[set[str]]:
    """One set of label names per line of a comma-separated labels file (blank names dropped)."""
    with open(path, encoding="utf-8") as fh:
        return [{n.strip() for n in line.rstrip("\n").split(",") if n.strip()} for line in fh]


def recompute_metrics(pred: Path, src: Path) -> dict[str, Any]:
    """P@k and nDCG@k (fractions, full precision) of the prediction file against the test labels.

    Line i of the predictions is matched to line i of ``test_labels.txt``; relevant labels are
    those that occur in ``train_labels.txt`` (the model's label space). Every document counts,
    one without relevant labels scores 0. nDCG@k = DCG@k / DCG of min(k, |relevant|) hits,
    gain 1 / log2(rank + 1). P@k equals the library's exactly; nDCG@k may differ from it in the
    last bits (summation order), so compare it only between two runs of this script.
    """
    train_labels = set().union(*read_label_sets(src / "train_labels.txt"))
    truth = [s & train_labels for s in read_label_sets(src / "test_labels.txt")]
    with open(pred, encoding="utf-8") as fh:
        ranked = [json.loads(line)["labels"] for line in fh]
    if len(ranked) != len(truth):
        return {"error": f"{len(ranked)} predictions for {len(truth)} test documents"}
    gains = [1 / math.log2(r + 2) for r in range(max(KS))]
    out: dict[str, Any] = {}
    for k in KS:
        hits = [
            [lab in rel for lab in labels[:k]] for labels, rel in zip(ranked, truth, strict=True)
        ]
        out[f"P@{k}"] = sum(sum(h) for h in hits) / (k * len(truth)) if truth else 0.0
        ndcg = 0.0
        for h, rel in zip(hits, truth, strict=True):
            if rel:
                dcg = sum(g for g, hit in zip(gains, h, strict=False) if hit)
                ndcg += dcg / sum(gains[: min(k, len(rel))])
        out[f"nDCG@{k}"] = ndcg / len(truth) if truth else 0.0
    return out


# ---------------------------------------------------------------- one dataset
def run_dataset(src: Path, work: Path) -> dict[str, Any]:
    """Ingest, train, predict and evaluate ``src`` in the fresh folder ``work``; the record."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dataset, model, pred = work / "dataset", work / "model", work / "predictions.jsonl"
    commands = {
        "ingest": xmc("ingest", "lines", "--on-unlabeled", "keep", src, dataset),
        "train": xmc("train", dataset, model),
        "predict": xmc("predict", "--split", "test", "--topk", TOPK, model, dataset, pred),
        "evaluate": xmc("evaluate", "--split", "test", model, dataset),
    }
    rec: dict[str, Any] = {"source": str(src), "status": "ok", "steps": {}}
    for step in STEPS:
        result = run_step(commands[step], work / f"{step}.log")
        rec["steps"][step] = result
        print(f"  {step}: {result['status']} in {result['wall_s']:.1f} s", flush=True)
        if result["status"] != "ok":
            rec["status"] = f"{step} {result['status']}"
            return rec
    steps = rec["steps"]
    rec["dataset_fingerprint"] = fingerprint(steps["ingest"]["stdout"])
    rec["train_printed_metrics_pct"] = parse_metrics(steps["train"]["stdout"])
    rec["metrics_pct"] = parse_metrics(steps["evaluate"]["stdout"])
    rec["metrics_recomputed"] = recompute_metrics(pred, src)
    with open(pred, "rb") as fh:
        rec["n_predictions"] = sum(1 for _ in fh)
    rec["predictions_sha256"] = sha256_file(pred)
    rec["predictions_canonical_sha256"] = canonical_predictions_digest(pred)
    rec["times_s"] = {step: steps[step]["wall_s"] for step in STEPS}
    rec["cpu_s"] = {step: steps[step]["cpu_s"] for step in STEPS}
    rec["model"] = model_files(model)
    return rec


# ---------------------------------------------------------------- provenance
def git_state() -> dict[str, Any]:
    """Commit and dirtiness of the checkout this script lives in."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty_paths": git("status", "--porcelain").splitlines(),
        "describe": git("log", "-1", "--format=%h %s"),
    }


def provenance() -> dict[str, Any]:
    """Where ``xmc_core`` is imported from, the default config as ``xmc dump-config`` prints it,
    the interpreter and the machine."""
    where = subprocess.run(
        [sys.executable, "-c", "import xmc_core; print(xmc_core.__file__)"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    config = subprocess.run(xmc("dump-config"), cwd=REPO, capture_output=True, text=True).stdout
    return {
        "xmc_core_file": where,
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "python": sys.version,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "default_config_sha256": hashlib.sha256(config.encode()).hexdigest(),
        "default_config_yaml": config,
    }


def default_datasets_root() -> Path:
    """``../shared/datasets`` next to this checkout, or next to the main checkout of a worktree."""
    candidates = [REPO.parent / "shared" / "datasets"]
    common = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if common:
        candidates.append(Path(common).parent.parent / "shared" / "datasets")
    return next((c for c in candidates if c.is_dir()), candidates[0])


# ---------------------------------------------------------------- comparing two records
def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (so NaN equals NaN and a missing value equals only a missing value)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def compare_dataset(this: dict[str, Any], other: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether the results of one dataset are identical (metrics and predictions), and lines."""
    if this.get("status") != "ok" or other.get("status") != "ok":
        return False, [f"  status: this {this.get('status')}, other {other.get('status')}"]
    checks = {
        "evaluate metrics (as printed)": ("metrics_pct",),
        "train metrics (as printed)": ("train_printed_metrics_pct",),
        "P@k, nDCG@k recomputed from predictions": ("metrics_recomputed",),
        "predictions sha256 (raw bytes)": ("predictions_sha256",),
        "predictions sha256 (canonical)": ("predictions_canonical_sha256",),
    }
    info = {
        "dataset fingerprint (ingest)": ("dataset_fingerprint",),
        "ranker weights contents (informational)": ("model", "ranker_weights_contents_sha256"),
    }
    lines, ok = [], True
    for group, required in ((checks, True), (info, False)):
        for label, keys in group.items():
            a, b = this, other
            for key in keys:
                a, b = (a or {}).get(key), (b or {}).get(key)
            same = _same(a, b)
            ok = ok and (same or not required or label.endswith("(raw bytes)"))
            lines.append(f"  {label}: {'identical' if same else 'DIFFERENT'}")
    p1 = (this["metrics_pct"].get("P@1"), other["metrics_pct"].get("P@1"))
    lines.append(f"  P@1 (%): this {p1[0]}, other {p1[1]}")
    for step in STEPS:
        t, o = this["times_s"].get(step), other["times_s"].get(step)
        tc, oc = this["cpu_s"].get(step), other["cpu_s"].get(step)
        lines.append(
            f"  {step} wall this/other {t:.1f}/{o:.1f} s = {_ratio(t, o)}"
            f" (cpu {tc:.1f}/{oc:.1f} s = {_ratio(tc, oc)})"
        )
    return ok, lines


def compare(this_path: Path, other_path: Path) -> int:
    """Print the comparison of two result files; 0 if every dataset is identical, else 1."""
    this = json.loads(this_path.read_text(encoding="utf-8"))
    other = json.loads(other_path.read_text(encoding="utf-8"))
    print(f"this:  {this_path} at {this['git']['commit']} ({this['git']['describe']})")
    print(f"other: {other_path} at {other['git']['commit']} ({other['git']['describe']})")
    if not _same(
        this["provenance"]["default_config_sha256"], other["provenance"]["default_config_sha256"]
    ):
        print("note: the default configurations (xmc dump-config) differ")
    all_ok = True
    for name in dict.fromkeys([*other["datasets"], *this["datasets"]]):
        a, b = this["datasets"].get(name), other["datasets"].get(name)
        if a is None or b is None:
            print(f"{name}: only in {'other' if a is None else 'this'} file")
            all_ok = False
            continue
        ok, lines = compare_dataset(a, b)
        all_ok = all_ok and ok
        print(f"{name}: {'SAME RESULTS' if ok else 'RESULTS DIFFER'}", *lines, sep="\n")
    print("all identical" if all_ok else "NOT all identical")
    return 0 if all_ok else 1


# ---------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=None, help="default ../shared/datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--work", type=Path, help="folder for datasets, models and predictions")
    p.add_argument("--out", type=Path, required=True, help="results JSON (read with --compare)")
    p.add_argument("--compare", type=Path, help="only compare --out with this results JSON")
    args = p.parse_args(argv)
    if args.compare is None and args.work is None:
        p.error("--work is required unless --compare is given")
    args.datasets_root = args.datasets_root or default_datasets_root()
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every dataset and write the JSON, or compare two JSON files."""
    args = parse_args(argv)
    if args.compare is not None:
        return compare(args.out, args.compare)
    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git": git_state(),
        "provenance": provenance(),
        "datasets_root": str(args.datasets_root.resolve()),
        "datasets": {},
    }
    for name in args.datasets.split(","):
        print(f"{name}:", flush=True)
        report["datasets"][name] = run_dataset(args.datasets_root / name, args.work / name)
    report["git_end"] = git_state()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
