"""Batch prediction tasks around the prediction stages (``xmc_core.lifecycle.predict``, run as
cached stage tasks): resolve the model, cut a text file into chunks, write the output file."""

from __future__ import annotations

import shutil
from pathlib import Path

from prefect import Task, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from xmc_core.app.predictions import LineChunk, line_chunks
from xmc_core.config import XmcConfig
from xmc_core.errors import XmcError
from xmc_core.lifecycle.artifacts import PREDICTIONS_FILE
from xmc_core.storage.atomic import atomic_file
from xmc_core.wording import counted


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


@task(name="write-output", task_run_name="write-output", cache_policy=NO_CACHE)
def write_output(predictions_dir: str, output: str) -> str:
    """Copy the assembled predictions to ``output`` atomically (always: the file may be gone)."""
    with atomic_file(output) as tmp:
        shutil.copyfile(Path(predictions_dir) / PREDICTIONS_FILE, tmp)
    get_run_logger().info("wrote %s", output)
    return output
