"""XR-Transformer: ours vs PECOS's, beside both XR-Linears, on the same data, in one run.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/xr_transformer.py [--preset cpu-reduced|cpu-long|full] [--set KEY=VALUE ...]
        [--datasets debian-deps,reuters21578-modapte] [--datasets-root ../shared/datasets]
        [--methods xr-transformer,pecos-xr-transformer,xr-linear,pecos] [--repeats 1]
        [--timeout 14400] [--peers-python .venv-peers/bin/python]
        [--out benchmarks/results/xr-transformer-<date>.json]
    python benchmarks/xr_transformer.py --report FILE      # print the tables and targets

``--validation FRACTION`` replaces each dataset's test split by that fraction of its train split
(seed 0; the rest trains): where a preset's settings are chosen, never on the test split.

Each dataset is ingested and featurized ONCE (``bench_common.prepare``, default ``XmcConfig``:
word uni+bigram TF-IDF, 200,000 features; the corpus is kept for the texts). Then each method,
``--repeats`` times, methods interleaved, each run in its own subprocess with its peak RSS (the
process tree's) sampled:

- ``xr-transformer``: ours, the ``--preset``'s config file (``configs/``, shared with ``xmc
  train``) then ``--set``, trained by ``xmc train``'s in-process graph and predicted from the
  test texts (``families_runner.py``: every stage timed);
- ``pecos-xr-transformer``: PECOS's ``XTransformer`` with the same encoder folder, token length,
  batch size, steps per level, optimiser settings, negatives, beam and matcher tree, on the
  same TF-IDF (``pecos_xrt.py`` says what is matched and what cannot be);
- ``xr-linear`` (ours, ``configs/xr-linear.yaml``) and ``pecos`` (PECOS XR-Linear, its defaults)
  on the shared TF-IDF.

Every metric is computed by ``xmc_core.evaluation.metrics`` from each method's top-20 scores.
The targets (``xrt_targets.py``), on debian-deps: ours trains in <= 0.6x PECOS XR-Transformer's
time at a P@1 >= its; ours trains in <= 30 minutes with P@1 >= the best XR-Linear's + 2.0;
ours predicts in <= 1.5 s per 1,000 documents. With ``--preset full`` on a CUDA machine (device
``auto``, bf16) the runs also sample the GPU's utilisation every 0.5 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import families
import families_methods as fm
import families_report as fr
import pecos_xrt
import xrt_targets

from xmc_core.config import XmcConfig

REPO = bench_common.REPO
DATASETS = "debian-deps,reuters21578-modapte"
METHODS = ("xr-transformer", "pecos-xr-transformer", "xr-linear", "pecos")
PRESETS: dict[str, Path] = {
    "full": REPO / "configs" / "xr-transformer-gpu.yaml",
    "cpu-reduced": REPO / "configs" / "xr-transformer-cpu.yaml",
    "cpu-long": REPO / "configs" / "xr-transformer-cpu-long.yaml",
}
"""``--preset``: the XR-Transformer config file, for ours and (translated) for PECOS's."""
PEER_LIBS = (*bench_common.PEER_LIBS, "transformers", "tokenizers")


def run_method(
    name: str, workdir: Path, args: argparse.Namespace, context: dict[str, Any]
) -> dict[str, Any]:
    """One run of method ``name`` on the prepared ``workdir``."""
    if name == "xr-transformer":
        keep = None if args.keep_models is None else args.keep_models / workdir.name
        return fm.run_ours(name, workdir, args.overrides, args.timeout, [], args.config, keep)
    if name == "pecos-xr-transformer":
        return pecos_xrt.run(workdir, str(args.peers_python), context, args.timeout)
    if name == "xr-linear":
        return fm.run_ours(name, workdir, [], args.timeout, [])
    return bench_common.run_once("pecos", str(args.peers_python), workdir, args.timeout)


def settings_of(name: str, args: argparse.Namespace, context: dict[str, Any]) -> dict[str, Any]:
    """What a method ran with."""
    if name == "xr-transformer":
        return {"preset": fm.shown(args.config), "overrides": args.overrides}
    if name == "pecos-xr-transformer":
        return {"translated_from": fm.shown(args.config), "overrides": args.overrides} | context
    if name == "xr-linear":
        return {"preset": fm.shown(fm.METHODS["xr-linear"].preset)}
    return {"peer": "pecos", "note": "PECOS XR-Linear, its defaults"}


def bench_dataset(src: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare one dataset, then every method ``--repeats`` times, methods interleaved."""
    result: dict[str, Any] = {"stats": bench_common.prepare(src, workdir, keep_corpus=True)}
    context: dict[str, Any] = {}
    if "pecos-xr-transformer" in args.methods:
        context = pecos_xrt.prepare(workdir, XmcConfig.load(args.config, args.overrides))
    result["methods"] = families.run_methods(
        src.name, workdir, args, context, run_method, settings_of
    )
    return result


def markdown(report: dict[str, Any]) -> str:
    """Every dataset's table and stages, then the targets."""
    lines = [f"Command: `{report['command']}`", ""]
    for name, result in report["datasets"].items():
        lines += fr.dataset_table(name, result)
        lines += xrt_targets.stage_lines(result["methods"])
    targets = xrt_targets.targets(report["datasets"])  # judged by the current rules
    return "\n".join([*lines, *xrt_targets.lines(targets), ""])


# ---------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line; ``config`` = the preset's file, ``overrides`` = ``--set``'s."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu-reduced")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_")
    p.add_argument(
        "--validation", type=float, metavar="FRACTION",
        help="benchmark on a validation split: this fraction of each dataset's train split, "
        "carved out (seed 0) and used as the test split; the test split is never read",
    )  # fmt: skip
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument(
        "--keep-models", type=Path, metavar="DIR",
        help="keep our XR-Transformer's model folder of each dataset in DIR/<dataset> (the "
        "last repeat's), e.g. to measure its predictions at reduced precision",
    )  # fmt: skip
    p.add_argument("--timeout", type=float, default=14400.0, help="seconds per run")
    p.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers/bin/python")
    out = REPO / f"benchmarks/results/xr-transformer-{today}.json"
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--report", type=Path, help="print the tables and targets of a results file")
    args = p.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := set(args.methods) - set(METHODS):
        p.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    args.config, args.overrides = PRESETS[args.preset], args.set_
    XmcConfig.load(args.config, args.overrides)  # fail now on a bad key, not after the baselines
    return args


def run_all(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Every dataset, as :func:`families.run_all` does, each by :func:`bench_dataset`."""
    families.run_all(args, report, bench_dataset, prefix="xmc-xrt-")


def main(argv: list[str] | None = None) -> int:
    """Benchmark every dataset, write the JSON, print Markdown (or only report a file)."""
    args = parse_args(argv)
    if args.report:
        print(markdown(json.loads(args.report.read_text(encoding="utf-8"))))
        return 0
    given = sys.argv[1:] if argv is None else argv
    peers = args.peers_python if {"pecos", "pecos-xr-transformer"} & set(args.methods) else None
    machine = bench_common.machine_info(peers, PEER_LIBS)  # no peers venv needed without them
    machine["project_venv"] |= {lib: version(lib) for lib in ("torch", "transformers")}
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/xr_transformer.py", *given]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "git_start": bench_common.git_state(),
        "settings": {k: str(v) for k, v in vars(args).items() if k != "set_"},
        "xr_transformer_config": XmcConfig.load(args.config, args.overrides).model_dump(
            mode="json"
        ),
        "load_average_start": os.getloadavg(),
        "datasets": {},
    }  # fmt: skip
    run_all(args, report)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = bench_common.git_state()
    report["targets"] = xrt_targets.targets(report["datasets"])
    bench_common.write_json(args.out, report)
    print(markdown(report))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
