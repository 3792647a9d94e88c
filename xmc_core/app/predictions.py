"""Predictions as data: ranked label lists per document, as Python lists or an Arrow table.

The table written by batch prediction (``flows/predict.py``) has :data:`PREDICTIONS_SCHEMA`::

    doc_id: string, labels: list<string> (best first), scores: list<float32>

Within a document, labels are ordered by score (highest first), ties by label column, by
:func:`xmc_core.evaluation.ranking.top_k` (as :meth:`xmc_core.model.xmc_model.XmcModel.top_labels`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.corpus.importers.textio import decode_line, strip_newline
from xmc_core.errors import InputError
from xmc_core.evaluation.ranking import top_k
from xmc_core.features import stages
from xmc_core.features.labels import LabelIndex
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage.atomic import atomic_file

PREDICTIONS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("scores", pa.list_(pa.float32())),
    ]
)


def ranked_arrays(labels: LabelIndex, scores: sp.csr_matrix) -> tuple[pa.ListArray, pa.ListArray]:
    """``labels`` list<string> and ``scores`` list<float32> arrays (n_docs,), best first (see
    :func:`xmc_core.evaluation.ranking.top_k`)."""
    ranked = top_k(scores)
    names = labels.names.take(pa.array(ranked.cols)).cast(pa.string())
    off = pa.array(ranked.offsets.astype(np.int32))
    vals = pa.array(ranked.vals.astype(np.float32))
    return pa.ListArray.from_arrays(off, names), pa.ListArray.from_arrays(off, vals)


def ranked_lists(
    labels: LabelIndex, scores: sp.csr_matrix
) -> tuple[list[list[str]], list[list[float]]]:
    """Label names and scores of every document, best first, as Python lists."""
    names, vals = ranked_arrays(labels, scores)
    return names.to_pylist(), vals.to_pylist()


def predictions_table(
    doc_ids: pa.Array | Sequence[str], labels: LabelIndex, scores: sp.csr_matrix
) -> pa.Table:
    """A :data:`PREDICTIONS_SCHEMA` table: one row per document of ``scores`` csr (n_docs,
    n_labels)."""
    names, vals = ranked_arrays(labels, scores)
    ids = doc_ids if isinstance(doc_ids, pa.Array) else pa.array(list(doc_ids), pa.string())
    return pa.Table.from_arrays([ids.cast(pa.string()), names, vals], schema=PREDICTIONS_SCHEMA)


def predict_partition(
    model: XmcModel, corpus: Corpus, ref: PartitionRef, topk: int | None, beam: int | None
) -> pa.Table:
    """Predictions of one partition of a dataset folder (featurized with the model's own
    vectorizer; with the embeddings of the texts for an XR-Transformer model)."""
    counts = stages.count_partition(corpus, ref, model.vectorizer.tokenizer)
    feats = stages.featurize_partition(corpus, ref, counts, model.vectorizer, model.labels)
    X = feats.X
    if model.encoder.uses_text:
        X = model.features(X, corpus.read_partition(ref, ["text"]).column("text"))
    return predictions_table(feats.doc_ids, model.labels, model.predict_features(X, topk, beam))


def predict_lines(
    model: XmcModel, lines: list[tuple[int, str]], topk: int | None, beam: int | None
) -> pa.Table:
    """Predictions of ``(line number, text)`` pairs; document ids are ``line-N``."""
    ids = [f"line-{lineno}" for lineno, _ in lines]
    return predictions_table(ids, model.labels, model.predict([t for _, t in lines], topk, beam))


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
