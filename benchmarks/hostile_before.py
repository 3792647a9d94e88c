"""The hostile suites against older code: how many of today's cases held before the fixes.

Usage, from the repository root, with the project venv::

    python benchmarks/hostile_before.py [--rev 12febba]
        [--out benchmarks/results/hostile-before-<date>.json]

Checks out ``--rev`` in a temporary git worktree, copies today's ``tests/reliability`` conftest,
child scripts and ``test_hostile_*.py`` modules into it and runs them there with
``pytest --continue-on-collection-errors``. A ``sitecustomize.py`` on ``PYTHONPATH`` removes the
project venv's editable-install finder, so every import (also in subprocesses) comes from the
old tree, never from this checkout. The conftest hook counts each case run as tried and, if it
passed, held. A module that does not import at ``--rev`` (it calls what the fixes added) has
all its cases, as collected here, counted tried and not held. Prints a table per suite and
writes the JSON report atomically.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from xmc_core.storage.atomic import write_json

REPO = Path(__file__).resolve().parents[1]
SUITES = REPO / "tests" / "reliability"
DROP_EDITABLE = (
    "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in repr(f)]\n"
)


def collected() -> dict[str, int]:
    """Cases per hostile module in this checkout: ``{"test_hostile_x.py": n}``."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *map(str, sorted(SUITES.glob("test_hostile_*.py"))),
         "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return {Path(m[0]).name: int(m[1]) for m in re.findall(r"^(\S+\.py): (\d+)$", out, re.M)}


def run_at(rev: str, tree: Path, stats: Path) -> subprocess.CompletedProcess[str]:
    """Today's hostile modules run against ``rev`` checked out at ``tree``."""
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(tree), rev], cwd=REPO, check=True
    )
    for src in [
        SUITES / "conftest.py",
        *SUITES.glob("hostile_*.py"),
        *SUITES.glob("test_hostile_*.py"),
    ]:
        shutil.copy2(src, tree / "tests" / "reliability" / src.name)
    (tree / "sitecustomize.py").write_text(DROP_EDITABLE)
    env = {**os.environ, "PYTHONPATH": str(tree), "XMC_RELIABILITY_STATS": str(stats)}
    modules = sorted(f"tests/reliability/{p.name}" for p in SUITES.glob("test_hostile_*.py"))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rA",
        "--continue-on-collection-errors",
        *modules,
    ]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)  # fmt: skip


def tally(cases: dict[str, int], stats: Path, output: str) -> dict[str, dict[str, int]]:
    """Per suite: tried, held; modules that did not import count all their cases as tried."""
    suites: dict[str, dict[str, int]] = {}
    if stats.exists():
        for line in stats.read_text().splitlines():
            rec = json.loads(line)
            if "tried" in rec:
                suites[rec["suite"]] = {"tried": rec["tried"], "held": rec.get("held", 0)}
    for module in re.findall(r"^ERROR tests/reliability/(test_hostile_\w+\.py)", output, re.M):
        name = "hostile-" + module.removeprefix("test_hostile_").removesuffix(".py")
        name = name.replace("_", "-")
        suites[name] = {"tried": cases[module], "held": 0, "not_importable": 1}
    return dict(sorted(suites.items()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", default="12febba", help="the older code to run the cases against")
    today = dt.date.today().isoformat()
    p.add_argument(
        "--out", type=Path, default=REPO / f"benchmarks/results/hostile-before-{today}.json"
    )
    args = p.parse_args()
    cases = collected()
    with tempfile.TemporaryDirectory(prefix="hostile-before-") as tmp:
        os.chmod(tmp, 0o755)  # like a checkout: the tests run some commands as another user
        tree, stats = Path(tmp) / "tree", Path(tmp) / "stats.jsonl"
        try:
            proc = run_at(args.rev, tree, stats)
            output = proc.stdout + proc.stderr
            suites = tally(cases, stats, output)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    total = {k: sum(s[k] for s in suites.values()) for k in ("tried", "held")}
    print(f"hostile cases at {args.rev}:")
    for name, s in suites.items():
        note = " (module does not import there)" if s.get("not_importable") else ""
        print(f"  {name}: {s['held']} of {s['tried']} held{note}")
    today_cases = sum(cases.values())
    print(f"  total: {total['held']} of {total['tried']} held (today's tree: {today_cases} cases)")
    write_json(args.out, {
        "command": "python benchmarks/hostile_before.py " + " ".join(sys.argv[1:]),
        "rev": args.rev, "date": today, "suites": suites, "total": total,
        "cases_today": cases, "pytest_exit_code": proc.returncode,
        "outcomes": re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", output, re.M),
    })  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
