"""The promotion gate keeps calibration: with ``registry.max_ece_increase``, a version whose
ECE@5 rose by more than that, or an uncalibrated one after a calibrated champion, is not
promoted, whatever its P@1."""

from __future__ import annotations

import pytest

from xmc_core.config import XmcConfig
from xmc_core.serving.registry.promotion import _gate

CHAMPION = {"P@1": 0.70, "ECE@5": 0.010}


@pytest.mark.parametrize(
    ("sets", "new", "promoted", "words"),
    [
        ([], {"P@1": 0.80, "ECE@5": 0.090}, True, None),  # not checked by default
        (["registry.max_ece_increase=0.01"], {"P@1": 0.80, "ECE@5": 0.030}, False,
         "ECE@5 +2.00 pt > max increase 1.00 pt"),
        (["registry.max_ece_increase=0.01"], {"P@1": 0.80, "ECE@5": 0.015}, True,
         "ECE@5 +0.50 pt <= max increase 1.00 pt"),
        (["registry.max_ece_increase=0.01"], {"P@1": 0.80}, False,
         "uncalibrated, and the champion has ECE@5 1.00%"),
        (["registry.max_ece_increase=0.01"], {"P@1": 0.60, "ECE@5": 0.0}, False, "gain -10.00 pt"),
    ],
)  # fmt: skip
def test_the_gate_keeps_calibration(
    sets: list[str], new: dict[str, float], promoted: bool, words: str | None
) -> None:
    cfg = XmcConfig.load(None, sets)
    decision = _gate(cfg, "2", "1", new, CHAMPION)
    assert decision.promoted is promoted, decision.reason
    if words is None:
        assert "ECE" not in decision.reason
    else:
        assert words in decision.reason


def test_an_uncalibrated_champion_is_not_compared_on_calibration() -> None:
    cfg = XmcConfig.load(None, ["registry.max_ece_increase=0"])
    decision = _gate(cfg, "2", "1", {"P@1": 0.8, "ECE@5": 0.5}, {"P@1": 0.7})
    assert decision.promoted and "ECE" not in decision.reason
