"""Put the registry back in a consistent state after a run was killed half-way.

A SIGKILL can stop a training run inside its MLflow run (the run left RUNNING for ever), between
the registration of a version and its promotion (a version with no decision), or a promotion
right after the alias moved (the new holder still tagged with an older decision such as
``rejected``).
:func:`reconcile` runs at the start of every registering run, of ``xmc promote`` and of
``xmc rollback``; under the registry lock it

- closes the runs stuck RUNNING whose process is gone (run tag ``xmc.process``, see
  ``locking.process_identity``): status KILLED and a tag ``xmc.reconciled`` saying why;
- tags every version that has no decision and whose registering process is gone
  ``xmc.promotion.decision = abandoned``, with the reason (a version registered without
  ``xmc.process``, by hand or by an older xmc, counts as gone once its run has ended);
- makes the alias holder's decision ``promoted`` when it says anything else (``abandoned``,
  ``rejected``, none: a kill right after the alias moved), and appends the holder to the alias
  history when it is not its last entry (a kill between the alias move and the history write).

A process of another host cannot be checked: its runs and versions are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from xmc_core.config import XmcConfig
from xmc_core.serving.registry.locking import PROCESS_TAG, process_gone, registry_lock
from xmc_core.serving.registry.store import PROMOTION_TAG, RegistryStore

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run
    from mlflow.entities.model_registry import ModelVersion

RECONCILED_TAG = "xmc.reconciled"
"""Run tag written when a stuck run is closed: why, and when."""
DECISION_TAG = PROMOTION_TAG + "decision"
log = logging.getLogger(__name__)


def reconcile(cfg: XmcConfig, experiment_ids: Iterable[str] = ()) -> list[str]:
    """Reconcile ``registry.model_name`` (and the stuck runs of ``experiment_ids``) under the
    registry lock -> one line per repair made."""
    store = RegistryStore(cfg)
    with registry_lock(cfg):
        return reconcile_locked(store, experiment_ids)


def reconcile_locked(store: RegistryStore, experiment_ids: Iterable[str] = ()) -> list[str]:
    """:func:`reconcile` for a caller that holds the registry lock already."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    versions = store.model_versions()
    run_ids = sorted({str(v.run_id) for v in versions if v.run_id})
    notes = close_stuck_runs(store.client, run_ids, list(experiment_ids), now)
    n_runs = len(notes)  # logged by close_stuck_runs
    holder = store.holder()
    alias = f"{store.name}@{store.alias}"
    for version in versions:
        number, decision = str(version.version), version.tags.get(DECISION_TAG)
        if number == holder and decision != "promoted":
            reason = (
                f"holds {alias} but was tagged {decision or 'no decision'}: the run that moved "
                f"the alias stopped before recording it (reconciled {now})"
            )
            notes.append(_decide(store, number, "promoted", reason, now))
        elif number != holder and decision is None and _registrar_gone(store.client, version):
            reason = (
                "registered by a run that stopped before its promotion (its process is gone); "
                f"not evaluated (reconciled {now})"
            )
            notes.append(_decide(store, number, "abandoned", reason, now))
    if holder is not None:
        notes += _complete_history(store, holder)
    for note in notes[n_runs:]:
        log.warning("registry reconciled: %s", note)
    return notes


def _complete_history(store: RegistryStore, holder: str) -> list[str]:
    """Append the alias ``holder`` to the alias history when it is not its last entry (a kill
    between the alias move and the history write) -> the note of the repair, if any."""
    history = store.history()
    if history and history[-1] == holder:
        return []
    store.write_history([*history, holder])
    return [
        f"{store.name}@{store.alias} history: version {holder} appended (it holds the alias; "
        "the run that moved it stopped before recording it)"
    ]


def close_stuck_runs(
    client: MlflowClient, run_ids: Iterable[str], experiment_ids: list[str], now: str
) -> list[str]:
    """Mark KILLED the runs among ``run_ids`` and the RUNNING runs of ``experiment_ids`` whose
    process (tag ``xmc.process``) is gone; runs without that tag are left alone."""
    from mlflow.exceptions import MlflowException

    runs: dict[str, Run] = {}
    if experiment_ids:
        for run in client.search_runs(experiment_ids, "attributes.status = 'RUNNING'"):
            runs[run.info.run_id] = run
    for run_id in run_ids:
        if run_id not in runs:
            try:
                runs[run_id] = client.get_run(run_id)
            except MlflowException:
                continue  # the run was deleted: nothing to close
    notes = []
    for run_id, run in sorted(runs.items()):
        identity = run.data.tags.get(PROCESS_TAG)
        if run.info.status != "RUNNING" or not identity or not process_gone(identity):
            continue
        why = f"closed as KILLED {now}: its process {identity} ended without closing it"
        client.set_tag(run_id, RECONCILED_TAG, why)
        client.set_terminated(run_id, "KILLED")
        notes.append(f"run {run_id} {why}")
        log.warning("registry reconciled: %s", notes[-1])
    return notes


def _registrar_gone(client: MlflowClient, version: ModelVersion) -> bool:
    """Whether the process that registered ``version`` has ended (see the module doc)."""
    from mlflow.exceptions import MlflowException

    identity = version.tags.get(PROCESS_TAG)
    if identity:
        return process_gone(identity)
    if not version.run_id:
        return True
    try:
        run = client.get_run(version.run_id)
    except MlflowException:
        return True
    if run.info.status != "RUNNING":
        return True
    run_identity = run.data.tags.get(PROCESS_TAG)
    return bool(run_identity) and process_gone(run_identity)


def _decide(store: RegistryStore, version: str, decision: str, reason: str, now: str) -> str:
    tags = {"decision": decision, "kind": "reconciled", "reason": reason, "at": now}
    for key, value in tags.items():
        store.client.set_model_version_tag(store.name, version, PROMOTION_TAG + key, value)
    return f"version {version} of {store.name}: {decision} ({reason})"
