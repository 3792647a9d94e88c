"""Batch prediction tasks: resolve the model, predict one partition (or one chunk of a text
file) into a Parquet part, assemble the parts, write the output file."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from prefect import Task, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from tasks.caching import TASK_OPTIONS, artifact_dir, cache_key, fp, produce, stage_key
from xmc_core.app.predictions import (
    LineChunk,
    line_chunks,
    predict_lines,
    read_chunk,
    read_predictions,
    write_predictions,
)
from xmc_core.app.predictions import predict_partition as predict_partition_table
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.errors import XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.keys import key_part
from xmc_core.storage.artifacts import write_meta
from xmc_core.storage.atomic import atomic_file
from xmc_core.storage.fingerprint import closure_fingerprint
from xmc_core.wording import counted

PREDICTIONS_FILE = "predictions.parquet"


def _transient(_task: Task, _run: TaskRun, state: State) -> bool:
    """Retry on I/O trouble (a download), never on an error the user must fix."""
    try:
        state.result()
    except XmcError:
        return False
    except Exception:
        return True
    return False


@task(
    name="resolve-model",
    task_run_name="resolve-model",
    retries=2,
    retry_delay_seconds=5,
    retry_condition_fn=_transient,
    cache_policy=NO_CACHE,
)
def resolve_model(model: str, cfg: XmcConfig) -> str:
    """A model folder or MLflow URI -> the local ``XmcModel`` folder (downloads are cached)."""
    from xmc_core.serving.resolve import local_model_dir

    folder = local_model_dir(model, cfg).resolve()
    get_run_logger().info("model %s -> %s", model, folder)
    return str(folder)


@functools.lru_cache(maxsize=2)
def _load(model_dir: str, fingerprint: str) -> XmcModel:
    """One loaded model per process and content (partition tasks share it)."""
    return XmcModel.load(model_dir)


def _save_part(tmp: Path, table_rows: int) -> None:
    write_meta(tmp, "Predictions", {"n_docs": table_rows})


def _partition_key(
    model_dir: str, corpus_dir: str, ref: PartitionRef, topk: int | None,
    beam_size: int | None, work_dir: str,
) -> str:  # fmt: skip
    return stage_key(
        "prediction-part", fp(model_dir), key_part(ref), topk, beam_size,
        code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="predict-partition",
    task_run_name="predict-{ref.split}-{ref.row_group}",
    cache_key_fn=cache_key("prediction-part", _partition_key),
    **TASK_OPTIONS,
)
def predict_partition(
    model_dir: str, corpus_dir: str, ref: PartitionRef, topk: int | None,
    beam_size: int | None, work_dir: str,
) -> str:  # fmt: skip
    """Predictions of one partition of a dataset folder -> folder with ``predictions.parquet``."""
    log = get_run_logger()
    key = _partition_key(model_dir, corpus_dir, ref, topk, beam_size, work_dir)
    with produce(work_dir, "prediction-part", key, log) as tmp:
        if tmp is not None:
            model = _load(model_dir, fp(model_dir))
            table = predict_partition_table(model, Corpus(corpus_dir), ref, topk, beam_size)
            write_predictions(table, tmp / PREDICTIONS_FILE)
            _save_part(tmp, table.num_rows)
            log.info(
                "predicted %s partition %d: %s", ref.split, ref.row_group, counted(ref.rows, "doc")
            )
    return str(artifact_dir(work_dir, "prediction-part", key))


@task(name="plan-chunks", task_run_name="plan-chunks", cache_policy=NO_CACHE)
def plan_chunks(source: str, lines_per_chunk: int) -> list[LineChunk]:
    """Cut a text file into chunks of ``lines_per_chunk`` lines (with their checksums)."""
    chunks = line_chunks(source, lines_per_chunk)
    get_run_logger().info(
        "%s: %s of up to %s",
        source,
        counted(len(chunks), "chunk"),
        counted(lines_per_chunk, "line"),
    )
    return chunks


def _chunk_key(
    model_dir: str, source: str, chunk: LineChunk, topk: int | None, beam_size: int | None,
    work_dir: str,
) -> str:  # fmt: skip
    where = [chunk.first_line, chunk.n_lines, chunk.sha256]
    return stage_key(
        "prediction-part", fp(model_dir), where, topk, beam_size, code=closure_fingerprint(__name__)
    )


@task(
    name="predict-lines",
    task_run_name="predict-lines-{chunk.first_line}",
    cache_key_fn=cache_key("prediction-part", _chunk_key),
    **TASK_OPTIONS,
)
def predict_chunk(
    model_dir: str, source: str, chunk: LineChunk, topk: int | None, beam_size: int | None,
    work_dir: str,
) -> str:  # fmt: skip
    """Predictions of one chunk of a text file (ids ``line-N``) -> folder with
    ``predictions.parquet``."""
    log = get_run_logger()
    key = _chunk_key(model_dir, source, chunk, topk, beam_size, work_dir)
    with produce(work_dir, "prediction-part", key, log) as tmp:
        if tmp is not None:
            model = _load(model_dir, fp(model_dir))
            table = predict_lines(model, read_chunk(source, chunk), topk, beam_size)
            write_predictions(table, tmp / PREDICTIONS_FILE)
            _save_part(tmp, table.num_rows)
            log.info("predicted lines %d..: %s", chunk.first_line, counted(chunk.n_lines, "doc"))
    return str(artifact_dir(work_dir, "prediction-part", key))


def _assemble_key(part_dirs: list[str], work_dir: str) -> str:
    return stage_key("predictions", [fp(d) for d in part_dirs], code=closure_fingerprint(__name__))


@task(
    name="assemble-predictions",
    task_run_name="assemble-predictions",
    cache_key_fn=cache_key("predictions", _assemble_key),
    **TASK_OPTIONS,
)
def assemble_predictions(part_dirs: list[str], work_dir: str) -> str:
    """Concatenate the parts in order -> folder with one ``predictions.parquet``."""
    log = get_run_logger()
    key = _assemble_key(part_dirs, work_dir)
    with produce(work_dir, "predictions", key, log) as tmp:
        if tmp is not None:
            table = read_predictions([Path(d) / PREDICTIONS_FILE for d in part_dirs])
            write_predictions(table, tmp / PREDICTIONS_FILE)
            _save_part(tmp, table.num_rows)
            log.info(
                "predictions of %s from %s",
                counted(table.num_rows, "document"), counted(len(part_dirs), "part"),
            )  # fmt: skip
    return str(artifact_dir(work_dir, "predictions", key))


@task(name="write-output", task_run_name="write-output", cache_policy=NO_CACHE)
def write_output(predictions_dir: str, output: str) -> str:
    """Copy the assembled predictions to ``output`` atomically (always: the file may be gone)."""
    with atomic_file(output) as tmp:
        shutil.copyfile(Path(predictions_dir) / PREDICTIONS_FILE, tmp)
    get_run_logger().info("wrote %s", output)
    return output
