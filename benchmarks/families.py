"""The model families benchmark: ours (XR-Linear, XR-Transformer, X-Transformer, XML-CNN, an
ensemble of 3 XR-Linear members) and the peers (PECOS XR-Linear, Omikuji, LibMultiLabel's
XML-CNN) on the same datasets, in one run.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/families.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps]
        [--methods xr-linear,...,libmultilabel-xml-cnn] [--repeats 1] [--timeout 3600]
        [--set METHOD:KEY=VALUE ...] [--peers-python .venv-peers/bin/python]
        [--validation FRACTION] [--out benchmarks/results/families-<date>.json]
    python benchmarks/families.py --merge A.json B.json ... --out C.json
    python benchmarks/families.py --report C.json      # print the tables and targets

Each dataset is ingested (``lines`` importer; the bag-of-words sets' text is their feature
words) and featurized ONCE (``bench_common.prepare``: the shared TF-IDF of the peers, the
corpus kept for the text methods). Then every method, one at a time, ``--repeats`` times, in its
own subprocess with its peak RSS sampled (``families_methods``):

- ours: a preset of ``configs/`` plus ``--set METHOD:KEY=VALUE`` overrides, trained by
  ``xmc train``'s in-process graph (``families_runner.py``), predicted from the test texts;
  ``x-transformer`` gets XR-Transformer's encoder and ``matcher.steps_per_level`` x its number
  of matcher levels on that dataset (the same step budget);
- ``pecos`` and ``omikuji`` (3 trees) on the shared TF-IDF (``peer_runner.py``);
- ``frequency``: every test document gets the most frequent training labels
  (``frequency_runner.py``), the floor a learned model must clear;
- ``libmultilabel-xml-cnn`` (``lml_runner.py``): the same texts and splits, a validation part
  carved from train, the settings and embedding initialisation of our XML-CNN preset
  (``--set xml-cnn:...`` applies to both).

The methods ``ensemble-average``, ``ensemble-rank_average`` and ``ensemble-softmax_average`` (the
ensemble preset with that combination rule), ``ensemble-binary`` and ``ensemble-mixed`` (members
with other tree shapes) run only when named. ``--validation FRACTION``
replaces each dataset's test split by that fraction of its train split (the rest trains): the
split on which a preset's settings are chosen, so that the test split never chooses them.

A preset or family that does not exist, or a library that is not installed, is recorded as
``skipped`` with the reason. Every metric is computed here by ``xmc_core.evaluation.metrics``.
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
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import families_methods as fm
import families_report as fr
from peer_runner import TOPK

REPO = bench_common.REPO
DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
PEER_LIBS = (*bench_common.PEER_LIBS, "libmultilabel", "lightning", "torchmetrics", "nltk")


def run_method(
    name: str, workdir: Path, args: argparse.Namespace, context: dict[str, Any]
) -> dict[str, Any]:
    """One run of method ``name`` on the prepared ``workdir``."""
    method = fm.METHODS[name]
    if method.runner == "peer":
        return bench_common.run_once(method.peer, str(args.peers_python), workdir, args.timeout)
    if method.runner == "lml":
        return fm.run_lml(workdir, str(args.peers_python), context[name], args.timeout)
    if method.runner == "frequency":
        return fm.run_frequency(workdir, args.timeout)
    extra = context.get(name, {}).get("overrides", [])
    return fm.run_ours(name, workdir, args.sets.get(name, []), args.timeout, extra)


def method_context(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Per-dataset work before the runs: X-Transformer's step budget, LibMultiLabel's data."""
    context: dict[str, Any] = {}
    if "x-transformer" in args.methods:
        context["x-transformer"] = fm.transformer_budget(workdir, args.sets)
    if fm.LML in args.methods:
        xml_sets = args.sets.get("xml-cnn", [])
        context[fm.LML] = fm.prepare_lml(workdir, str(args.peers_python), xml_sets, TOPK)
    return context


def settings_of(name: str, args: argparse.Namespace, context: dict[str, Any]) -> dict[str, Any]:
    """What a method ran with: its preset, overrides, and computed settings."""
    method = fm.METHODS[name]
    out: dict[str, Any] = {"runner": method.runner, "note": method.note}
    if method.preset is not None:
        out["preset"] = fm.shown(method.preset)
        out["overrides"] = [*method.sets, *args.sets.get("xml-cnn" if name == fm.LML else name, [])]
    if method.peer is not None:
        out["peer"] = method.peer
    if name in context:
        out["computed"] = context[name]
    return out


def bench_dataset(src: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare one dataset, then every method ``--repeats`` times, methods interleaved."""
    result: dict[str, Any] = {"stats": bench_common.prepare(src, workdir, keep_corpus=True)}
    context = method_context(workdir, args)
    result["methods"] = run_methods(src.name, workdir, args, context, run_method, settings_of)
    return result


def run_methods(
    name: str, workdir: Path, args: argparse.Namespace, context: dict[str, Any],
    run: Callable[..., dict[str, Any]], settings: Callable[..., dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """Every method of ``args.methods`` ``args.repeats`` times on dataset ``name``, methods
    interleaved (``run(method, workdir, args, context)``), a progress line each; returns each
    method's summary with ``settings(method, args, context)``."""
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.methods}
    for _ in range(args.repeats):
        for method in args.methods:
            runs[method].append(run(method, workdir, args, context))
            print(f"  {name} {method}: {brief(runs[method][-1])}", flush=True)
    return {m: fr.summarize(rs, settings(m, args, context)) for m, rs in runs.items()}


def brief(run: dict[str, Any]) -> str:
    """One progress line."""
    if run["status"] == "skipped":
        return f"skipped: {run['reason']}"
    if run["status"] != "ok":
        tail = run.get("error_tail", run.get("log_tail", "")).strip().splitlines()
        return f"{run['status']}: {tail[-1] if tail else ''}"
    return (
        f"train {run['train_s']:.1f} s, predict {run['predict_ms_per_1k_docs']:.0f} ms/1k, "
        f"peak RSS {run['peak_rss_mb']:.0f} MB, P@1 {100 * run['metrics']['P@1']:.2f}"
    )


# ---------------------------------------------------------------- command line
def parse_sets(items: list[str], p: argparse.ArgumentParser) -> dict[str, list[str]]:
    """``METHOD:KEY=VALUE`` items -> {method: [KEY=VALUE, ...]}."""
    sets: dict[str, list[str]] = {}
    for item in items:
        method, sep, override = item.partition(":")
        if not sep or "=" not in override or method not in fm.METHODS:
            p.error(f"--set {item!r}: write METHOD:KEY=VALUE, METHOD one of {list(fm.METHODS)}")
        sets.setdefault(method, []).append(override)
    return sets


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument(
        "--methods", default=",".join(fm.DEFAULT_METHODS),
        help=f"comma-separated, of {list(fm.METHODS)} (default: all but the ensemble-* variants)",
    )  # fmt: skip
    p.add_argument(
        "--validation", type=float, metavar="FRACTION",
        help="benchmark on a validation split: this fraction of each dataset's train split, "
        "carved out (seed 0) and used as the test split; the test split is never read",
    )  # fmt: skip
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per method run")
    p.add_argument("--set", action="append", default=[], metavar="METHOD:KEY=VALUE", dest="set_")
    p.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers/bin/python")
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/families-{today}.json")
    p.add_argument("--merge", nargs="+", type=Path, metavar="FILE", help="merge into --out")
    p.add_argument(
        "--replace", action="store_true",
        help="with --merge: a method of a later file replaces the earlier files' runs of it "
        "(a rerun after a change) instead of being pooled with them as repeats",
    )  # fmt: skip
    p.add_argument("--report", type=Path, help="print the tables and targets of a results file")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := set(args.methods) - set(fm.METHODS):
        p.error(f"unknown methods {sorted(unknown)}; choose from {list(fm.METHODS)}")
    args.sets = parse_sets(args.set_, p)
    return args


def run_all(
    args: argparse.Namespace, report: dict[str, Any],
    bench: Callable[[Path, Path, argparse.Namespace], dict[str, Any]] | None = None,
    prefix: str = "xmc-families-",
) -> None:  # fmt: skip
    """Every dataset, in order, benchmarked by ``bench(src, workdir, args)`` (default
    :func:`bench_dataset`) in a temporary folder removed afterwards; with ``args.validation``
    on a carve of its train split."""
    bench = bench or bench_dataset
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for name in args.datasets.split(","):
            workdir, src = Path(tmp) / name, args.datasets_root / name
            workdir.mkdir()
            carved = None
            if args.validation is not None:
                dest = Path(tmp) / "validation" / name
                carved = bench_common.validation_source(src, dest, args.validation, seed=0)
                src = dest
            report["datasets"][name] = bench(src, workdir, args)
            if carved is not None:
                report["datasets"][name]["stats"]["validation"] = carved
            print("\n".join(fr.dataset_table(name, report["datasets"][name])), flush=True)
            shutil.rmtree(workdir)


def machine_info(peers_python: Path) -> dict[str, Any]:
    """``bench_common.machine_info`` with torch and transformers in the project venv."""
    info = bench_common.machine_info(peers_python, PEER_LIBS)
    info["project_venv"] |= {lib: version(lib) for lib in ("torch", "transformers")}
    return info


def main(argv: list[str] | None = None) -> int:
    """Benchmark, merge or report."""
    args = parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "benchmarks/families.py", *given])
    if args.report:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        fr.resummarize(report)
        print(fr.markdown(report))
        return 0
    if args.merge:
        report = fr.merge(args.merge, command, replace=args.replace)
        for line in report["provenance_mismatch"]:
            print(f"warning: merged runs differ: {line}")
        for line in report["replaced"]:
            print(f"replaced: {line}")
        bench_common.write_json(args.out, report)
        print(f"wrote {args.out}")
        return 0
    report: dict[str, Any] = {
        "command": command,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(args.peers_python),
        "git_start": bench_common.git_state(),
        "settings": {k: str(v) for k, v in vars(args).items() if k != "set_"},
        "load_average_start": os.getloadavg(),
        "datasets": {},
    }
    run_all(args, report)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = bench_common.git_state()
    report["targets"] = fr.targets(report["datasets"])  # of a validation split if carved
    bench_common.write_json(args.out, report)
    print("\n".join(fr.target_lines(report["targets"])))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
