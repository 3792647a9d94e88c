"""Reliability suites: the ``reliability`` marker and the fuzz suite's outcome counts.

When ``XMC_RELIABILITY_STATS`` names a file, the session appends one JSON line to it::

    {"suite": "fuzz", "inputs": n, "clear_errors": n, "accepted": n, "tracebacks": 0,
     "partial_outputs": 0, "formats": {"lines": {"inputs": n, ...}, ...}}
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

OUTCOMES = ("clear_errors", "accepted", "tracebacks", "partial_outputs")


class FuzzStats:
    """How many inputs the fuzz suite fed to ingest, by format and outcome."""

    def __init__(self) -> None:
        self.by_format: dict[str, Counter[str]] = {}

    def record(self, fmt: str, outcome: str) -> None:
        """Count one input of format ``fmt`` with ``outcome`` (one of OUTCOMES, or another)."""
        counts = self.by_format.setdefault(fmt, Counter())
        counts["inputs"] += 1
        counts[outcome] += 1

    def summary(self) -> dict[str, object]:
        """The JSON line: totals over all formats, then per format."""
        total: Counter[str] = Counter()
        for counts in self.by_format.values():
            total.update(counts)
        line: dict[str, object] = {"suite": "fuzz", "inputs": total["inputs"]}
        line.update({name: total[name] for name in OUTCOMES})
        line["formats"] = {
            fmt: {"inputs": c["inputs"], **{name: c[name] for name in OUTCOMES}}
            for fmt, c in sorted(self.by_format.items())
        }
        return line


FUZZ_STATS = FuzzStats()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: malformed-input, crash and artifact reliability suites"
    )


@pytest.fixture(scope="session")
def fuzz_stats() -> FuzzStats:
    """The session's fuzz counter (written to $XMC_RELIABILITY_STATS at session end)."""
    return FUZZ_STATS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("XMC_RELIABILITY_STATS")
    if not target or not FUZZ_STATS.by_format:
        return
    with open(Path(target), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(FUZZ_STATS.summary()) + "\n")
