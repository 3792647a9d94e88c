"""Predictions as data: ranked label lists per document, as Python lists or an Arrow table.

The table written by batch prediction (``flows/predict.py``) has :data:`PREDICTIONS_SCHEMA`::

    doc_id: string, labels: list<string> (best first), scores: list<float32>,
    probabilities: list<float32> (null: an uncalibrated model)

Within a document, labels are ordered by score (highest first), ties by label column, by
:func:`xmc_core.evaluation.ranking.top_k` (as :meth:`xmc_core.model.xmc_model.XmcModel.top_labels`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.corpus.importers.textio import decode_line, strip_newline
from xmc_core.errors import InputError
from xmc_core.evaluation.ranking import RankedRows, top_k
from xmc_core.features import stages
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage.atomic import atomic_file

PREDICTIONS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("scores", pa.list_(pa.float32())),
        pa.field("probabilities", pa.list_(pa.float32())),
    ]
)


def ranked_arrays(
    model: XmcModel, scores: sp.csr_matrix, threshold: float | np.ndarray | None = None,
    at_least_one: bool = False,
) -> dict[str, pa.ListArray]:  # fmt: skip
    """``labels`` list<string>, ``scores`` list<float32> and ``probabilities`` list<float32>
    arrays (n_docs,), best first (see :func:`xmc_core.evaluation.ranking.top_k`); the
    probabilities are null for an uncalibrated model. ``threshold``: only the labels of at least
    that probability are kept (``at_least_one``: and each document's best, when it has any)."""
    ranked = top_k(scores)
    probs = None
    if model.calibrator is not None or threshold is not None:
        probs = model.ranked_probabilities(ranked)  # an uncalibrated model: the error says so
    if threshold is not None and probs is not None:
        ranked, probs = _cut(ranked, probs, threshold, at_least_one)
    off = pa.array(ranked.offsets.astype(np.int32))
    names = model.labels.names.take(pa.array(ranked.cols)).cast(pa.string())
    vals = pa.array(ranked.vals.astype(np.float32))
    out = {
        "labels": pa.ListArray.from_arrays(off, names),
        "scores": pa.ListArray.from_arrays(off, vals),
    }
    if probs is None:
        out["probabilities"] = pa.nulls(scores.shape[0], pa.list_(pa.float32()))
    else:
        out["probabilities"] = pa.ListArray.from_arrays(off, pa.array(probs.astype(np.float32)))
    return out


def _cut(
    ranked: RankedRows, probs: np.ndarray, threshold: float | np.ndarray, at_least_one: bool
) -> tuple[RankedRows, np.ndarray]:
    """The entries of ``ranked`` (and their ``probs``) whose probability reaches
    ``threshold`` (one, or float (n_labels,) per label; ``at_least_one``: and each row's
    first); compared as written, float32."""
    limit = np.asarray(threshold, dtype=np.float32)
    keep = probs.astype(np.float32) >= (limit if limit.ndim == 0 else limit[ranked.cols])
    lengths = np.diff(ranked.offsets)
    if at_least_one:
        keep[ranked.offsets[:-1][lengths > 0]] = True
    rows = np.repeat(np.arange(len(lengths)), lengths)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=len(lengths)), out=offsets[1:])
    cut = RankedRows(offsets, ranked.cols[keep], ranked.vals[keep], ranked.shape)
    return cut, probs[keep]


def ranked_lists(
    model: XmcModel, scores: sp.csr_matrix, threshold: float | np.ndarray | None = None,
    at_least_one: bool = False,
) -> dict[str, list[list[Any]] | list[None]]:  # fmt: skip
    """:func:`ranked_arrays` as Python lists: each document's labels, scores and probabilities
    (None for an uncalibrated model), best first."""
    arrays = ranked_arrays(model, scores, threshold, at_least_one)
    return {name: values.to_pylist() for name, values in arrays.items()}


def predictions_table(
    doc_ids: pa.Array | Sequence[str], model: XmcModel, scores: sp.csr_matrix,
    threshold: float | np.ndarray | None = None, at_least_one: bool = False,
) -> pa.Table:  # fmt: skip
    """A :data:`PREDICTIONS_SCHEMA` table: one row per document of ``scores`` csr (n_docs,
    n_labels) (``threshold``, ``at_least_one``: as :func:`ranked_arrays`)."""
    cols = ranked_arrays(model, scores, threshold, at_least_one)
    ids = doc_ids if isinstance(doc_ids, pa.Array) else pa.array(list(doc_ids), pa.string())
    return pa.Table.from_arrays([ids.cast(pa.string()), *cols.values()], schema=PREDICTIONS_SCHEMA)


def predict_partition(
    model: XmcModel, corpus: Corpus, ref: PartitionRef, topk: int | None, beam: int | None,
    threshold: float | None = None,
) -> pa.Table:  # fmt: skip
    """Predictions of one partition of a dataset folder (featurized with the model's own
    vectorizer; with the embeddings of the texts for an XR-Transformer model); ``threshold``
    None: the model's own (:meth:`~xmc_core.model.xmc_model.XmcModel.cut`)."""
    counts = stages.count_partition(corpus, ref, model.vectorizer.tokenizer)
    feats = stages.featurize_partition(corpus, ref, counts, model.vectorizer, model.labels)
    X = feats.X
    if model.encoder.uses_text:
        X = model.features(X, corpus.read_partition(ref, ["text"]).column("text"))
    scores = model.predict_features(X, topk, beam)
    return predictions_table(feats.doc_ids, model, scores, *model.cut(threshold))


def predict_lines(
    model: XmcModel, lines: list[tuple[int, str]], topk: int | None, beam: int | None,
    threshold: float | None = None,
) -> pa.Table:  # fmt: skip
    """Predictions of ``(line number, text)`` pairs; document ids are ``line-N``."""
    ids = [f"line-{lineno}" for lineno, _ in lines]
    scores = model.predict([t for _, t in lines], topk, beam)
    return predictions_table(ids, model, scores, *model.cut(threshold))


@dataclass(frozen=True)
class LineChunk:
    """``n_lines`` lines of a text file from byte ``offset`` (line ``first_line``, from 1);
    ``sha256`` of their bytes identifies the chunk's content (its cache key)."""

    offset: int
    first_line: int
    n_lines: int
    sha256: str


def line_chunks(path: str | Path, lines_per_chunk: int) -> list[LineChunk]:
    """Cut a text file (one document a line) into chunks of ``lines_per_chunk`` lines."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file or dataset folder", "check the path")
    chunks: list[LineChunk] = []
    offset, start, n, digest = 0, 0, 0, hashlib.sha256()

    def close() -> None:
        chunks.append(LineChunk(start, len(chunks) * lines_per_chunk + 1, n, digest.hexdigest()))

    with open(path, "rb") as fh:
        for raw in fh:
            if n == lines_per_chunk:
                close()
                start, n, digest = offset, 0, hashlib.sha256()
            offset += len(raw)
            n += 1
            digest.update(raw)
    if n:
        close()
    return chunks


def read_chunk(path: str | Path, chunk: LineChunk) -> list[tuple[int, str]]:
    """The ``(line number, text)`` pairs of one chunk (UTF-8 checked, line ends dropped)."""
    with open(path, "rb") as fh:
        fh.seek(chunk.offset)
        raws = [fh.readline() for _ in range(chunk.n_lines)]
    if hashlib.sha256(b"".join(raws)).hexdigest() != chunk.sha256:
        raise InputError(
            path, f"lines {chunk.first_line}.. changed while predicting", "predict again"
        )
    return [
        (chunk.first_line + i, decode_line(path, chunk.first_line + i, strip_newline(raw)))
        for i, raw in enumerate(raws)
    ]


def write_predictions(table: pa.Table, path: str | Path) -> Path:
    """Write a predictions table as one Parquet file, atomically."""
    with atomic_file(path) as tmp:
        pq.write_table(table.cast(PREDICTIONS_SCHEMA), tmp, compression="zstd")
    return Path(path)


def read_predictions(paths: Sequence[str | Path]) -> pa.Table:
    """Predictions Parquet files concatenated in order."""
    tables = [pq.read_table(p, schema=PREDICTIONS_SCHEMA) for p in paths]
    return pa.concat_tables(tables) if tables else PREDICTIONS_SCHEMA.empty_table()
