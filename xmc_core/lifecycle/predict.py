"""Batch prediction as stages: one per partition of a dataset split (or chunk of a text file),
then the parts assembled in order. Each part is keyed on the model's content and its input's
content (a partition's rows, a chunk's bytes), so a rerun, or a run after more lines were
appended, recomputes only what changed. The ``predict`` flow runs them as cached tasks."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from xmc_core.app.predictions import (
    PREDICTIONS_SCHEMA,
    LineChunk,
    predict_lines,
    predict_partition,
    read_chunk,
)
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.lifecycle.artifacts import Predictions, TextFile
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import Runner, Stage
from xmc_core.stages.keys import key_part
from xmc_core.wording import counted

log = logging.getLogger(__name__)


@key_part.register(LineChunk)
def _chunk(value: LineChunk) -> list[Any]:
    """A chunk of a text file by its content (where it starts, how many lines, their sha256),
    not by the file it sits in."""
    return [value.first_line, value.n_lines, value.sha256]


def partition_predictions(
    model: XmcModel, corpus: Corpus, ref: PartitionRef, topk: int | None, beam_size: int | None,
    threshold: float | None = None,
) -> Predictions:  # fmt: skip
    """Predictions of one partition of a dataset folder (``ref`` keys its rows; ``topk`` /
    ``beam_size`` / ``threshold`` None: the model's own)."""
    return Predictions(predict_partition(model, corpus, ref, topk, beam_size, threshold))


def chunk_predictions(
    model: XmcModel, source: TextFile, chunk: LineChunk, topk: int | None, beam_size: int | None,
    threshold: float | None = None,
) -> Predictions:  # fmt: skip
    """Predictions of one chunk of a text file (document ids ``line-N``)."""
    lines = read_chunk(source.path, chunk)
    return Predictions(predict_lines(model, lines, topk, beam_size, threshold))


def assemble_predictions(parts: list[Predictions]) -> Predictions:
    """The parts' predictions concatenated in order."""
    tables = [p.table for p in parts]
    return Predictions(pa.concat_tables(tables) if tables else PREDICTIONS_SCHEMA.empty_table())


PREDICT_PARTITION = Stage(
    "prediction-part", partition_predictions, Predictions,
    {"model": XmcModel, "corpus": Corpus}, unkeyed=frozenset({"corpus"}), on_dask=True,
    describe=lambda p: f"predicted {counted(p.table.num_rows, 'doc')}",
)  # fmt: skip
PREDICT_CHUNK = Stage(
    "prediction-lines", chunk_predictions, Predictions,
    {"model": XmcModel, "source": TextFile}, unkeyed=frozenset({"source"}), on_dask=True,
    describe=lambda p: f"predicted {counted(p.table.num_rows, 'doc')}",
)  # fmt: skip
ASSEMBLE = Stage(
    "predictions", assemble_predictions, Predictions, {"parts": Predictions},
    describe=lambda p: f"predictions of {counted(p.table.num_rows, 'document')}",
)  # fmt: skip


def predict_graph(
    run: Runner, model: Any, source: Any, over: list[PartitionRef] | list[LineChunk],
    topk: int | None = None, beam_size: int | None = None, threshold: float | None = None,
) -> Any:  # fmt: skip
    """Predictions of ``source`` (a dataset folder's handle with ``over`` its partitions, or a
    text file's with ``over`` its chunks) by ``model`` -> the assembled predictions' handle."""
    settings = {"model": model, "topk": topk, "beam_size": beam_size, "threshold": threshold}
    if over and isinstance(over[0], LineChunk):
        labels = [f"predict-lines-{c.first_line}" for c in over]  # type: ignore[union-attr]
        parts = run.map(PREDICT_CHUNK, {"chunk": over}, labels, source=source, **settings)
    else:
        labels = [f"predict-{r.split}-{r.row_group}" for r in over]  # type: ignore[union-attr]
        parts = run.map(PREDICT_PARTITION, {"ref": over}, labels, corpus=source, **settings)
    return run(ASSEMBLE, label="assemble-predictions", parts=parts)
