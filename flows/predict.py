"""The ``predict`` flow: batch predictions of a dataset split or a text file into one Parquet
file ``doc_id: string, labels: list<string>, scores: list<float32>, probabilities:
list<float32>`` (best first; probabilities null for an uncalibrated model).

    python -m flows.predict MODEL SOURCE OUTPUT.parquet [--split SPLIT] [--topk K]
        [--beam-size B] [--threshold P] [--config cfg.yaml] [--set key=value ...]

``MODEL`` is a model folder or an MLflow URI (``models:/xmc-synthetic@champion``); ``SOURCE`` a
dataset folder (one task per partition of ``--split``, by default the config's ``eval.split``) or
a text file, one document a line (ids ``line-N``, one task per ``data.rows_per_group`` lines). Every
part is cached on the model's and the input's content, so a rerun, or a run after more lines
were appended, recomputes only what changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from prefect import flow
from prefect.states import State

from flows.console import add_verbose_flag, quiet_terminal
from flows.runtime import checked_config, configured, flow_command
from flows.stage_runner import PrefectRunner
from tasks.outcome import completed
from tasks.predict import plan_chunks, resolve_model, write_output
from xmc_core.app.commands import check_source
from xmc_core.app.entry import probability, run_command, whole_count
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.errors import InputError
from xmc_core.lifecycle.artifacts import TextFile
from xmc_core.lifecycle.predict import predict_graph
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.resolve import find_model_folder, is_uri
from xmc_core.storage.paths import require_writable


@flow(name="predict-pipeline", log_prints=True)
def predict_pipeline(
    model: str, source: str, output: str, split: str, cfg: XmcConfig,
    topk: int | None = None, beam_size: int | None = None, threshold: float | None = None,
) -> str:  # fmt: skip
    """Resolve the model, predict every part (``xmc_core.lifecycle.predict``: one cached stage
    task per partition or chunk, on the flow's Dask runner), assemble, write ``output``;
    returns its path."""
    run = PrefectRunner(Path(cfg.work_dir))
    model_dir = run.source(XmcModel, resolve_model(model, cfg))
    if threshold is not None:
        run.value(model_dir).calibrated()  # an uncalibrated model: said before any prediction
    if Path(source).is_dir():
        over: list = Corpus(source).partitions(split)
        handle = run.source(Corpus, source)
    else:
        over, handle = plan_chunks(source, cfg.data.rows_per_group), run.source(TextFile, source)
    predictions = predict_graph(run, model_dir, handle, over, topk, beam_size, threshold)
    return write_output(run.path(predictions), output)


@flow(name="predict", log_prints=True)
def predict(
    model: str, source: str, output: str, split: str | None = None,
    config_path: str | None = None, overrides: list[str] | None = None,
    topk: int | None = None, beam_size: int | None = None, threshold: float | None = None,
) -> str | State:  # fmt: skip
    """Predictions of ``source`` (dataset folder split or text file) by ``model`` into the
    Parquet file ``output``; ``split`` None: the config's ``eval.split``; ``topk`` /
    ``beam_size`` / ``threshold`` None: the model's own settings. The result (the output's
    path) is stored under ``work_dir`` (:func:`tasks.outcome.completed`)."""
    cfg = XmcConfig.load(config_path, overrides)
    split = cfg.eval.split if split is None else split
    if split not in SPLITS:
        raise InputError(None, f"unknown split {split!r}", f"use one of {', '.join(SPLITS)}")
    model_ref = model if is_uri(model) else _abs(model)
    pipeline = configured(predict_pipeline, cfg)
    paths = (model_ref, _abs(source), _abs(output))
    return completed(cfg, pipeline(*paths, split, cfg, topk, beam_size, threshold))


def _abs(path: str) -> str:
    return str(Path(path).resolve())


def _check_inputs(model: str, source: str, output: str, split: str) -> None:
    """A missing model folder or source, a folder that is not a dataset, a split it lacks or
    an output that cannot be written is one clear error before Prefect starts (a URI is
    resolved inside the flow)."""
    if not is_uri(model):
        find_model_folder(Path(model).resolve(), model)
    check_source(Path(source), split)
    require_writable(Path(output))


def main(argv: list[str] | None = None) -> str:
    """Command line: run the predict flow."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="model folder, or an MLflow URI (models:/NAME@ALIAS)")
    parser.add_argument("source", help="dataset folder, or a text file (one document a line)")
    parser.add_argument("output", help="Parquet file to write")
    parser.add_argument("--split", help="split of a dataset folder (default: eval.split)")
    parser.add_argument("--topk", type=whole_count, help="override the model's top-k")
    parser.add_argument("--beam-size", type=whole_count, help="override the model's beam size")
    parser.add_argument(
        "--threshold", type=probability, metavar="P",
        help="only the labels of at least this probability (a calibrated model)",
    )  # fmt: skip
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    quiet_terminal(args.verbose)
    cfg = checked_config(args.config, args.overrides)
    _check_inputs(args.model, args.source, args.output, args.split or cfg.eval.split)
    start = time.perf_counter()
    with flow_command(predict.name, cfg.work_dir, args.verbose):
        result = predict(
            args.model, args.source, args.output, args.split, args.config, args.overrides,
            args.topk, args.beam_size, args.threshold,
        )  # fmt: skip
    print(f"predict flow finished in {time.perf_counter() - start:.1f} s: {result}")
    return result


if __name__ == "__main__":
    sys.exit(run_command(main))
