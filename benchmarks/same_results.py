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

Families (issue 35, "the same metrics, bit for bit, for each family's preset"): ``--families
xr-linear,xml-cnn,...`` trains each dataset once per family with ``--config`` its preset
(:data:`PRESETS`; a family whose name is not there uses ``configs/<name>.yaml``), and records
``"<family>/<dataset>"``. The family names are those of the code before issue 35 (hyphens); the
presets keep their file names, so the same command runs on both sides. ``--max-train-docs`` and
``--max-test-docs`` cut the source files to their first lines (one dataset ingested per cut, in
``--work/_data``), so that every family fits in a session on 2 cores; ``--runs
family/dataset,...`` restricts the grid.
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
from pathlib import Path
from typing import Any

from same_results_compare import (
    STEPS,
    canonical_predictions_digest,
    compare,
    model_files,
    sha256_file,
)

CLI_MODULE = (
    "xmc_core.app.cli" if importlib.util.find_spec("xmc_core.app") is not None else "xmc_core.cli"
)

REPO = Path(__file__).resolve().parents[1]
DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
TOPK = 20
KS = (1, 3, 5)
PRESETS = {
    "xr-linear": "configs/xr-linear.yaml",
    "xr-transformer": "configs/xr-transformer-cpu.yaml",
    "x-transformer": "configs/x-transformer-cpu.yaml",
    "xml-cnn": "configs/xml-cnn.yaml",
    "astec": "configs/astec.yaml",
    "hierarchical-xc": "configs/hierarchical-xc.yaml",
    "neural-xc": "configs/neural-xc.yaml",
    "ensemble": "configs/ensemble.yaml",
}
"""Family -> its preset, relative to the repository root."""
SPLIT_FILES = ("texts", "labels", "ids", "label_ids")


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
def cut_source(src: Path, dest: Path, max_train: int | None, max_test: int | None) -> Path:
    """``src`` itself when no cut is asked; else ``dest`` holding the first ``max_train`` /
    ``max_test`` lines of each split file (texts, labels, ids, label ids) and the other files."""
    if max_train is None and max_test is None:
        return src
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for path in sorted(src.iterdir()):
        split, _, kind = path.stem.partition("_")
        limit = {"train": max_train, "test": max_test}.get(split)
        if path.suffix == ".txt" and kind in SPLIT_FILES and limit is not None:
            with open(path, encoding="utf-8") as fh, open(dest / path.name, "w") as out:
                out.writelines(line for _, line in zip(range(limit), fh, strict=False))
        elif path.is_file():
            shutil.copyfile(path, dest / path.name)
    return dest


def ingest(src: Path, work: Path) -> dict[str, Any]:
    """``xmc ingest lines`` of ``src`` into ``work/dataset`` (wiped first); the step record."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = xmc("ingest", "lines", "--on-unlabeled", "keep", src, work / "dataset")
    result = run_step(cmd, work / "ingest.log")
    print(f"  ingest: {result['status']} in {result['wall_s']:.1f} s", flush=True)
    return result


def run_dataset(
    src: Path, data: Path, work: Path, ingested: dict[str, Any], preset: str | None = None
) -> dict[str, Any]:
    """Train, predict and evaluate the dataset ingested in ``data`` in the fresh folder
    ``work``, with the configuration file ``preset`` (None: the defaults); the record."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dataset, model, pred = data / "dataset", work / "model", work / "predictions.jsonl"
    config = ("--config", REPO / preset) if preset else ()
    commands = {
        "train": xmc("train", dataset, model, *config),
        "predict": xmc("predict", "--split", "test", "--topk", TOPK, model, dataset, pred),
        "evaluate": xmc("evaluate", "--split", "test", model, dataset),
    }
    rec: dict[str, Any] = {"source": str(src), "preset": preset, "status": "ok"}
    rec["steps"] = {"ingest": ingested}
    if ingested["status"] != "ok":
        rec["status"] = f"ingest {ingested['status']}"
        return rec
    for step, cmd in commands.items():
        result = run_step(cmd, work / f"{step}.log")
        rec["steps"][step] = result
        print(f"  {step}: {result['status']} in {result['wall_s']:.1f} s", flush=True)
        if result["status"] != "ok":
            rec["status"] = f"{step} {result['status']}"
            return rec
    return rec | outcome(rec["steps"], src, model, pred)


def outcome(steps: dict[str, Any], src: Path, model: Path, pred: Path) -> dict[str, Any]:
    """What a finished run records: metrics printed and recomputed, digests, times, the model."""
    rec: dict[str, Any] = {"dataset_fingerprint": fingerprint(steps["ingest"]["stdout"])}
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


# ---------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=None, help="default ../shared/datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--families", help="comma-separated families, each run with its preset")
    p.add_argument("--runs", help="only these comma-separated family/dataset pairs")
    p.add_argument("--max-train-docs", type=int, help="keep the first N training documents")
    p.add_argument("--max-test-docs", type=int, help="keep the first N test documents")
    p.add_argument("--work", type=Path, help="folder for datasets, models and predictions")
    p.add_argument("--out", type=Path, required=True, help="results JSON (read with --compare)")
    p.add_argument("--compare", type=Path, help="only compare --out with this results JSON")
    args = p.parse_args(argv)
    if args.compare is None and args.work is None:
        p.error("--work is required unless --compare is given")
    args.datasets_root = args.datasets_root or default_datasets_root()
    return args


def planned_runs(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    """(family or None for the defaults, dataset) pairs, datasets in the order given."""
    families = args.families.split(",") if args.families else [None]
    wanted = set(args.runs.split(",")) if args.runs else None
    return [
        (fam, name)
        for name in args.datasets.split(",")
        for fam in families
        if wanted is None or f"{fam}/{name}" in wanted
    ]


def run_all(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Every planned run into ``report["datasets"]``, ingesting each dataset once."""
    ingested: dict[str, tuple[Path, dict[str, Any]]] = {}
    for fam, name in planned_runs(args):
        key = name if fam is None else f"{fam}/{name}"
        print(f"{key}:", flush=True)
        data = args.work / "_data" / name
        if name not in ingested:
            src = cut_source(
                args.datasets_root / name,
                args.work / "_cut" / name,
                args.max_train_docs,
                args.max_test_docs,
            )
            ingested[name] = (src, ingest(src, data))
        src, step = ingested[name]
        preset = None if fam is None else PRESETS.get(fam, f"configs/{fam}.yaml")
        report["datasets"][key] = run_dataset(
            src, data, args.work / (fam or "") / name, step, preset
        )
        write_report(args.out, report)  # after every run: a stopped run keeps what it did


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
        "cut": {"max_train_docs": args.max_train_docs, "max_test_docs": args.max_test_docs},
        "datasets": {},
    }
    run_all(args, report)
    report["git_end"] = git_state()
    write_report(args.out, report)
    print(f"wrote {args.out}")
    return 0


def write_report(out: Path, report: dict[str, Any]) -> None:
    """``report`` as JSON at ``out``, replaced atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)


if __name__ == "__main__":
    sys.exit(main())
