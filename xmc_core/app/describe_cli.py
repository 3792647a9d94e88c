"""The describing commands of ``xmc``: ``info``, ``inspect``, ``registry``, ``completion``.

Their sub-parsers (:func:`add_parsers`) and bodies (:func:`run`); ``cli`` only hooks them in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xmc_core.app.completion import SHELLS, script
from xmc_core.config import XmcConfig
from xmc_core.errors import InputError
from xmc_core.storage.atomic import finish_interrupted_swap
from xmc_core.storage.paths import require_dataset_folder, require_model_folder

COMMANDS = ("info", "inspect", "registry", "completion")


def add_parsers(
    sub: argparse._SubParsersAction, config_args: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add the sub-parsers of :data:`COMMANDS` to ``sub`` (``config_args``: adds --config/--set)."""
    info = sub.add_parser(
        "info", help="describe a dataset folder (with label statistics) or a model folder"
    )
    info.add_argument("path", type=Path, help="dataset folder or model folder")
    _output_args(info)
    ins = sub.add_parser("inspect", help="describe a model: family, tree, labels, config, metrics")
    ins.add_argument("model", help="model folder, or an MLflow URI (models:/NAME@ALIAS)")
    _output_args(ins)
    config_args(ins)
    reg = sub.add_parser("registry", help="registered versions, promotion decisions, the alias")
    reg.add_argument("--json", action="store_true", help="print JSON")
    config_args(reg)
    comp = sub.add_parser("completion", help="print a shell completion script")
    comp.add_argument("shell", choices=SHELLS)


def _output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--config-all", action="store_true", help="a model's whole config, not only its changes"
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Run one of :data:`COMMANDS` (``parser``: the whole ``xmc`` parser, for completion)."""
    if args.command == "completion":
        print(script(parser, args.shell), end="")
    elif args.command == "registry":
        from xmc_core.serving.registry.lineage import for_command
        from xmc_core.serving.registry.listing import format_listing, list_versions

        listing = list_versions(for_command(XmcConfig.load(args.config, args.overrides)))
        _print(listing.model_dump(mode="json"), args.json, format_listing(listing))
    elif args.command == "inspect":
        _print_model(_model_folder(args), args)
    else:
        _info(args)


def _info(args: argparse.Namespace) -> None:
    """``xmc info PATH``: a model or a dataset folder, once a replacement of it that a kill
    interrupted is finished (the repair says so in one line)."""
    finish_interrupted_swap(args.path)
    if (args.path / "meta.json").is_file():
        require_model_folder(args.path)  # a model, not one of its parts
        _print_model(args.path, args)
    elif (args.path / "manifest.json").is_file():
        _print_dataset(args.path, args.json)
    elif not args.path.exists():
        require_dataset_folder(args.path)  # says there is no dataset there, and how to make one
    else:
        raise InputError(
            args.path,
            "neither a model folder (no meta.json) nor a dataset folder (no manifest.json)",
            "give a folder written by `xmc train` or `xmc ingest`",
        )


def _model_folder(args: argparse.Namespace) -> Path:
    """The local model folder of ``xmc inspect MODEL`` (a URI is downloaded once into the
    serving cache, as ``xmc serve`` does)."""
    from xmc_core.serving.resolve import find_model_folder, is_uri, local_model_dir

    if is_uri(args.model):
        return local_model_dir(args.model, XmcConfig.load(args.config, args.overrides))
    return find_model_folder(Path(args.model))


def _print_model(folder: Path, args: argparse.Namespace) -> None:
    from xmc_core.app.describe import config_changes, describe_model, format_model

    desc = describe_model(folder)
    config = desc["config"]
    changes = None if config is None else config_changes(config, args.config_all)
    data = {"type": "model", **desc, "config_changes": changes}
    _print(data, args.json, format_model(desc, args.config_all))


def _print_dataset(folder: Path, as_json: bool) -> None:
    from xmc_core.app.describe import manifest_summary
    from xmc_core.corpus import Corpus
    from xmc_core.corpus.label_stats import format_label_stats, label_stats

    corpus = Corpus(folder)
    stats = label_stats(corpus, "train")
    data = {
        "type": "dataset",
        "path": str(folder),
        "manifest": corpus.manifest.model_dump(mode="json"),
        "label_stats": stats.model_dump(mode="json"),
    }
    _print(data, as_json, f"{manifest_summary(corpus.manifest)}\n{format_label_stats(stats)}")


def _print(data: dict[str, Any], as_json: bool, text: str) -> None:
    """``data`` as JSON, or ``text``; a reader that stops early (``| head``) is no error."""
    try:
        print(json.dumps(data, indent=2, ensure_ascii=False) if as_json else text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
