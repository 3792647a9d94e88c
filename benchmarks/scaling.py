"""Scaling benchmark: our XR-Linear vs PECOS on synthetic power-law corpora of growing size.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/scaling.py [--sizes 10kx10k,100kx100k,100kx1M,1Mx1M]
        [--methods ours,pecos] [--test-docs 10000] [--timeout 10800] [--memory-gib 24] [--force]
        [--peers-python .venv-peers/bin/python] [--workdir DIR]
        [--out benchmarks/results/scaling-<date>.json]   # the plot goes beside it, .png
    python benchmarks/scaling.py --report benchmarks/results/scaling-<date>.json  # refit, replot

A size ``LABELSxDOCS`` is the number of labels that occur in the training split and the number
of training documents (``k``/``M`` suffixes). Its corpus is ``SyntheticSpec.sized`` with a Zipf
exponent of ``ZIPF`` (every label of the label space has a popularity ``1 / rank**0.75``; the
label space is made larger than LABELS so that about LABELS labels get a training document, see
:func:`spec_labels_for`), a shared pool of ``LABEL_WORD_POOL`` label words, and
``--test-docs`` test documents at every size (10,000: the same prediction workload everywhere,
so that predict ms per 1,000 documents compares across sizes). For each size, in
subprocesses whose process tree's RSS is sampled every 50 ms (``bench_common.measure``):

1. ``scaling_prep.py generate``: write the corpus as a dataset folder (docs/s);
2. ``scaling_prep.py featurize``: our featurization, default config (word uni+bigram TF-IDF,
   200,000 features), into the shared float32 ``.npz`` features (featurize s, peak RSS);
3. ``peer_runner.py ours`` and ``peer_runner.py pecos`` (``bench_common.run_once``): PIFA, tree
   and XR-Linear fit with each library's defaults (train s), predict the test split (ms per
   1,000 documents), peak RSS; this process scores P@k with ``xmc_core.evaluation.metrics``.

Before a size runs, the peak RSS and the wall time of every step are estimated from the sizes
already run (``scaling_report.estimate``); a size whose estimate passes ``--memory-gib`` or
``--timeout`` is skipped with those figures (``--force`` runs it anyway). A step is killed at the
timeout or when its RSS passes the memory limit, and the size records why, with figures. The
results JSON is rewritten (atomically) after every size; at the end the growth exponents are
fitted (``scaling_report.fit``), the log-log plot is written and a Markdown summary printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import scaling_report as report_lib  # benchmarks/ (the script's folder) is on sys.path
from bench_common import REPO, git_state, machine_info, measure, run_once

from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec

SIZES = "10kx10k,100kx100k,100kx1M,1Mx1M"
METHODS = ("ours", "pecos")
ZIPF = 0.75
LABEL_WORD_POOL = 100_000
"""Own label words come from one pool of this many words (``SyntheticSpec.label_word_pool``):
at 1M labels, 12M words of their own would leave almost every label's words below the 200,000
most frequent terms TF-IDF keeps, and labels could not be told apart."""
TEST_DOCS = 10_000
EFFECTIVE_LABELS_PER_DOC = 3.65
"""Label draws per document as far as covering the label space goes: 3.04 labels per document
on average, drawn within a topic without replacement, cover the label space like 3.65 draws
with replacement (measured at 10k and 100k labels: the expected count is then within 1%)."""
PREP = Path(__file__).resolve().with_name("scaling_prep.py")
STEPS = ("generate", "featurize")


def parse_size(text: str) -> tuple[int, int]:
    """``"100kx1M"`` -> (100000, 1000000): labels x training documents."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kM]?)x(\d+(?:\.\d+)?)([kM]?)", text.strip())
    if not m:
        raise ValueError(f"size {text!r} is not LABELSxDOCS (e.g. 100kx1M)")
    unit = {"": 1, "k": 1_000, "M": 1_000_000}
    return round(float(m[1]) * unit[m[2]]), round(float(m[3]) * unit[m[4]])


def expected_labels(space: int, docs: int) -> float:
    """Expected number of the ``space`` labels drawn at least once by ``docs`` documents."""
    popularity = 1.0 / np.arange(1, space + 1, dtype=np.float64) ** ZIPF
    draws = docs * EFFECTIVE_LABELS_PER_DOC * popularity / popularity.sum()
    return float(-np.expm1(-draws).sum())


def spec_labels_for(labels: int, docs: int) -> int | None:
    """Smallest label space (within 0.5%) in which ``docs`` documents reach about ``labels``
    distinct labels; None when even an 8x larger space does not."""
    lo, hi = labels, 8 * labels
    if expected_labels(hi, docs) < labels:
        return None
    while hi - lo > max(1, lo // 200):
        mid = min(max(lo + 1, int(np.sqrt(lo * hi))), hi - 1)
        lo, hi = (lo, mid) if expected_labels(mid, docs) >= labels else (mid, hi)
    return hi


def plan(name: str, n_test: int) -> dict[str, Any]:
    """A size's record before it runs: its targets and its corpus spec with ``n_test`` test
    documents (or why no spec fits)."""
    labels, docs = parse_size(name)
    size: dict[str, Any] = {"name": name, "target_labels": labels, "target_docs": docs}
    space = spec_labels_for(labels, docs)
    if space is None:
        size["status"] = "cannot run"
        size["reason"] = (
            f"{docs} documents (about {docs * EFFECTIVE_LABELS_PER_DOC:.0f} label draws) reach "
            f"only {expected_labels(8 * labels, docs):.0f} distinct labels even in a label space "
            f"of {8 * labels}: ask for fewer labels or more documents"
        )
        return size
    base = SyntheticSpec(zipf_exponent=ZIPF, label_word_pool=LABEL_WORD_POOL, vectorized=True)
    spec = base.sized(space, docs, n_test)
    size["spec"] = dataclasses.asdict(spec)
    size["expected_train_labels"] = round(expected_labels(spec.n_labels, docs))
    return size


def too_big(sizes: list[dict[str, Any]], size: dict[str, Any], args: argparse.Namespace) -> str:
    """Why ``size`` should not run by the estimates from ``sizes`` ('' if it may)."""
    labels, docs = size["target_labels"], size["target_docs"]
    limit_mb, found = args.memory_gib * 1024, []
    estimates = size.setdefault("estimates", {})
    for step in (*STEPS, *args.methods):
        rss, how = report_lib.estimate(sizes, step, "peak_rss_mb", labels, docs)
        wall, _ = report_lib.estimate(sizes, step, "process_wall_s", labels, docs)
        estimates[step] = {"peak_rss_mb": rss, "process_wall_s": wall, "how": how}
        if rss is not None and rss > limit_mb:
            found.append(f"{step}: estimated peak RSS {rss / 1024:.1f} GiB > {args.memory_gib:g}")
        if wall is not None and wall > args.timeout:
            found.append(f"{step}: estimated {wall:.0f} s > timeout {args.timeout:.0f} s")
    return "; ".join(found)


def run_prep(step: str, src: Path, dest: Path, work: Path, args: argparse.Namespace) -> Any:
    """One ``scaling_prep.py`` step, measured; its result JSON merged in."""
    out = work / f"{step}.json"
    cmd = [sys.executable, str(PREP), step, str(src), str(dest), str(out)]
    run = {"command": shlex.join(cmd)}
    run |= measure(cmd, work / f"{step}.log", args.timeout, max_rss_mb=args.memory_gib * 1024)
    if run["status"] == "ok":
        run |= json.loads(out.read_text(encoding="utf-8"))
    else:
        run["log_tail"] = (work / f"{step}.log").read_text(errors="replace")[-3000:]
    return run


def failed(step: str, run: dict[str, Any], args: argparse.Namespace) -> str:
    """Why ``step`` stopped, with its figures."""
    return (
        f"{step}: {run['status']} after {run['process_wall_s']:.0f} s at peak RSS "
        f"{run['peak_rss_mb'] / 1024:.2f} GiB (limits: {args.timeout:.0f} s, "
        f"{args.memory_gib:g} GiB)"
    )


def run_size(size: dict[str, Any], work: Path, args: argparse.Namespace) -> None:
    """Generate, featurize, then every method on one size, filling ``size``."""
    (work / "spec.json").write_text(json.dumps(size["spec"]), encoding="utf-8")
    steps = {
        "generate": (work / "spec.json", work / "corpus"),
        "featurize": (work / "corpus", work),
    }
    for step, (src, dest) in steps.items():
        size[step] = run_prep(step, src, dest, work, args)
        print(f"  {size['name']} {step}: {brief(size[step])}", flush=True)
        if size[step]["status"] != "ok":
            size["status"], size["reason"] = "stopped", failed(step, size[step], args)
            return
    feats = size["featurize"]
    size |= {k: feats[k] for k in ("n_labels", "n_train", "n_test", "n_features", "nnz_train")}
    shutil.rmtree(work / "corpus")
    size["methods"], reasons = {}, []
    for method in args.methods:
        python = sys.executable if method == "ours" else str(args.peers_python)
        run = run_once(method, python, work, args.timeout, max_rss_mb=args.memory_gib * 1024)
        size["methods"][method] = run
        print(f"  {size['name']} {method}: {brief(run)}", flush=True)
        if run["status"] != "ok":
            reasons.append(failed(method, run, args))
    size["status"] = "ok" if not reasons else "partly failed"
    if reasons:
        size["reason"] = "; ".join(reasons)


def brief_estimates(size: dict[str, Any]) -> str:
    """The estimated peak RSS and wall time of each step of ``size``, on one line."""
    parts = []
    for step, e in size.get("estimates", {}).items():
        if e["peak_rss_mb"] is not None:
            parts.append(f"{step} {e['peak_rss_mb'] / 1024:.1f} GiB {e['process_wall_s']:.0f} s")
    return ", ".join(parts) or "nothing (no earlier size)"


def brief(run: dict[str, Any]) -> str:
    """One progress line of a step."""
    if run["status"] != "ok":
        return f"{run['status']} ({run['process_wall_s']:.0f} s, {run['peak_rss_mb']:.0f} MB)"
    parts = [f"{run['process_wall_s']:.1f} s wall", f"peak RSS {run['peak_rss_mb']:.0f} MB"]
    if "docs_per_s" in run:
        parts.append(f"{run['docs_per_s']:.0f} docs/s, {run['train_labels']} train labels")
    if "featurize_s" in run:
        parts.append(f"featurize {run['featurize_s']:.1f} s, X nnz {run['nnz_train']}")
    if "train_s" in run:
        parts.append(f"train {run['train_s']:.1f} s, P@1 {100 * run['metrics']['P@1']:.2f}")
    return ", ".join(parts)


def largest_ok(sizes: list[dict[str, Any]], methods: list[str]) -> dict[str, str | None]:
    """Per method, the largest size (labels x docs) where it and the preparation succeeded."""
    out: dict[str, str | None] = {}
    for method in methods:
        ok = [
            s for s in sizes
            if all(report_lib.step_of(s, st).get("status") == "ok" for st in (*STEPS, method))
        ]  # fmt: skip
        best = max(ok, key=lambda s: s["n_labels"] * s["n_train"], default=None)
        out[method] = None if best is None else best["name"]
    return out


def finish(report: dict[str, Any], out: Path) -> None:
    """Fits, the largest size, the plot beside ``out``, the JSON; print the Markdown."""
    report["fits"] = report_lib.fits(report["sizes"])
    report["largest_ok"] = largest_ok(report["sizes"], report["settings"]["methods"])
    report["plot"] = str(out.with_suffix(".png"))
    report_lib.plot(report["sizes"], out.with_suffix(".png"))
    save(report, out)
    print(report_lib.markdown(report), flush=True)


def save(report: dict[str, Any], out: Path) -> None:
    """Write the results JSON through a temporary name."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, out)


def bench_size(
    name: str, done: list[dict[str, Any]], tmp: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Plan one size, skip it when the estimates from the sizes ``done`` say it cannot fit,
    else run it in a folder under ``tmp`` (removed afterwards)."""
    size = plan(name, args.test_docs)
    why = too_big(done, size, args) if "spec" in size else ""
    if why:
        size["estimates_exceed_limits"] = why
        if not args.force:
            size["status"], size["reason"] = "skipped", why
    if "status" not in size:
        print(f"{name}: running; estimated {brief_estimates(size)}", flush=True)
        work = tmp / name
        work.mkdir()
        run_size(size, work, args)
        shutil.rmtree(work)
    print(f"{name}: {size['status']} {size.get('reason', '')}", flush=True)
    return size


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", default=SIZES, help="comma-separated LABELSxDOCS, e.g. 100kx1M")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--test-docs", type=int, default=TEST_DOCS, help="test documents per size")
    p.add_argument("--timeout", type=float, default=10800.0, help="seconds per step")
    p.add_argument("--memory-gib", type=float, default=24.0, help="RSS limit per step")
    p.add_argument("--force", action="store_true", help="run sizes the estimates would skip")
    p.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers/bin/python")
    p.add_argument("--workdir", type=Path, help="where the corpora and features go (a temp dir)")
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/scaling-{today}.json")
    p.add_argument("--report", type=Path, help="only refit, replot and print this results JSON")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := set(args.methods) - set(METHODS):
        p.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    try:
        args.size_list = [s.strip() for s in args.sizes.split(",") if s.strip()]
        for s in args.size_list:
            parse_size(s)
    except ValueError as e:
        p.error(str(e))
    if "pecos" in args.methods and not args.report and not args.peers_python.exists():
        p.error(f"no peers venv at {args.peers_python}: run `make peers-venv` or --methods ours")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every size, write the JSON and the plot, print Markdown."""
    args = parse_args(argv)
    if args.report:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        finish(report, args.report)
        return 0
    peers = args.peers_python if "pecos" in args.methods else None
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/scaling.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(peers),
        "git_start": git_state(),
        "settings": {k: str(v) for k, v in vars(args).items()} | {"methods": args.methods},
        "corpus": {"zipf_exponent": ZIPF, "label_word_pool": LABEL_WORD_POOL,
                   "test_docs": args.test_docs},
        "limits": {"memory_gib": args.memory_gib, "timeout_s": args.timeout,
                   "cores": len(os.sched_getaffinity(0))},
        "xmc_config": XmcConfig().model_dump(mode="json"),
        "load_average_start": os.getloadavg(),
        "sizes": [],
    }  # fmt: skip
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xmc-scaling-", dir=args.workdir) as tmp:
        for name in args.size_list:
            report["sizes"].append(bench_size(name, report["sizes"], Path(tmp), args))
            save(report, args.out)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = git_state()
    finish(report, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
