"""How the top-level flow runs end: a Completed state whose message says what happened, and tags
on the flow run (``promoted``, ``kept-champion``, ``not-promoted``, ``not-registered``,
``nothing-to-do``, ``quarantined``) to filter runs by in the Prefect UI.

The state's data stays what the flow returns (the outputs dict), so callers get it unchanged;
it is stored under ``work_dir`` (:func:`completed`), where Prefect can read it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.runtime import flow_run as current_flow_run
from prefect.states import Completed, State

from tasks.cache_records import stored_flow_result
from tasks.landing import intake_folders
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.evaluation.outcome import (
    NOTHING_TO_DO,
    QUARANTINED,
    joined,
    nothing_to_do,
    quarantine_note,
    train_message,
    train_tags,
)
from xmc_core.evaluation.report import read_json
from xmc_core.families.common import METRICS_FILE

QUARANTINE_STATE = "CompletedWithQuarantine"
"""Name of the (Completed) final state of a retrain run that refused at least one drop."""


def training_outcome(cfg: XmcConfig, outputs: dict[str, str]) -> tuple[str, list[str]]:
    """(state message, flow run tags) of a training run from the train pipeline's outputs."""
    metrics = read_json(Path(outputs["evaluation"]) / METRICS_FILE)
    return train_message(metrics, cfg.registry.metric, outputs), train_tags(outputs)


def retrain_outcome(cfg: XmcConfig, result: dict[str, Any]) -> tuple[str, list[str]]:
    """(state message, flow run tags) of a retrain run (``intake``, ``trained``, ``outputs``)."""
    intake = result["intake"]
    if result.get("trained"):
        message, tags = training_outcome(cfg, result["outputs"])
    else:
        corpus = intake.get("corpus")
        fingerprint = None if corpus is None else Corpus(corpus).fingerprint
        landing = intake_folders(cfg, str(Path(cfg.work_dir).resolve())).landing
        message, tags = nothing_to_do(fingerprint, str(landing)), [NOTHING_TO_DO]
    note = quarantine_note(intake)
    return joined([message, note]), [*tags, QUARANTINED] if note else tags


def train_state(cfg: XmcConfig, outputs: dict[str, str], tag: bool = True) -> State:
    """The Completed final state of a training run, holding ``outputs``; with ``tag``, the
    current flow run gets the outcome's tags."""
    message, tags = training_outcome(cfg, outputs)
    if tag:
        add_flow_run_tags(tags)
    return completed(cfg, outputs, message)


def retrain_state(cfg: XmcConfig, result: dict[str, Any]) -> State:
    """The final state of a retrain run, holding ``result``: ``CompletedWithQuarantine`` when
    the intake refused a drop, else ``Completed``; the current flow run gets the outcome's
    tags."""
    message, tags = retrain_outcome(cfg, result)
    add_flow_run_tags(tags)
    name = QUARANTINE_STATE if QUARANTINED in tags else "Completed"
    return completed(cfg, result, message, name)


def completed(
    cfg: XmcConfig, value: Any, message: str | None = None, name: str = "Completed"
) -> State:
    """A top-level flow run's Completed final state holding ``value``, stored under
    ``cfg.work_dir`` (:func:`tasks.cache_records.stored_flow_result`): when the API answers
    the state change with its own copy of the state (e.g. after its SQLite was busy), the
    state the caller gets names that file and ``state.result()`` reads it back, verified."""
    record = stored_flow_result(cfg.work_dir, value)
    return Completed(name=name, message=message, data=record)


def add_flow_run_tags(tags: Iterable[str]) -> list[str]:
    """Add ``tags`` to the current flow run's (none outside a flow run) -> its tags now."""
    flow_run_id = current_flow_run.get_id()
    new = list(tags)
    if flow_run_id is None or not new:
        return new
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(str(flow_run_id)))
        merged = list(dict.fromkeys([*run.tags, *new]))
        client.update_flow_run(run.id, tags=merged)
    return merged
