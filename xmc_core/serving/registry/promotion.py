"""Gated promotion, manual promotion and rollback of registered model versions (MLflow aliases).

The serving alias (``registry.alias``, e.g. ``champion``) names exactly one version of
``registry.model_name``. ``promote_gated`` refuses a new version of another lineage than the
holder's (``serving.registry.lineage``: trained on other labels; never evaluated nor compared);
else it evaluates the new version and the alias holder on the *same* held-out split of one
dataset, from raw text (``serving.evaluation``), and moves the alias only when the new version's
``registry.metric`` is at least the holder's plus ``registry.margin``. Every decision is
recorded as tags on the version it concerns (``xmc.promotion.*``), each version's figures are
cached as a JSON artifact of its run (named by the tag ``xmc.eval_file.<split>``, keyed by the
evaluated split's content, the evaluation settings and the ``xmc_core`` code; see ``store``) so
a champion is not re-evaluated when only the training split grew, and the registered model
keeps the alias's recent holders (``xmc.alias_history.<alias>``, JSON list, oldest first) for
``rollback``.

Concurrency: every read-compare-set of the alias runs under an exclusive ``fcntl.flock`` on
``<mlflow_dir>/locks/registry-<name>-<alias>.lock`` (threads and processes of one machine; a
registry shared by several machines needs that folder on a shared file system). Inside the
lock the holder is read again right before the alias is set (compare-and-set), and the alias is
always overwritten in one call, never deleted first: there is never zero or two champions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import XmcError
from xmc_core.evaluation.metrics import percent
from xmc_core.serving.registry.lineage import refusal
from xmc_core.serving.registry.locking import registry_lock
from xmc_core.serving.registry.reconcile import reconcile_locked
from xmc_core.serving.registry.store import HISTORY_TAG, PROMOTION_TAG, Decision, RegistryStore
from xmc_core.serving.resolve import local_model_dir
from xmc_core.storage.fingerprint import closure_fingerprint

if TYPE_CHECKING:
    from xmc_core.config import EvalConfig

_TOLERANCE = 1e-12  # float slack in "new >= champion + margin"
_CAS_ATTEMPTS = 3


def champion_version(cfg: XmcConfig) -> str | None:
    """The version holding ``registry.alias`` now, or None."""
    return RegistryStore(cfg).holder()


def version_metrics(
    cfg: XmcConfig, version: str, dataset: Path, store: RegistryStore | None = None
) -> dict[str, float]:
    """All metrics of ``version`` on ``registry.eval_split`` of ``dataset`` (raw text), from the
    version's cached figures when computed on the same data, settings and code; else evaluated
    now and cached."""
    store = store or RegistryStore(cfg)
    key = _eval_key(cfg, dataset)
    cached = store.cached_metrics(version, cfg.registry.eval_split, key)
    if cached is not None:
        return cached
    metrics = _evaluate(cfg, version, dataset)
    store.cache_metrics(version, cfg.registry.eval_split, key, metrics)
    return metrics


def promote_gated(cfg: XmcConfig, version: str, dataset: Path) -> Decision:
    """Give the alias to ``version`` if it beats the holder by ``registry.margin`` on the
    held-out split of ``dataset`` (the first version of a model: promoted, no champion); a
    version of another lineage than the holder's is refused, never evaluated nor compared
    (``serving.registry.lineage.refusal``)."""
    store = RegistryStore(cfg)
    version = store.require_version(version)
    dataset = Path(dataset)
    key = _eval_key(cfg, dataset)
    split = cfg.registry.eval_split
    new_metrics = store.cached_metrics(version, split, key)
    fresh = new_metrics is None
    if fresh and refusal(store, version, store.holder()) is None:
        new_metrics = _evaluate(cfg, version, dataset)  # outside the lock: the slow part
    with registry_lock(cfg):
        for _ in range(_CAS_ATTEMPTS):
            holder = store.holder()
            refused = refusal(store, version, holder)
            if refused is not None:
                decision = _refused(cfg, version, holder, *refused)
                store.record(decision)
                return decision
            if new_metrics is None:  # refused until the holder changed: evaluated now
                new_metrics = _evaluate(cfg, version, dataset)
            if fresh:
                store.cache_metrics(version, split, key, new_metrics)
                fresh = False
            if holder == version:
                return _unchanged(cfg, version, "gated", new_metrics)
            champion = None if holder is None else version_metrics(cfg, holder, dataset, store)
            decision = _gate(cfg, version, holder, new_metrics, champion)
            if not decision.promoted or store.move_alias(version, expected=holder):
                store.record(decision)
                return decision
    raise XmcError(
        f"{store.name}@{store.alias} kept changing during the promotion of version {version} "
        "(something outside xmc moves it); retry"
    )


def promote_version(cfg: XmcConfig, version: str) -> Decision:
    """Give the alias to ``version`` without a gate (``xmc promote``), after reconciling what
    a killed run left half done (``serving.reconcile``)."""
    store = RegistryStore(cfg)
    version = store.require_version(version)
    with registry_lock(cfg):
        reconcile_locked(store)
        for _ in range(_CAS_ATTEMPTS):
            holder = store.holder()
            if holder == version:
                return _unchanged(cfg, version, "manual", None)
            new_value, champion_value = _cached_pair(cfg, store, version, holder)
            if store.move_alias(version, expected=holder):
                decision = _decision(
                    cfg, version, holder, new_value, champion_value, True, "no gate", "manual"
                )
                store.record(decision)
                return decision
    raise XmcError(f"{store.name}@{store.alias} kept changing; retry the promotion")


def rollback(cfg: XmcConfig) -> Decision:
    """Give the alias back to its previous holder (from the alias history), after reconciling
    what a killed run left half done (``serving.reconcile``)."""
    store = RegistryStore(cfg)
    with registry_lock(cfg):
        reconcile_locked(store)
        holder = store.holder()
        if holder is None:
            raise XmcError(
                f"{store.name}@{store.alias} is not set: nothing to roll back\n"
                "  fix: promote a version first (`xmc promote VERSION`)"
            )
        history = store.history()
        while history and (history[-1] == holder or not store.version_exists(history[-1])):
            history.pop()
        if not history:
            raise XmcError(
                f"{store.name}@{store.alias} (version {holder}) has no previous holder in its "
                f"history (registered-model tag {HISTORY_TAG}{store.alias})\n"
                "  fix: give the alias to a version explicitly with `xmc promote VERSION`"
            )
        target = history[-1]
        new_value, champion_value = _cached_pair(cfg, store, target, holder)
        if not store.move_alias(target, expected=holder, history=history):
            raise XmcError(f"{store.name}@{store.alias} changed during the rollback; retry")
        decision = _decision(
            cfg, target, holder, new_value, champion_value, True,
            f"rolled back from version {holder}", "rollback",
        )  # fmt: skip
        store.record(decision)
        return decision


def not_promoted(cfg: XmcConfig, version: str, reason: str) -> Decision:
    """The decision of a run that did not try to promote (e.g. ``registry.promote`` off); reads
    nothing from the registry (``previous`` is None)."""
    return _decision(cfg, str(version), None, None, None, False, reason, "gated")


def format_decision(d: Decision) -> str:
    """Two lines: what happened to ``name@alias``, then the figures and the reason."""
    target = f"{d.model_name}@{d.alias}"
    was = f"version {d.previous}" if d.previous else "no holder"
    if d.kind == "rollback":
        head = f"rolled {target} back to version {d.version} (was {was})"
    elif d.promoted:
        how = " by hand" if d.kind == "manual" else ""
        head = f"promoted version {d.version} to {target}{how} (was {was})"
    elif d.refused:
        return f"version {d.version} refused; {target} stays at {was}\n  {d.reason}\n  fix: {d.fix}"
    else:
        head = f"version {d.version} not promoted; {target} stays at {was}"
    figures = f"{d.metric} of version {d.version} {percent(d.new_value)}"
    if d.previous and d.previous != d.version:
        figures += f", of version {d.previous} {percent(d.champion_value)}"
    return f"{head}\n  {figures}; {d.reason}"


def _gate(
    cfg: XmcConfig,
    version: str,
    holder: str | None,
    new_metrics: dict[str, float],
    champion: dict[str, float] | None,
) -> Decision:
    """The gate: promoted iff no champion, or new >= champion + margin and calibration kept
    (:func:`_calibration_kept`)."""
    metric, margin = cfg.registry.metric, cfg.registry.margin
    new_value = new_metrics[metric]
    if champion is None:
        return _decision(cfg, version, None, new_value, None, True, "no champion", "gated")
    old = champion[metric]
    promoted = new_value >= old + margin - _TOLERANCE
    sign = ">=" if promoted else "<"
    reason = f"gain {100 * (new_value - old):+.2f} pt {sign} margin {100 * margin:.2f} pt"
    calibrated, why = _calibration_kept(cfg, new_metrics, champion)
    if why:
        reason += f"; {why}"
    promoted = promoted and calibrated
    return _decision(cfg, version, holder, new_value, old, promoted, reason, "gated")


def _calibration_kept(
    cfg: XmcConfig, new_metrics: dict[str, float], champion: dict[str, float]
) -> tuple[bool, str]:
    """Whether calibration did not get worse by more than ``registry.max_ece_increase``, and
    the reason's words ("" when not checked: unset, or an uncalibrated champion)."""
    most, metric = cfg.registry.max_ece_increase, cfg.registry.ece_metric
    if most is None or metric not in champion:
        return True, ""
    if metric not in new_metrics:
        return False, f"uncalibrated, and the champion has {metric} {percent(champion[metric])}"
    rise = new_metrics[metric] - champion[metric]
    kept = rise <= most + _TOLERANCE
    sign = "<=" if kept else ">"
    return kept, f"{metric} {100 * rise:+.2f} pt {sign} max increase {100 * most:.2f} pt"


def _refused(cfg: XmcConfig, version: str, holder: str | None, reason: str, fix: str) -> Decision:
    """The gate's refusal to compare ``version`` with ``holder`` (another lineage)."""
    decision = _decision(cfg, version, holder, None, None, False, reason, "gated")
    return decision.model_copy(update={"refused": True, "fix": fix})


def _decision(
    cfg: XmcConfig,
    version: str,
    previous: str | None,
    new_value: float | None,
    champion_value: float | None,
    promoted: bool,
    reason: str,
    kind: Literal["gated", "manual", "rollback"],
) -> Decision:
    return Decision(
        model_name=cfg.registry.model_name,
        alias=cfg.registry.alias,
        version=version,
        previous=previous,
        metric=cfg.registry.metric,
        new_value=new_value,
        champion_value=champion_value,
        margin=cfg.registry.margin,
        promoted=promoted,
        reason=reason,
        kind=kind,
        at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _unchanged(
    cfg: XmcConfig, version: str, kind: Literal["gated", "manual"], metrics: dict | None
) -> Decision:
    """Nothing to do: ``version`` holds the alias already (no tag, no history change)."""
    value = None if metrics is None else metrics[cfg.registry.metric]
    reason = f"version {version} already holds {cfg.registry.model_name}@{cfg.registry.alias}"
    return _decision(cfg, version, version, value, value, False, reason, kind)


def _cached_pair(
    cfg: XmcConfig, store: RegistryStore, version: str, holder: str | None
) -> tuple[float | None, float | None]:
    """Cached ``metric`` of ``version`` and of ``holder`` when both were computed on the same
    data, settings and code (else the version's own alone, or None)."""
    mine = store.latest_metrics(version, cfg.registry.eval_split)
    theirs = None if holder is None else store.latest_metrics(holder, cfg.registry.eval_split)
    metric = cfg.registry.metric
    new_value = None if mine is None else mine[1].get(metric)
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return new_value, None
    return new_value, theirs[1].get(metric)


def _eval_cfg(cfg: XmcConfig) -> EvalConfig:
    """``cfg.eval`` with the gate metric's cut-off added to ``ks``."""
    k = int(cfg.registry.metric.split("@")[1])
    return cfg.eval.model_copy(update={"ks": sorted({*cfg.eval.ks, k})})


def _eval_key(cfg: XmcConfig, dataset: Path) -> dict[str, str]:
    """What a cached evaluation must match: the evaluated split's content (not the whole
    dataset's: a retrain's grown training split leaves the champion's figures valid), the
    settings and the code."""
    return {
        "split": Corpus(dataset).split_fingerprint(cfg.registry.eval_split),
        "eval": _eval_cfg(cfg).fingerprint(),
        "code": closure_fingerprint("xmc_core.serving.registry.gate"),  # the code that evaluates
    }


def _evaluate(cfg: XmcConfig, version: str, dataset: Path) -> dict[str, float]:
    """Download ``version`` (serving cache) and evaluate it from raw text."""
    from xmc_core.serving.registry import gate as evaluation  # the model code: only when evaluating

    name = cfg.registry.model_name
    folder = local_model_dir(f"models:/{name}/{version}", cfg)
    return evaluation.evaluate_on_dataset(folder, dataset, cfg.registry.eval_split, _eval_cfg(cfg))


__all__ = [
    "PROMOTION_TAG",
    "Decision",
    "champion_version",
    "format_decision",
    "not_promoted",
    "promote_gated",
    "promote_version",
    "rollback",
    "version_metrics",
]
