"""A plug-in family installed the way pip leaves a distribution: a ``*.dist-info`` folder with
an ``entry_points.txt`` declaring it under ``xmc.families``, on ``sys.path`` and on the
``PYTHONPATH`` of the child processes (the CLI, the pyfunc, ``xmc serve``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xmc_core.model import registry


def write_dist_info(site: Path, dist: str, entry_points: dict[str, str]) -> Path:
    """``site/<dist>-0.1.dist-info`` declaring ``entry_points`` (name -> ``module:attr``) in the
    ``xmc.families`` group; returns the dist-info folder."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = [f"[{registry.ENTRY_POINTS}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return info


@contextmanager
def installed(site: Path, dist: str, entry_points: dict[str, str]) -> Iterator[Path]:
    """The plug-in ``dist`` installed in ``site`` for this process and its children, the
    registry reading the entry points again on entry and on exit."""
    write_dist_info(site, dist, entry_points)
    old_path, old_env = list(sys.path), os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), old_env) if p)
    try:
        registry.discover(refresh=True)
        yield site
    finally:
        sys.path[:] = old_path
        if old_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_env
        registry.discover(refresh=True)
