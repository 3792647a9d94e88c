"""Tasks of the retrain flow around the landing folder (``xmc_core.intake.drops``).

Neither is cached: the landing folder is the input and it changes between runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from xmc_core.config import XmcConfig
from xmc_core.corpus.schema import Policies
from xmc_core.evaluation.run_report import intake_section
from xmc_core.intake import drops as intake
from xmc_core.storage.work_dir import WorkDir

INTAKE_KEY = "xmc-intake-report"
"""Key of the Prefect markdown artifact each intake publishes (drops ingested and refused)."""


def corpus_store(work_dir: str | Path) -> Path:
    """The retrain flow's corpus store: ``<work_dir>/corpora``."""
    return WorkDir.of(work_dir).corpora


def intake_folders(cfg: XmcConfig, work_dir: str) -> intake.IntakeFolders:
    """The configured folders, defaulting to ``<work_dir>/{landing,quarantine,landing-archive}``."""
    work, r = WorkDir.of(work_dir), cfg.retrain
    return intake.IntakeFolders(
        landing=Path(r.landing_dir or work.landing).resolve(),
        quarantine=Path(r.quarantine_dir or work.quarantine).resolve(),
        archive=Path(r.archive_dir or work.landing_archive).resolve(),
        store=work.corpora,
    )


@task(name="take-in-drops", task_run_name="take-in-drops")
def take_in_drops(cfg: XmcConfig, work_dir: str) -> dict[str, Any]:
    """Validate and ingest the landing folder's drops into the training corpus (see
    :func:`xmc_core.intake.drops.take_in`); bad drops go to quarantine with their reason.

    Publishes the Prefect markdown artifact ``xmc-intake-report`` (drops ingested, and each
    refused one with its reason) on every run, trained or not."""
    log = get_run_logger()
    folders = intake_folders(cfg, work_dir)
    log.info("taking in drops from %s (mode %s)", folders.landing, cfg.retrain.mode)
    policies = Policies(on_empty=cfg.retrain.on_empty, on_unlabeled=cfg.retrain.on_unlabeled)
    base = None if cfg.data.dataset is None else Path(cfg.data.dataset).resolve()
    # each quarantined or stuck drop is logged by take_in itself (xmc_core reaches the run log)
    result = intake.take_in(folders, cfg.retrain.mode, policies, cfg.data.rows_per_group, base)
    record = result.to_dict()
    create_markdown_artifact(
        f"# xmc intake\n\n{intake_section(record)}\n", key=INTAKE_KEY, description="xmc intake"
    )
    return record


@task(name="mark-trained", task_run_name="mark-trained")
def mark_trained(corpus: str, outputs: dict[str, str], work_dir: str) -> str:
    """Record that ``corpus`` is trained (the next run skips it unless a drop arrives)."""
    details = {k: outputs[k] for k in ("model", "mlflow_run", "model_version") if outputs.get(k)}
    return str(intake.mark_trained(corpus_store(work_dir), Path(corpus), details))
