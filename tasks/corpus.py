"""Corpus tasks: generate the embedded synthetic corpus, ingest a corpus from files."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.stages.graph import Stage
from xmc_core.storage.work_dir import WorkDir

SYNTHETIC = Stage("synthetic", write_synthetic_dataset, Corpus)
"""The embedded synthetic corpus: its folder is named by this stage's key (the generator's code
and the settings), under ``<work_dir>/datasets/`` where a dataset folder belongs."""


def _synthetic_dir(scale: float, seed: int, rows_per_group: int, work_dir: str) -> Path:
    settings = {"scale": scale, "seed": seed, "rows_per_group": rows_per_group}
    key = SYNTHETIC.key(settings, lambda _name, handle: handle)
    return WorkDir.of(work_dir).datasets / f"synthetic-x{scale:g}-seed{seed}-{key[:12]}"


# Neither task is cached by Prefect: each checks or writes its own folder, and a cache record
# outside <stage>/<key>/ would only be rejected by tasks.cache_records on the next run.
@task(name="synthesize-corpus", retries=0, cache_policy=NO_CACHE, persist_result=False)
def synthesize_corpus(scale: float, seed: int, rows_per_group: int, work_dir: str) -> str:
    """The embedded synthetic corpus as a dataset folder (generated once, then reused)."""
    log = get_run_logger()
    dest = _synthetic_dir(scale, seed, rows_per_group, work_dir)
    if dest.is_dir():
        log.info("synthetic corpus: reusing %s", dest)
        return str(dest)
    spec = SyntheticSpec(seed=seed).scaled(scale)
    manifest = write_synthetic_dataset(dest, spec, rows_per_group=rows_per_group)
    log.info(
        "synthetic corpus: %d train / %d test docs, %d labels -> %s",
        manifest.splits["train"].rows,
        manifest.splits["test"].rows,
        manifest.n_labels,
        dest,
    )
    return str(dest)


# validation errors are deterministic: never retry
@task(name="ingest-corpus", retries=0, cache_policy=NO_CACHE, persist_result=False)
def ingest_corpus(fmt: str, src: str, dest: str, options: IngestOptions) -> str:
    """Validate and import ``src`` (format ``fmt``) into the dataset folder ``dest``."""
    manifest = ingest(fmt, src, dest, options)
    get_run_logger().info(
        "ingested %s: %d train / %d test docs, %d labels, %d test labels unseen in train",
        src,
        manifest.splits["train"].rows,
        manifest.splits["test"].rows,
        manifest.n_labels,
        manifest.unseen_test_labels,
    )
    return dest
