"""Labels seen for the first time: a model (XR-Linear, or the ``--config`` preset's family)
with and without zero-shot labels on a dataset whose label texts cover labels no training
document carries (debian-deps).

Usage, from the repository root, with the project venv::

    python benchmarks/zero_shot.py [--dataset ../shared/datasets/debian-deps]
        [--config configs/xr-transformer-cpu.yaml]
        [--out benchmarks/results/zero-shot-<date>.json] [--only on|off]

The dataset is ingested once (``lines``, with ``label_map.txt``'s label texts), then trained
in this process (``xmc train``'s graph, the default config or ``--config``) twice:
``label_features.zero_shot`` true and false (``--only``: one of them, e.g. to measure a
change to the zero-shot labels against an earlier results file's ``off`` run). Reported
from the model's own test-split evaluation: ``R@5 unseen`` and ``R@10 unseen`` (the test
assignments of labels without a training document found in the top k; those outside the
label index count as misses),
``P@1 seen`` and ``P@5 seen`` (precision counting only labels with training documents), P@1,
P@5, PSP@5, the labels known and the zero-shot ones, and the train seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import REPO, git_state, machine_basics, write_json

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.schema import Policies
from xmc_core.families.train import train_in_process

SHOWN = ("R@5 unseen", "R@10 unseen", "P@1 seen", "P@5 seen", "P@1", "P@5", "PSP@5")
TARGET_SEEN_DROP = 0.1
"""The issue's bound: P@1 and P@5 of the seen labels fall by at most this (points)."""


def run(corpus: Corpus, work: Path, zero_shot: bool, config: Path | None) -> dict[str, Any]:
    """One training (the ``config`` preset, or the default) with ``label_features.zero_shot``
    set; its figures."""
    sets = [f"work_dir={work}", f"label_features.zero_shot={str(zero_shot).lower()}"]
    start = time.perf_counter()
    out = train_in_process(corpus, XmcConfig.load(str(config) if config else None, sets))
    seconds = time.perf_counter() - start
    metrics = out["evaluation"].values
    return {
        "zero_shot": zero_shot, "model": out["model"].family, "train_s": seconds,
        "metrics": metrics,
        "labels_known": len(out["model"].labels),
        "zero_shot_labels": int(out["label_features"].zero_shot.size),
        "test_unknown_assignments": int(out["test"].unknown_labels),
    }  # fmt: skip


def table(runs: list[dict[str, Any]]) -> list[str]:
    """The runs as a markdown table, and the seen labels' change against the bound."""
    head = "| zero-shot | labels | zero-shot labels | train s | " + " | ".join(SHOWN) + " |"
    lines = [head, "|" + "---|" * (4 + len(SHOWN))]
    for r in runs:
        cells = [f"{100 * r['metrics'].get(m, 0.0):.2f}" for m in SHOWN]
        lines.append(
            f"| {'on' if r['zero_shot'] else 'off'} | {r['labels_known']:,} | "
            f"{r['zero_shot_labels']:,} | {r['train_s']:.1f} | " + " | ".join(cells) + " |"
        )
    if len(runs) < 2:
        return lines
    on, off = (next(r for r in runs if r["zero_shot"] is z) for z in (True, False))
    for m in ("P@1 seen", "P@5 seen"):
        diff = 100 * (on["metrics"][m] - off["metrics"][m])
        verdict = "met" if diff >= -TARGET_SEEN_DROP else "not met"
        lines.append(f"\n{m}: {diff:+.2f} pt with zero-shot labels (bound -{TARGET_SEEN_DROP}: "
                     f"{verdict})")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, default=REPO.parent / "shared/datasets/debian-deps")
    ap.add_argument("--config", type=Path, default=None, help="a preset (default: XR-Linear's)")
    today = dt.date.today().isoformat()
    ap.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/zero-shot-{today}.json")
    ap.add_argument("--only", choices=("on", "off"), default=None, help="one run, not both")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="xmc-zero-shot-") as tmp:
        root = Path(tmp)
        options = IngestOptions(policies=Policies(on_unlabeled="keep"))
        ingest("lines", args.dataset, root / "corpus", options)
        corpus = Corpus(root / "corpus")
        which = (False, True) if args.only is None else (args.only == "on",)
        runs = [run(corpus, root / f"work-{z}", z, args.config) for z in which]
    report = {
        "command": shlex.join(["python", "benchmarks/zero_shot.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_basics(), "git": git_state(), "dataset": str(args.dataset),
        "runs": runs,
    }  # fmt: skip
    write_json(args.out, report)
    print("\n".join(table(runs)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
