"""The one-line outcome of a training or retrain run: promotion decision, state message, tags."""

from __future__ import annotations

from xmc_core.config import XmcConfig
from xmc_core.evaluation.outcome import (
    headline,
    joined,
    nothing_to_do,
    promotion_outcome,
    quarantine_note,
    train_message,
    train_tags,
)

CFG = XmcConfig()
GATED = {
    "model_name": "xmc", "alias": "champion", "version": "3", "previous": "2", "metric": "P@1",
    "new_value": 0.7933, "champion_value": 0.791, "margin": 0.001, "promoted": True,
    "reason": "gain +0.23 pt >= margin 0.10 pt", "kind": "gated",
}  # fmt: skip


def test_promotion_outcomes() -> None:
    assert promotion_outcome(CFG, GATED) == (
        "promoted",
        "version 3 promoted to xmc@champion (was version 2 at 79.10%; "
        "gain +0.23 pt >= margin 0.10 pt)",
    )
    first = {**GATED, "version": "1", "previous": None, "champion_value": None}
    assert promotion_outcome(CFG, first) == (
        "promoted",
        "version 1 promoted to xmc@champion (no champion before)",
    )
    kept = {
        **GATED, "new_value": 0.791, "champion_value": 0.7933, "promoted": False,
        "reason": "gain -0.23 pt < margin 0.10 pt",
    }  # fmt: skip
    assert promotion_outcome(CFG, kept) == (
        "kept",
        "kept champion version 2 (P@1 79.10% vs 79.33%; gain -0.23 pt < margin 0.10 pt)",
    )
    same = {**GATED, "previous": "3", "promoted": False}
    assert promotion_outcome(CFG, same) == (
        "already-champion",
        "version 3 already holds xmc@champion",
    )
    refused = {
        **GATED, "new_value": None, "champion_value": None, "promoted": False, "refused": True,
        "reason": "trained on synthetic (...), the champion (version 2) on reuters (...): "
        "other labels, not compared", "fix": "give each dataset its own model (...)",
    }  # fmt: skip
    assert promotion_outcome(CFG, refused) == (
        "refused",
        f"version 3 refused by xmc@champion: {refused['reason']}",
    )


def test_no_decision_says_which_switch_is_off() -> None:
    off = XmcConfig.load(None, ["tracking.enabled=false"])
    assert promotion_outcome(off, None) == (
        "not-registered",
        "not registered: tracking disabled (tracking.enabled=false)",
    )
    no_registry = XmcConfig.load(None, ["registry.enabled=false"])
    assert promotion_outcome(no_registry, None)[1] == (
        "not registered: registry disabled (registry.enabled=false)"
    )
    no_promote = XmcConfig.load(None, ["registry.promote=false"])
    assert promotion_outcome(no_promote, None) == (
        "not-promoted",
        "not promoted: promotion disabled (registry.promote=false)",
    )


def test_train_message_and_tags() -> None:
    metrics = {"P@1": 0.79333, "P@5": 0.4}
    outputs = {
        "promotion_decision": "promoted",
        "promotion_reason": "version 3 promoted to xmc@champion (no champion before)",
        "mlflow_run": "abc",
        "mlflow_url": "",
    }
    assert train_message(metrics, "P@1", outputs) == (
        "P@1 79.33% — version 3 promoted to xmc@champion (no champion before); MLflow run abc"
    )
    assert train_tags(outputs) == ["promoted"]
    kept = {"promotion_decision": "kept", "promotion_reason": "kept champion version 2 (...)"}
    assert train_message(metrics, "P@1", kept) == "kept champion version 2 (...)"
    assert train_tags(kept) == ["kept-champion"]
    url = {**outputs, "mlflow_url": "http://h/#/experiments/1/runs/abc"}
    assert train_message(metrics, "P@5", url).startswith("P@5 40.00% — version 3")
    assert train_message(metrics, "P@5", url).endswith(
        "; MLflow run http://h/#/experiments/1/runs/abc"
    )
    assert headline(metrics, "nDCG@3") == "P@1 79.33%" and headline({}, "P@1") == ""
    refused = {
        "promotion_decision": "refused", "promotion_reason": "version 3 refused by ...",
        "promotion_fix": "give each dataset its own model (...)", "mlflow_run": "abc",
    }  # fmt: skip
    assert train_message(metrics, "P@1", refused) == (
        "P@1 79.33% — version 3 refused by ...; fix: give each dataset its own model (...); "
        "MLflow run abc"
    )
    assert train_tags(refused) == ["other-lineage"]


def test_retrain_notes() -> None:
    intake = {"quarantined": [{"name": "a"}], "stuck": [{"name": "b"}]}
    note = quarantine_note(intake)
    assert note.startswith("2 drop(s) quarantined: a, b (reasons: artifact xmc-intake-report")
    assert quarantine_note({"quarantined": [], "stuck": []}) == ""
    assert nothing_to_do("0123456789abcdef0123", "/l") == (
        "nothing to do: corpus 0123456789abcdef already trained"
    )
    assert nothing_to_do(None, "/l") == "nothing to do: no training corpus yet (drop one into /l)"
    assert joined(["x", "", "y"]) == "x; y"
