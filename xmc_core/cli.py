"""The ``xmc`` command line.

    xmc ingest FORMAT SRC DEST [options]   validate and import a corpus into a dataset folder
    xmc synth DEST [--scale S] [--seed N]  write the embedded synthetic corpus as a dataset
    xmc info DATASET                       print a dataset's manifest summary
    xmc dump-config [--config F] [--set K=V ...]   print the full configuration as YAML

Orchestrated runs (featurize, train) are Prefect flows: ``python -m flows.train``.
Option defaults are the config models' own; the CLI passes only what the user gave.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus, Manifest, Policies
from xmc_core.corpus.importers import FORMATS, IngestOptions, ingest
from xmc_core.corpus.schema import SPLITS
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import XmcError

_S = argparse.SUPPRESS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xmc", description="extreme multi-label classification")
    sub = parser.add_subparsers(dest="command", required=True)

    ing = sub.add_parser("ingest", help="validate and import a corpus into a dataset folder")
    ing.add_argument("format", choices=sorted(FORMATS))
    ing.add_argument("src", type=Path, help="folder holding the split files")
    ing.add_argument("dest", type=Path, help="dataset folder to create")
    ing.add_argument("--on-empty", choices=["error", "drop"], default=_S)
    ing.add_argument("--on-unlabeled", choices=["error", "drop", "keep"], default=_S)
    for name in ("id-column", "text-column", "labels-column", "label-sep"):
        ing.add_argument(f"--{name}", default=_S)
    ing.add_argument("--rows-per-group", type=int, default=_S)
    ing.add_argument("--overwrite", action="store_true", default=_S)

    syn = sub.add_parser("synth", help="write the embedded synthetic corpus as a dataset")
    syn.add_argument("dest", type=Path)
    syn.add_argument("--scale", type=float, default=_S, help="multiplies the document count")
    syn.add_argument("--seed", type=int, default=_S)
    syn.add_argument("--rows-per-group", type=int, default=_S)
    syn.add_argument("--overwrite", action="store_true", default=_S)

    info = sub.add_parser("info", help="print a dataset's manifest summary")
    info.add_argument("dataset", type=Path)

    dump = sub.add_parser("dump-config", help="print the full configuration as YAML")
    dump.add_argument("--config", type=Path)
    dump.add_argument("--set", dest="overrides", action="append", default=[], metavar="K=V")
    return parser


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names if hasattr(args, n)}


def _ingest(args: argparse.Namespace) -> Manifest:
    policies = Policies(**_given(args, "on_empty", "on_unlabeled"))
    fields = ("id_column", "text_column", "labels_column", "label_sep", "rows_per_group")
    options = IngestOptions(policies=policies, **_given(args, *fields, "overwrite"))
    return ingest(args.format, args.src, args.dest, options)


def _synth(args: argparse.Namespace) -> Manifest:
    spec = SyntheticSpec(**_given(args, "seed"))
    if hasattr(args, "scale"):
        spec = spec.scaled(args.scale)
    return write_synthetic_dataset(args.dest, spec, **_given(args, "rows_per_group", "overwrite"))


def manifest_summary(m: Manifest) -> str:
    """A few lines a person reads after an ingest."""
    lines = [f"kind: {m.kind}" + (f" ({m.n_features} features)" if m.n_features else "")]
    for name in SPLITS:
        s = m.splits[name]
        extra = [
            f"{k.replace('_', ' ')} {v}"
            for k, v in (
                ("dropped_empty", s.dropped_empty),
                ("dropped_unlabeled", s.dropped_unlabeled),
                ("kept_unlabeled", s.kept_unlabeled),
                ("duplicate_labels_removed", s.duplicate_labels_removed),
            )
            if v
        ]
        note = f" ({', '.join(extra)})" if extra else ""
        lines.append(
            f"{name}: {s.rows} docs, {s.label_assignments} label assignments, "
            f"{s.distinct_labels} labels{note}"
        )
    lines.append(f"labels in train: {m.n_labels} (all splits: {m.n_labels_total})")
    if m.unseen_test_labels:
        shown = ", ".join(m.unseen_test_examples[:5])
        lines.append(
            f"warning: {m.unseen_test_labels} test labels never occur in train "
            f"({m.unseen_test_assignments} assignments), e.g. {shown}"
        )
    lines.append(f"fingerprint: {m.fingerprint}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xmc`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "ingest":
            print(manifest_summary(_ingest(args)))
        elif args.command == "synth":
            print(manifest_summary(_synth(args)))
        elif args.command == "info":
            print(manifest_summary(Corpus(args.dataset).manifest))
        elif args.command == "dump-config":
            print(XmcConfig.load(args.config, args.overrides).to_yaml(), end="")
    except (XmcError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
