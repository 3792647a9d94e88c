"""What ``xmc train``, ``xmc predict`` and ``xmc evaluate`` do (the parsers live in ``cli``)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import scipy.sparse as sp

from xmc_core.app.predictions import ranked_lists
from xmc_core.app.summary import RunSummary, cache_line, members_line
from xmc_core.config import DEFAULT_ROWS_PER_GROUP, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers.textio import iter_doc_lines
from xmc_core.corpus.reader import read_manifest, require_split
from xmc_core.errors import InputError, PathError, XmcError
from xmc_core.evaluation.metrics import format_metrics
from xmc_core.evaluation.outcome import promotion_outcome
from xmc_core.evaluation.report import corpus_line
from xmc_core.families.train import check_dataset, train_handles, values_of
from xmc_core.lifecycle.artifacts import REPORT_FILE
from xmc_core.model.model_folder import TRAINING_FILE, training_record
from xmc_core.model.xmc_model import XmcModel, save_model_folder
from xmc_core.storage.atomic import atomic_file
from xmc_core.storage.folder_swap import check_dir_target
from xmc_core.storage.paths import require_model_folder, require_writable

_BATCH = DEFAULT_ROWS_PER_GROUP
"""Lines of a text source predicted at once (as the predict flow's chunks, by default)."""


def train(
    dataset: Path, model_dir: Path, cfg: XmcConfig, overwrite: bool = False, track: bool = False
) -> dict:
    """Featurize, build the tree, train, evaluate on test; save the model folder atomically,
    with its config, test metrics and the dataset it was trained on (``training.json``). With
    ``track``, then the lifecycle stages the ``train`` flow runs (``xmc_core.lifecycle``):
    train-split evaluation, diagnostics, the MLflow run and registration, the gate, the report.

    Refused before any work (reading only the dataset's manifest): a dataset that is missing
    or not a dataset or of a kind ``model.kind`` cannot train on; an existing ``model_dir``
    (without ``overwrite``), a link or file there, or one that cannot be created.
    """
    require_writable(Path(model_dir), folder=True)
    check_dir_target(Path(model_dir), overwrite)
    check_dataset(dataset, cfg)
    start = time.perf_counter()
    corpus = Corpus(dataset)
    run, handles = train_handles(corpus, cfg)
    outputs = {**values_of(run, handles), "stages": run.tally}
    model, metrics = outputs["model"], outputs["evaluation"].values
    record = {TRAINING_FILE: training_record(corpus.path, corpus.fingerprint)}
    save_model_folder(model_dir, model, cfg, {"test": metrics}, overwrite, record)
    members = [m.values for m in outputs.get("member_evaluations", [])]
    extra = {"members": members_line(members)} if members else {}
    lines = {}
    if track:
        from xmc_core.lifecycle.graph import lifecycle_in_process

        lines = tracked_lines(cfg, lifecycle_in_process(run, handles, Path(model_dir), cfg))
        extra["report"] = lines.pop("report")
    summary = RunSummary(
        family=cfg.model.kind, dataset=str(dataset), metrics=metrics, model=str(model_dir),
        seconds=time.perf_counter() - start, data=corpus_line(corpus.manifest),
        cache=cache_line(outputs["stages"].reused, outputs["stages"].calls), extra=extra,
        **lines,
    )  # fmt: skip
    print(summary.format())
    return metrics


def tracked_config(cfg: XmcConfig, track: bool, dataset: Path) -> tuple[XmcConfig, bool]:
    """(config, whether ``xmc train`` runs the lifecycle): with ``track`` (``--track``), or a
    config that sets ``tracking.enabled=true`` itself (its default leaves ``xmc train``
    untracked). A tracked run's config names the dataset it trains on (``data.dataset``), as a
    flow's does."""
    track = track or ("enabled" in cfg.tracking.model_fields_set and cfg.tracking.enabled)
    if not track:
        return cfg, False
    data = cfg.data
    if data.dataset is None:
        data = data.model_copy(update={"dataset": Path(dataset)})
    tracking = cfg.tracking.model_copy(update={"enabled": True})
    return cfg.model_copy(update={"data": data, "tracking": tracking}), True


def tracked_lines(cfg: XmcConfig, done: dict) -> dict[str, str]:
    """The summary's ``mlflow``, ``registry`` and ``report`` lines of a lifecycle run in this
    process (``done``: :func:`~xmc_core.lifecycle.graph.lifecycle_in_process`)."""
    tracked = {} if done["tracked"] is None else done["tracked"].values
    decision = None if done["decision"] is None else done["decision"].values
    mlflow = f"run {tracked['run_id']}" if tracked else ""
    if tracked.get("run_url"):
        mlflow += f"  {tracked['run_url']}"
    report = str(done["report"].folder / REPORT_FILE)
    return {"mlflow": mlflow, "registry": promotion_outcome(cfg, decision)[1], "report": report}


def evaluate(
    model_dir: Path, dataset: Path, split: str, cfg: XmcConfig, beam: int | None, topk: int | None
) -> dict:
    """Metrics of a saved model on one split of a dataset folder (the paths and the split are
    checked before the model is loaded)."""
    require_model_folder(model_dir)
    read_manifest(dataset)
    require_split(dataset, split)
    model = XmcModel.load(model_dir)
    feats = model.encode_split(Corpus(dataset), split)
    metrics = model.evaluate(feats, cfg.eval, beam_size=beam, topk=topk)
    print(format_metrics(metrics))
    return metrics


def _predictions(
    source: Path, split: str, model: XmcModel, beam: int | None, topk: int | None
) -> Iterator[tuple[list[str], sp.csr_matrix]]:
    """Batches of (doc ids, scores) from a dataset folder, a text file (one doc a line) or
    ``-`` (the same on stdin)."""
    if str(source) != "-" and source.is_dir():
        feats = model.encode_split(Corpus(source), split)
        yield feats.doc_ids.to_pylist(), model.predict_features(feats.X, topk, beam)
        return
    with contextlib.ExitStack() as stack:
        fh = sys.stdin.buffer if str(source) == "-" else stack.enter_context(open(source, "rb"))
        name = "<stdin>" if str(source) == "-" else source
        batch: list[tuple[int, str]] = []
        for line in iter_doc_lines(fh, name, model.ranker.predict_cfg.max_doc_chars):
            batch.append(line)
            if len(batch) == _BATCH:
                yield _predict_lines(batch, model, beam, topk)
                batch = []
        if batch:
            yield _predict_lines(batch, model, beam, topk)


def check_predict_paths(model: Path, source: Path, output: Path, split: str) -> None:
    """Refuse a model folder, a source or an output a prediction run would fail on, before any
    work: a missing model or source, a folder that is not a dataset, a split it lacks, an
    output that cannot be written (``-``: stdin, stdout)."""
    require_model_folder(model)
    if str(source) != "-":
        check_source(Path(source), split, stdin=True)
    if str(output) != "-":
        require_writable(Path(output))


def check_source(source: Path, split: str, stdin: bool = False) -> None:
    """Refuse a prediction source before any work: neither a dataset folder (holding
    ``split``) nor a text file. ``stdin``: the fix mentions ``-`` (the command reads stdin)."""
    if source.is_dir():
        read_manifest(source)
        require_split(source, split)
    elif not source.is_file():
        accepted = "a dataset folder, a text file (one document a line)"
        raise PathError(
            source, f"no input at {source}", "no such file or folder",
            f"give {accepted}, or - for stdin" if stdin else f"give {accepted}",
        )  # fmt: skip


def _predict_lines(
    batch: list[tuple[int, str]], model: XmcModel, beam: int | None, topk: int | None
) -> tuple[list[str], sp.csr_matrix]:
    ids = [f"line-{lineno}" for lineno, _ in batch]
    return ids, model.predict([text for _, text in batch], topk, beam)


def _write_records(
    out: BinaryIO, model: XmcModel, batches: Iterator[tuple[list[str], sp.csr_matrix]],
    threshold: float | None,
) -> int:  # fmt: skip
    """Write one JSON line ``{"doc_id", "labels", "scores"}`` per document, with
    ``"probabilities"`` for a calibrated model (``threshold``: see
    :meth:`~xmc_core.model.xmc_model.XmcModel.cut`); returns the count."""
    n = 0
    cut = model.cut(threshold)
    for ids, scores in batches:
        cols = ranked_lists(model, scores, *cut)
        if model.calibrator is None:
            del cols["probabilities"]
        for doc_id, *row in zip(ids, *cols.values(), strict=True):
            record = {"doc_id": doc_id}
            for name, values in zip(cols, row, strict=True):
                record[name] = values if name == "labels" else [round(v, 6) for v in values]
            out.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            n += 1
    return n


def predict(
    model_dir: Path, source: Path, output: Path, split: str, beam: int | None, topk: int | None,
    threshold: float | None = None,
) -> int:  # fmt: skip
    """Write JSON lines ``{"doc_id", "labels", "scores"}`` for every document (with
    ``"probabilities"``, and only the labels that reach ``threshold`` when one is given or the
    model has its own: a calibrated model), atomically.

    ``source`` is a dataset folder (``split`` is read) or a UTF-8 text file, one document a line
    (ids ``line-N``); ``-`` reads such lines from stdin. ``output`` ``-`` writes to stdout; a
    ``.npz`` path gets the score matrix instead (:func:`write_predictions`). Returns the number
    of documents. The model, the source and the output are checked before the model is loaded.
    """
    check_predict_paths(model_dir, source, output, split)
    model = XmcModel.load(model_dir)
    check_threshold(model, threshold, output)
    batches = _predictions(source, split, model, beam, topk)
    return write_predictions(output, model, batches, threshold)


def check_threshold(model: XmcModel, threshold: float | None, output: Path) -> None:
    """Refuse, before any prediction, a threshold for an uncalibrated model or a score
    matrix (``.npz``) output."""
    if threshold is None:
        return
    model.calibrated()  # an uncalibrated model: the error says how to get a calibrated one
    if Path(output).suffix == ".npz":
        raise InputError(
            output, "--threshold cuts JSON lines; a .npz output is the whole score matrix",
            "write JSON lines (any other suffix, or -), or leave out --threshold",
        )  # fmt: skip


def write_predictions(
    output: Path, model: XmcModel, batches: Iterator[tuple[list[str], sp.csr_matrix]],
    threshold: float | None = None,
) -> int:  # fmt: skip
    """Write batches of (doc ids, scores csr (n, n_labels)) to ``output``: a ``.npz`` file gets
    the score matrix (``scipy.sparse.save_npz``, as PECOS's ``-o Yp.npz``), ``-`` stdout and any
    other path JSON lines (``threshold``: :func:`_write_records`); atomically. Returns the
    number of documents."""
    if Path(output).suffix == ".npz":
        scores = [s for _, s in batches]
        empty = sp.csr_matrix((0, len(model.labels)), dtype=np.float32)
        stacked = sp.vstack(scores, format="csr") if scores else empty
        with atomic_file(output) as tmp, open(tmp, "wb") as fh:
            sp.save_npz(fh, stacked, compressed=False)
        return stacked.shape[0]
    if str(output) == "-":
        try:
            n = _write_records(sys.stdout.buffer, model, batches, threshold)
            sys.stdout.buffer.flush()
        except BrokenPipeError:  # e.g. `| head`: say so once, not again at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise XmcError(
                "stdout: its reader stopped before every prediction was written\n"
                "  fix: read the whole output, or write it to a file"
            ) from None
        return n
    with atomic_file(output) as tmp, open(tmp, "wb") as fh:
        return _write_records(fh, model, batches, threshold)
