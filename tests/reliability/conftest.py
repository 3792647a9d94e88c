"""Reliability suites: the ``reliability`` marker and the suites' outcome counts.

When ``XMC_RELIABILITY_STATS`` names a file, the session appends one JSON line per suite::

    {"suite": "fuzz", "inputs": n, "clear_errors": n, "accepted": n, "tracebacks": 0,
     "partial_outputs": 0, "formats": {"lines": {"inputs": n, ...}, ...}}
    {"suite": "crash", "faults": n, "data_lost": 0, ...}      # from ``suite_stats.add``
    {"suite": "hostile-writes", "tried": n, "held": n, "lost": 0, ...}  # every test_hostile_* case
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
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


class SuiteStats:
    """Counts the other suites add (faults injected, data lost ...), by suite name."""

    def __init__(self) -> None:
        self.by_suite: dict[str, Counter[str]] = {}

    def add(self, suite: str, **counts: int) -> None:
        self.by_suite.setdefault(suite, Counter()).update(counts)


SUITE_STATS = SuiteStats()


@pytest.fixture(scope="session")
def suite_stats() -> SuiteStats:
    """The session's per-suite counter (written to $XMC_RELIABILITY_STATS at session end)."""
    return SUITE_STATS


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: malformed-input, crash and artifact reliability suites"
    )


@pytest.fixture(scope="session")
def fuzz_stats() -> FuzzStats:
    """The session's fuzz counter (written to $XMC_RELIABILITY_STATS at session end)."""
    return FUZZ_STATS


def hostile_suite(item: pytest.Item) -> str | None:
    """The suite of a ``test_hostile_*`` module: its ``SUITE``, else its name (``hostile-x``)."""
    module = getattr(item, "module", None)
    name = module.__name__.rsplit(".", 1)[-1] if module else ""
    if not name.startswith("test_hostile_"):
        return None
    return getattr(module, "SUITE", None) or name.removeprefix("test_").replace("_", "-")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Count every case of the hostile suites: tried, held (it passed), skipped.

    Counted here rather than by the tests themselves, so a case that fails is still tried (and
    not held): the report's ``tried - held`` is the number of cases that did not hold.
    """
    outcome = yield
    report = outcome.get_result()
    suite = hostile_suite(item)
    if suite is None:
        return
    if report.skipped:
        SUITE_STATS.add(suite, skipped=1)
    elif report.when == "call" or (report.when == "setup" and report.failed):
        SUITE_STATS.add(suite, tried=1, held=int(report.passed))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("XMC_RELIABILITY_STATS")
    if not target:
        return
    lines = [FUZZ_STATS.summary()] if FUZZ_STATS.by_format else []
    lines += [{"suite": name, **counts} for name, counts in sorted(SUITE_STATS.by_suite.items())]
    with open(Path(target), "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)
