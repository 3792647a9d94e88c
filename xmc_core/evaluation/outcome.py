"""How a training run ended, in one line and a few tags: what the flow run's final state says
and what its summary prints.

``promotion_decision`` is one of :data:`TAGS`' keys; ``promotion_reason`` one line saying why;
``promotion_fix`` one line saying what to do about a refusal (a version of another lineage than
the champion's). Nothing here reads files or talks to a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.evaluation.metrics import percent

TAGS = {
    "promoted": "promoted",
    "kept": "kept-champion",
    "already-champion": "kept-champion",
    "refused": "other-lineage",
    "not-promoted": "not-promoted",
    "not-registered": "not-registered",
}
"""Flow run tag of each promotion decision."""
NOTHING_TO_DO = "nothing-to-do"
QUARANTINED = "quarantined"


def promotion_outcome(cfg: XmcConfig, decision: Mapping[str, Any] | None) -> tuple[str, str]:
    """(promotion_decision, promotion_reason) of a training run.

    ``decision``: the gated promotion's decision as a dict
    (``xmc_core.serving.registry.store.Decision``), None when none was taken (tracking, the
    registry or promotion off).
    """
    if decision is None:
        if not cfg.tracking.enabled:
            return "not-registered", "not registered: tracking disabled (tracking.enabled=false)"
        if not cfg.registry.enabled:
            return "not-registered", "not registered: registry disabled (registry.enabled=false)"
        if not cfg.registry.promote:
            return "not-promoted", "not promoted: promotion disabled (registry.promote=false)"
        return "not-registered", "no version registered"
    version, previous = decision["version"], decision.get("previous")
    target = f"{decision['model_name']}@{decision['alias']}"
    metric, reason = decision["metric"], decision["reason"]
    new, old = percent(decision.get("new_value")), percent(decision.get("champion_value"))
    if decision["promoted"]:
        if previous is None:
            return "promoted", f"version {version} promoted to {target} (no champion before)"
        was = f"was version {previous} at {old}; {reason}"
        return "promoted", f"version {version} promoted to {target} ({was})"
    if previous == version:
        return "already-champion", f"version {version} already holds {target}"
    if decision.get("refused"):
        return "refused", f"version {version} refused by {target}: {reason}"
    if previous is None:  # not gated (registry.promote off at the task level)
        return "not-promoted", f"version {version} not promoted: {reason}"
    return "kept", f"kept champion version {previous} ({metric} {new} vs {old}; {reason})"


def headline(metrics: Mapping[str, float], metric: str) -> str:
    """``P@1 79.33%``: ``metric`` of ``metrics`` (else P@1; "" when neither is there)."""
    name = metric if metric in metrics else "P@1"
    return f"{name} {percent(metrics[name])}" if name in metrics else ""


def train_message(
    test_metrics: Mapping[str, float], metric: str, outputs: Mapping[str, str]
) -> str:
    """The final state message of a training run: ``P@1 79.33% — version 3 promoted to
    xmc-reuters@champion (...); MLflow run <url or id>``; a champion kept is said with its own
    figures (``kept champion version 2 (P@1 79.10% vs 79.33%; ...)``), a refusal with its
    fix (``version 3 refused by ...: ...; fix: ...``)."""
    reason = outputs.get("promotion_reason", "")
    head = headline(test_metrics, metric)
    text = (
        reason if outputs.get("promotion_decision") == "kept" or not head else f"{head} — {reason}"
    )
    if outputs.get("promotion_fix"):
        text += f"; fix: {outputs['promotion_fix']}"
    run = outputs.get("mlflow_url") or outputs.get("mlflow_run")
    return f"{text}; MLflow run {run}" if run else text


def train_tags(outputs: Mapping[str, str]) -> list[str]:
    """The flow run tags of a training run: its promotion decision's (:data:`TAGS`)."""
    tag = TAGS.get(outputs.get("promotion_decision", ""))
    return [tag] if tag else []


def quarantine_note(intake: Mapping[str, Any]) -> str:
    """``2 drop(s) quarantined: a, b (reasons: ...)``, or "" when the intake refused none."""
    refused = [q["name"] for q in [*intake.get("quarantined", []), *intake.get("stuck", [])]]
    if not refused:
        return ""
    return (
        f"{len(refused)} drop(s) quarantined: {', '.join(refused)} "
        "(reasons: artifact xmc-intake-report, REASON.txt in the quarantine folder)"
    )


def nothing_to_do(corpus_fingerprint: str | None, landing_dir: str) -> str:
    """The message of a retrain run that did not train."""
    if corpus_fingerprint is None:
        return f"nothing to do: no training corpus yet (drop one into {landing_dir})"
    return f"nothing to do: corpus {corpus_fingerprint[:16]} already trained"


def joined(parts: Sequence[str]) -> str:
    """The non-empty ``parts`` joined with ``; ``."""
    return "; ".join(p for p in parts if p)
