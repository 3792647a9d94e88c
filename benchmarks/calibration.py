"""The calibration benchmark: ECE@1 and ECE@5 of every family's preset before and after
calibration, micro-F1 and macro-F1 at the thresholds tuned on the carve, beside LibMultiLabel's
``train_thresholding`` and PECOS's scores at the best global threshold chosen on the same carve.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/calibration.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps]
        [--families xr-linear,hierarchical-xc,...] [--peers libmultilabel,pecos]
        [--compare-uncarved] [--set KEY=VALUE ...] [--timeout 3600]
        [--peers-python .venv-peers/bin/python]
        [--out benchmarks/results/calibration-<date>.json]
    python benchmarks/calibration.py --report FILE.json   # print the tables and targets

Each dataset is ingested and featurized once (``bench_common.prepare``, the shared TF-IDF); the
calibration carve is the one training holds out with the ``calibration`` settings (the defaults,
and ``--set`` items, which apply to every family: ``xmc_core.corpus.carve``). Every family
(``configs/<family>.yaml``) trains in this process with ``predict.threshold_policy=sum`` and
``predict.threshold_per_label=true`` (LibMultiLabel's objective, per label). On the test split:
ECE@k of the raw scores (clipped to [0, 1]) and of the probabilities; micro-F1 and macro-F1 at
the tuned thresholds and at the global one alone; ``calibration_s``: the carve and calibrate
stages, and their share of the training time. ``--compare-uncarved`` trains each family again
with ``calibration.enabled=false`` (the P@1 the carve costs). The peers run in the peers venv
(``calibration_peers.py``): LibMultiLabel on the whole training split (its own
cross-validation), skipped when its dense weight matrix would not fit in half the memory; PECOS
on the training split without the carve, its global threshold chosen on the carve for micro-F1
+ macro-F1. Every metric is computed here. A small XR-Linear is trained first, untimed
(:func:`warm_up`: numba's compilation).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import psutil
import scipy.sparse as sp

from xmc_core.calibration.metrics import ece_at_k, threshold_scores
from xmc_core.calibration.thresholds import Thresholds
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.carve import held_rows
from xmc_core.families.train import train_handles, values_of

DATASETS = ("reuters21578-modapte", "bibtex-bow", "delicious-bow", "debian-deps")
FAMILIES = ("xr-linear", "xr-transformer-cpu", "x-transformer-cpu", "xml-cnn", "astec",
            "hierarchical-xc", "neural-xc", "ensemble")  # fmt: skip
PEERS = ("libmultilabel", "pecos")
TUNED = ["predict.threshold_policy=sum", "predict.threshold_per_label=true"]
KS = (1, 5)
TARGET_ECE5 = 0.02
TARGET_FAMILIES = ("xr-linear", "xr-transformer-cpu")
TARGET_SHARE = 0.10
PEERS_PY = bench_common.REPO / ".venv-peers" / "bin" / "python"


def write_carve(workdir: Path, sets: list[str]) -> dict[str, int]:
    """``X_fit``/``Y_fit`` (training rows the models train on) and ``X_carve``/``Y_carve``
    (the carve) of the shared features, by the carve of the corpus in ``workdir`` that the
    ``calibration`` settings (with ``sets``) make."""
    c = XmcConfig.load(None, sets).calibration
    held = held_rows(workdir / "corpus", c.fraction, c.max_docs, c.seed, c.by_group)
    for m in ("X", "Y"):
        full = sp.load_npz(workdir / f"{m}_train.npz").tocsr()
        sp.save_npz(workdir / f"{m}_fit.npz", full[~held], compressed=False)
        sp.save_npz(workdir / f"{m}_carve.npz", full[held], compressed=False)
    return {"n_fit": int((~held).sum()), "n_carve": int(held.sum())}


def ece_pair(S: sp.csr_matrix, P: sp.csr_matrix | None, Y: sp.csr_matrix) -> dict[str, float]:
    """ECE@k of the raw scores (clipped to [0, 1]) and of the probabilities ``P``."""
    raw = sp.csr_matrix(S, copy=True)
    raw.data = np.clip(raw.data, 0.0, 1.0)
    out = {f"ECE@{k} raw": ece_at_k(raw, Y, k) for k in KS}
    if P is not None:
        out |= {f"ECE@{k}": ece_at_k(P, Y, k) for k in KS}
    return out


def f1s(P: sp.csr_matrix, Y: sp.csr_matrix, threshold: Any, tag: str = "") -> dict[str, float]:
    got = threshold_scores(P, Y, threshold)
    return {f"micro-F1{tag}": got["micro_f1"], f"macro-F1{tag}": got["macro_f1"]}


def run_family(
    family: str, corpus: Path, work: Path, compare: bool, sets: list[str]
) -> dict[str, Any]:
    """Train ``configs/<family>.yaml`` with tuned thresholds (and ``sets``); its figures on the
    test split."""
    preset = bench_common.REPO / "configs" / f"{family}.yaml"
    cfg = XmcConfig.load(preset, [f"work_dir={work / family}", *TUNED, *sets])
    t0 = time.perf_counter()
    run, handles = train_handles(Corpus(corpus), cfg)
    out = values_of(run, handles)
    train_s = time.perf_counter() - t0
    model, test = out["model"], out["model_test"]
    calibration_s = run.timings.get("carve", 0.0) + run.timings.get("calibrate", 0.0)
    result = {"train_s": train_s, "calibration_s": calibration_s,
              "calibration_share": calibration_s / train_s, "P@1": out["evaluation"].values["P@1"],
              "calibrated": model.calibrator is not None}  # fmt: skip
    S = model.predict_features(test.X, topk=20)
    P = model.probabilities(S) if model.calibrator is not None else None
    result |= ece_pair(S, P, test.Y)
    if P is not None:
        c = model.calibrator
        result |= {"map": f"{c.fallback.kind}/{c.grouping}", **f1s(P, test.Y, model.cut()[0])}
        result |= f1s(P, test.Y, c.thresholds.value, " global")
        result["threshold"] = c.thresholds.value
    if compare:
        plain = [f"work_dir={work / (family + '-uncarved')}", *sets, "calibration.enabled=false"]
        done = values_of(*train_handles(Corpus(corpus), XmcConfig.load(preset, plain)))
        result["P@1 uncarved"] = done["evaluation"].values["P@1"]
    return result


def run_peer(peer: str, workdir: Path, python: Path, timeout: float) -> dict[str, Any]:
    """One peer in its own process; its figures on the test split (or why it was skipped)."""
    Y_test = sp.load_npz(workdir / "Y_test.npz").tocsr()
    if peer == "libmultilabel":
        n_features = sp.load_npz(workdir / "X_train.npz").shape[1]
        need = 8 * (n_features + 1) * Y_test.shape[1]  # its dense float64 weights
        if need > psutil.virtual_memory().total / 2:
            return {"skipped": f"dense weights {need / 2**30:.0f} GiB > half the memory"}
    out = workdir / f"out-{peer}"
    cmd = [str(python), str(Path(__file__).with_name("calibration_peers.py")), peer, str(workdir),
           str(out)]  # fmt: skip
    try:
        subprocess.run(cmd, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"over the time limit of {timeout:.0f} s"}
    result = json.loads((out / "result.json").read_text())
    pred = sp.load_npz(out / "pred.npz").tocsr()
    if peer == "libmultilabel":
        return result | f1s(pred, Y_test, 0.5)
    carve = sp.load_npz(out / "carve.npz").tocsr()
    t = Thresholds.tune(carve, sp.load_npz(workdir / "Y_carve.npz").tocsr(), "sum").value
    return result | {"threshold": t} | ece_pair(pred, None, Y_test) | f1s(pred, Y_test, t)


def warm_up(tmp: Path) -> None:
    """Train and calibrate a small XR-Linear once, untimed: numba compiles its kernels here,
    not in the first dataset's figures (a fresh checkout has no compiled cache yet)."""
    from xmc_core.corpus.synthetic import SyntheticSpec
    from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset

    spec = SyntheticSpec(n_train=600, n_test=100, n_domains=2, topics_per_domain=3)
    write_synthetic_dataset(tmp / "warm-up", spec, rows_per_group=300)
    sets = [
        f"work_dir={tmp / 'warm-up-work'}",
        "calibration.fraction=0.2",
        "calibration.min_docs=20",
    ]
    train_handles(Corpus(tmp / "warm-up"), XmcConfig.load(None, sets))


def run_dataset(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    workdir = tmp / name
    workdir.mkdir()
    stats = bench_common.prepare(args.datasets_root / name, workdir, keep_corpus=True)
    stats |= write_carve(workdir, args.sets)
    methods: dict[str, Any] = {}
    for family in args.families:
        print(f"[{name}] {family}", flush=True)
        corpus, work = workdir / "corpus", tmp / "work"
        methods[family] = run_family(family, corpus, work, args.compare_uncarved, args.sets)
    for peer in args.peers:
        print(f"[{name}] {peer}", flush=True)
        methods[peer] = run_peer(peer, workdir, args.peers_python, args.timeout)
    return {"stats": stats, "methods": methods}


COLUMNS = ("train_s", "calibration_share", "P@1", "ECE@1 raw", "ECE@1", "ECE@5 raw", "ECE@5",
           "micro-F1", "macro-F1", "micro-F1 global", "macro-F1 global")  # fmt: skip


def report(results: dict[str, Any]) -> str:
    """A Markdown table per dataset, then the targets, met or not."""
    lines: list[str] = []
    for name, d in results["datasets"].items():
        lines += [f"#### {name}", "", "| method | " + " | ".join(COLUMNS) + " |",
                  "|---|" + "---|" * len(COLUMNS)]  # fmt: skip
        for method, r in d["methods"].items():
            cells = [_cell(c, r.get(c)) for c in COLUMNS] if "skipped" not in r else [
                f"skipped: {r['skipped']}", *[""] * (len(COLUMNS) - 1)]  # fmt: skip
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines + targets(results))


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if column == "train_s" else f"{100 * value:.2f}"


def targets(results: dict[str, Any]) -> list[str]:
    out = ["Targets:"]
    for name, d in results["datasets"].items():
        m = d["methods"]
        for family in TARGET_FAMILIES:
            if family in m and "ECE@5" in m[family]:
                e = m[family]["ECE@5"]
                out.append(f"- {name} {family} ECE@5 {100 * e:.2f}% "
                           f"{'<=' if e <= TARGET_ECE5 else '>'} 2%")  # fmt: skip
        lml = m.get("libmultilabel", {})
        for family, r in m.items():
            if family in PEERS or "micro-F1" not in r:
                continue
            share = r["calibration_share"]
            out.append(f"- {name} {family} calibration {100 * share:.1f}% of training "
                       f"{'<=' if share <= TARGET_SHARE else '>'} 10%")  # fmt: skip
            if "micro-F1" in lml:
                for f in ("micro-F1", "macro-F1"):
                    ok = r[f] >= lml[f]
                    out.append(f"- {name} {family} {f} {100 * r[f]:.2f} {'>=' if ok else '<'} "
                               f"LibMultiLabel {100 * lml[f]:.2f}")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--datasets-root", type=Path, default=bench_common.REPO.parent / "shared" / "datasets"
    )
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--compare-uncarved", action="store_true")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--peers-python", type=Path, default=PEERS_PY)
    p.add_argument("--out", type=Path)
    p.add_argument("--report", type=Path, help="print the tables of a results file")
    args = p.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return
    args.families = [f for f in args.families.split(",") if f]
    args.peers = [f for f in args.peers.split(",") if f]
    today = dt.date.today().isoformat()
    out = args.out or bench_common.REPO / f"benchmarks/results/calibration-{today}.json"
    results: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/calibration.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": bench_common.machine_info(args.peers_python if args.peers else None),
        "git": bench_common.git_state(), "datasets": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        warm_up(Path(tmp))
        for name in args.datasets.split(","):
            results["datasets"][name] = run_dataset(name, args, Path(tmp))
            bench_common.write_json(out, results)  # each dataset as it finishes
    print(report(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
