"""The benchmark scripts import each other as top-level modules (``benchmarks/`` is on
``sys.path`` when they run as scripts): the same here."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
