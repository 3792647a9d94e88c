"""The ``xmc`` command line.

    xmc ingest FORMAT SRC DEST [options]   validate and import a corpus into a dataset folder
    xmc synth DEST [--scale S] [--seed N]  write the embedded synthetic corpus as a dataset
    xmc info DATASET|MODEL [--json]        a dataset's summary and label statistics, or a model's
    xmc inspect MODEL [--json] [--config-all]   family, tree, labels, config, metrics, sizes
    xmc train DATASET MODEL [--config F] [--set K=V ...]   train XR-Linear, print test metrics
    xmc train --x X.npz --y Y.npz MODEL [--x-test X --y-test Y] [--label-names F]   on matrices
    xmc predict MODEL SOURCE OUTPUT.jsonl  top labels of a dataset split or a text file
                                           (SOURCE and OUTPUT may be ``-``: stdin, stdout)
    xmc predict MODEL --x X.npz OUT.npz|OUT.jsonl   scores of feature rows (PECOS's Yp.npz)
    xmc evaluate MODEL DATASET             P@k, nDCG@k, R@k, PSP@k of a saved model
    xmc evaluate MODEL --x X.npz --y Y.npz             the same on matrices
    xmc dump-config [--config F] [--set K=V ...]   print the full configuration as YAML
    xmc serve MODEL [--host H] [--port P]  JSON predictions over HTTP (folder or models:/ URI)
        [--token-file F] [--insecure-public]   bearer token ($XMC_SERVE_TOKEN); a non-loopback
        [--header-timeout S] [--body-timeout S] [--max-connections N]   host needs one
    xmc promote VERSION                    give the registry alias to VERSION (no gate)
    xmc rollback                           give the alias back to its previous holder
    xmc registry [--json]                  registered versions, decisions and the alias holder
    xmc completion bash|zsh                a shell completion script (eval "$(xmc completion bash)")
    xmc [-v] ...                           -v: more detail in the logs

Orchestrated runs (featurize, train) are Prefect flows: ``python -m flows.train``.
Option defaults are the config models' own (``serve.*``, ``eval.split``, ...; help prints them);
the CLI passes only what the user gave.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from xmc_core.app import describe_cli
from xmc_core.app.describe import manifest_summary
from xmc_core.app.entry import positive_number, probability, run_command, whole_count
from xmc_core.config import XmcConfig
from xmc_core.corpus import Manifest, Policies
from xmc_core.corpus.importers import FORMATS, IngestOptions, ingest
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.interrupt import on_ctrl_c, running_stage
from xmc_core.wording import counted

_S = argparse.SUPPRESS
_DEFAULTS = XmcConfig()


def _default(key: str) -> str:
    """``(default: KEY, VALUE)`` for a help text: the value of the dotted config ``key``."""
    section, field = key.split(".")
    return f"(default: {key}, {getattr(getattr(_DEFAULTS, section), field)})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xmc", description="extreme multi-label classification")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="more detail in the logs (stage outputs)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    ing = sub.add_parser("ingest", help="validate and import a corpus into a dataset folder")
    ing.add_argument("format", choices=sorted(FORMATS))
    ing.add_argument("src", type=Path, help="folder holding the split files")
    ing.add_argument("dest", type=Path, help="dataset folder to create")
    ing.add_argument("--on-empty", choices=["error", "drop"], default=_S)
    ing.add_argument("--on-unlabeled", choices=["error", "drop", "keep"], default=_S)
    for name in ("id-column", "group-column", "text-column", "labels-column", "label-sep"):
        ing.add_argument(f"--{name}", default=_S)
    ing.add_argument("--rows-per-group", type=whole_count, default=_S)
    ing.add_argument("--overwrite", action="store_true", default=_S)

    syn = sub.add_parser("synth", help="write the embedded synthetic corpus as a dataset")
    syn.add_argument("dest", type=Path)
    syn.add_argument(
        "--scale", type=positive_number, default=_S, help="multiplies the document count"
    )
    syn.add_argument("--seed", type=int, default=_S)
    syn.add_argument("--rows-per-group", type=whole_count, default=_S)
    syn.add_argument("--overwrite", action="store_true", default=_S)

    describe_cli.add_parsers(sub, _config_args)  # info, inspect, registry, completion

    dump = sub.add_parser("dump-config", help="print the full configuration as YAML")
    _config_args(dump)

    tr = sub.add_parser("train", help="train XR-Linear on a dataset folder, print test metrics")
    tr.add_argument("dataset", type=Path, help="dataset folder (with --x: the model folder)")
    tr.add_argument("model", type=Path, nargs="?", help="model folder to create")
    tr.add_argument("--overwrite", action="store_true", default=_S)
    tr.add_argument(
        "--track", action="store_true",
        help="then what the train flow does: MLflow run, registration, gated promotion, report "
        "(also when the config sets tracking.enabled=true)",
    )  # fmt: skip
    _config_args(tr)
    _matrix_args(tr, train=True)

    pr = sub.add_parser("predict", help="top labels of a dataset split or a text file")
    pr.add_argument("model", type=Path)
    pr.add_argument(
        "source",
        type=Path,
        help="dataset folder, or a text file (one doc a line; - for stdin); with --x: the output",
    )
    pr.add_argument(
        "output", type=Path, nargs="?",
        help="JSON lines file to write (- for stdout), or .npz: the score matrix",
    )  # fmt: skip
    _predict_args(pr, threshold=True)
    _matrix_args(pr)

    ev = sub.add_parser("evaluate", help="metrics of a saved model on a dataset split")
    ev.add_argument("model", type=Path)
    ev.add_argument("dataset", type=Path, nargs="?", help="dataset folder (not with --x)")
    _predict_args(ev)
    _config_args(ev)
    _matrix_args(ev, labels=True)

    srv = sub.add_parser("serve", help="answer JSON predictions over HTTP (127.0.0.1)")
    srv.add_argument("model", help="model folder, or an MLflow URI (models:/NAME@ALIAS)")
    srv.add_argument("--host", default=_S, help=f"address to bind {_default('serve.host')}")
    srv.add_argument("--port", type=int, default=_S, help=f"port {_default('serve.port')}")
    srv.add_argument("--beam-size", type=int, help="default beam size of requests")
    srv.add_argument("--topk", type=int, help="default top-k of requests")
    srv.add_argument(
        "--token-file", type=Path, default=_S,
        help="file holding the bearer token clients must send (else $XMC_SERVE_TOKEN)",
    )  # fmt: skip
    srv.add_argument(
        "--insecure-public", action="store_true", default=_S,
        help="allow a non-loopback --host without a token",
    )  # fmt: skip
    srv.add_argument(
        "--header-timeout", dest="header_timeout_s", type=float, default=_S, metavar="S",
        help="seconds a client has to send a request head (then 408 and closed) "
        + _default("serve.header_timeout_s"),
    )  # fmt: skip
    srv.add_argument(
        "--body-timeout", dest="body_timeout_s", type=float, default=_S, metavar="S",
        help="seconds a client has to send a request body once its head is in (then closed) "
        + _default("serve.body_timeout_s"),
    )  # fmt: skip
    srv.add_argument(
        "--max-connections", type=int, default=_S, metavar="N",
        help="open connections served at once; the ones over it get 503 "
        + _default("serve.max_connections"),
    )  # fmt: skip
    _config_args(srv)

    pro = sub.add_parser("promote", help="give the registry alias to a model version (no gate)")
    pro.add_argument("version", help="registered model version number")
    _config_args(pro)
    rb = sub.add_parser("rollback", help="give the registry alias back to its previous holder")
    _config_args(rb)
    return parser


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="YAML config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="K=V")


def _predict_args(p: argparse.ArgumentParser, threshold: bool = False) -> None:
    p.add_argument("--split", help=f"split of a dataset folder {_default('eval.split')}")
    p.add_argument("--beam-size", type=whole_count, help="override the model's beam size")
    p.add_argument("--topk", type=whole_count, help="override the model's top-k")
    if threshold:
        p.add_argument(
            "--threshold", type=probability, metavar="P",
            help="only the labels of at least this probability (a calibrated model; default: "
            "the model's predict.threshold, if any)",
        )  # fmt: skip


_MATRIX_USAGE = {
    "train": "%(prog)s DATASET MODEL [options]\n"
    "       %(prog)s --x X.npz --y Y.npz MODEL [--x-test X.npz --y-test Y.npz] [options]",
    "predict": "%(prog)s MODEL SOURCE OUTPUT [options]\n"
    "       %(prog)s MODEL --x X.npz OUTPUT.npz|OUTPUT.jsonl|- [options]",
    "evaluate": "%(prog)s MODEL DATASET [options]\n"
    "       %(prog)s MODEL --x X.npz --y Y.npz [options]",
}
"""Usage lines of the commands that also take matrices (argparse's own cannot say "either")."""


def _matrix_args(p: argparse.ArgumentParser, labels: bool = False, train: bool = False) -> None:
    """``--x`` (and ``--y``, test matrices, label names): scipy sparse ``.npz`` files in place
    of a dataset folder or a text file (the PECOS layout)."""
    p.usage = _MATRIX_USAGE[p.prog.split()[-1]]
    p.add_argument("--x", type=Path, metavar="X.npz", help="feature matrix (CSR/CSC .npz)")
    if labels or train:
        p.add_argument("--y", type=Path, metavar="Y.npz", help="label matrix (0/1 CSR/CSC .npz)")
    if train:
        p.add_argument("--x-test", type=Path, metavar="X.npz", help="test features")
        p.add_argument("--y-test", type=Path, metavar="Y.npz", help="test labels")
        p.add_argument(
            "--label-names", type=Path, metavar="FILE",
            help="one label name a line, in Y's column order (default: column numbers)",
        )  # fmt: skip


def _matrix_positionals(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """With ``--x`` the one path after MODEL (train: the only path) is the output; the matrix
    options come as a set. Anything else is a usage error (exit status 2) before any work."""
    if args.command not in ("train", "predict", "evaluate"):
        return
    names = ("y", "x_test", "y_test", "label_names")
    extra = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) is not None]
    if args.x is None:
        usage = {
            "train": ("model", "train needs DATASET MODEL (or --x X.npz --y Y.npz MODEL)"),
            "predict": ("output", "predict needs MODEL SOURCE OUTPUT (or MODEL --x X.npz OUTPUT)"),
            "evaluate": ("dataset", "evaluate needs MODEL DATASET (or MODEL --x X.npz --y Y.npz)"),
        }[args.command]
        if extra:
            parser.error(f"{', '.join(extra)} need --x")
        if getattr(args, usage[0]) is None:
            parser.error(usage[1])
    elif args.command == "train":
        if args.model is not None or args.y is None:
            parser.error("train --x takes --x X.npz --y Y.npz MODEL (no DATASET)")
        args.model, args.dataset = args.dataset, None
    elif args.command == "predict":
        if args.output is not None:
            parser.error("predict --x takes MODEL --x X.npz OUTPUT (no SOURCE)")
        args.output, args.source = args.source, None
    elif args.dataset is not None or args.y is None:
        parser.error("evaluate --x takes MODEL --x X.npz --y Y.npz (no DATASET)")


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {n: getattr(args, n) for n in names if hasattr(args, n)}


def _ingest(args: argparse.Namespace) -> Manifest:
    policies = Policies(**_given(args, "on_empty", "on_unlabeled"))
    fields = ("id_column", "group_column", "text_column", "labels_column", "label_sep",
              "rows_per_group")  # fmt: skip
    options = IngestOptions(policies=policies, **_given(args, *fields, "overwrite"))
    return ingest(args.format, args.src, args.dest, options)


def _synth(args: argparse.Namespace) -> Manifest:
    spec = SyntheticSpec(**_given(args, "seed"))
    if hasattr(args, "scale"):
        spec = spec.scaled(args.scale)
    return write_synthetic_dataset(args.dest, spec, **_given(args, "rows_per_group", "overwrite"))


def _model_command(args: argparse.Namespace) -> None:
    from xmc_core.app import commands  # numba kernels: imported only when a model command runs

    if args.x is not None:
        _matrix_command(args)
    elif args.command == "train":
        loaded = XmcConfig.load(args.config, args.overrides)
        cfg, track = commands.tracked_config(loaded, args.track, args.dataset)
        with on_ctrl_c(lambda: _train_stopped(cfg)):
            commands.train(args.dataset, args.model, cfg, track=track, **_given(args, "overwrite"))
    elif args.command == "evaluate":
        cfg = XmcConfig.load(args.config, args.overrides)
        split = cfg.eval.split if args.split is None else args.split
        commands.evaluate(args.model, args.dataset, split, cfg, args.beam_size, args.topk)
    elif args.command == "predict":
        split = _DEFAULTS.eval.split if args.split is None else args.split
        n = commands.predict(
            args.model, args.source, args.output, split, args.beam_size, args.topk,
            args.threshold,
        )  # fmt: skip
        _wrote(n, args.output)


def _train_stopped(cfg: XmcConfig) -> str:
    """What a Ctrl-C of ``xmc train`` stopped (the stage running) and what a rerun does."""
    stage = running_stage()
    return (
        f"xmc train stopped{f' at {stage}' if stage else ''}; rerun the same command to train "
        f"again (stages with checkpoints resume from {Path(cfg.work_dir).resolve() / 'artifacts'})"
    )


def _wrote(n: int, output: Path) -> None:
    to_stdout = str(output) == "-"
    where = "stdout" if to_stdout else output
    print(
        f"wrote predictions of {counted(n, 'document')} to {where}",
        file=sys.stderr if to_stdout else None,
    )


def _matrix_command(args: argparse.Namespace) -> None:
    """``train``, ``predict``, ``evaluate`` with ``--x``: on ``.npz`` matrices."""
    from xmc_core.app import matrix_commands
    from xmc_core.features.matrices import MatrixFiles

    cfg = XmcConfig.load(getattr(args, "config", None), getattr(args, "overrides", []))
    if args.command == "train":
        names = ("x_test", "y_test", "label_names")
        files = MatrixFiles(args.x, args.y, **{n: getattr(args, n) for n in names})
        with on_ctrl_c(lambda: _train_stopped(cfg)):
            matrix_commands.train(files, args.model, cfg, **_given(args, "overwrite"))
    elif args.command == "predict":
        _wrote(
            matrix_commands.predict(
                args.model, args.x, args.output, args.beam_size, args.topk, args.threshold
            ),
            args.output,
        )
    else:
        matrix_commands.evaluate(args.model, args.x, args.y, cfg, args.beam_size, args.topk)


def _lifecycle_command(args: argparse.Namespace) -> None:
    """``serve``, ``promote``, ``rollback``: the MLflow-facing part (``xmc_core.serving``)."""
    cfg = XmcConfig.load(args.config, args.overrides)
    if args.command == "serve":
        from xmc_core.serving.http import serve
        from xmc_core.serving.limits import Limits

        given = _given(args, "header_timeout_s", "body_timeout_s", "max_connections")
        limits = Limits.from_config(cfg.serve, **given)
        host, port = getattr(args, "host", cfg.serve.host), getattr(args, "port", cfg.serve.port)
        serve(
            args.model, cfg, host, port, args.topk, args.beam_size, limits,
            **_given(args, "token_file", "insecure_public"),
        )  # fmt: skip
        return
    from xmc_core.serving.registry import promotion as registry
    from xmc_core.serving.registry.lineage import for_command

    cfg = for_command(cfg)  # the model a training run with this config registers under
    if args.command == "promote":
        print(registry.format_decision(registry.promote_version(cfg, args.version)))
    else:
        print(registry.format_decision(registry.rollback(cfg)))


def _run(args: argparse.Namespace) -> None:
    """Run the parsed command (expected failures are turned into messages by ``main``)."""
    if args.command == "ingest":
        print(manifest_summary(_ingest(args)))
    elif args.command == "synth":
        print(manifest_summary(_synth(args)))
    elif args.command in describe_cli.COMMANDS:
        describe_cli.run(args, _parser())
    elif args.command == "dump-config":
        print(XmcConfig.load(args.config, args.overrides).to_yaml(), end="")
    elif args.command in ("serve", "promote", "rollback"):
        _lifecycle_command(args)
    else:
        _model_command(args)


def _writes(args: argparse.Namespace) -> Path | None:
    """The output the command writes (named when a write fails without a path)."""
    for name in ("output", "dest", "model"):
        value = getattr(args, name, None)
        if isinstance(value, Path) and (name != "model" or args.command == "train"):
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xmc`` console script; returns the exit status (2: an error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    _matrix_positionals(parser, args)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("xmc_core").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    return run_command(lambda: _run(args), _writes(args))


if __name__ == "__main__":
    sys.exit(main())
