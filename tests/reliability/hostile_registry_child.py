"""Child processes of the hostile-registry suite: a registering run or a manual promotion that
SIGKILLs itself at an exact point, and a worker that opens a fresh tracking store.

Run as ``python -m tests.reliability.hostile_registry_child JSON`` with JSON keys ``step``
(``register`` | ``promote``), ``sets`` (config overrides), ``kill`` (where ``register``
stops: ``logged`` | ``registered``; for ``promote``: true) and the step's
arguments (``outputs``, ``diagnostics``, ``evals`` for ``register``; ``version`` for ``promote``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def register(args: dict[str, Any]) -> dict[str, Any]:
    """``track_run`` and, when the registry is on, ``register_tracked``, as the lifecycle's
    tracking and registration stages call them. ``kill``: ``logged`` (inside the run, right
    after the model is logged) or ``registered`` (right after the version is registered, before
    it is described); anything else: no kill."""
    from pathlib import Path

    import xmc_core.serving.package as package
    from xmc_core.config import XmcConfig
    from xmc_core.serving.tracking import register_tracked, track_run

    point = {"logged": "log_model", "registered": "register_version"}.get(args.get("kill", ""))
    if point is not None:
        real = getattr(package, point)

        def call_then_die(*a: Any, **k: Any) -> Any:
            real(*a, **k)
            _die()

        setattr(package, point, call_then_die)
    cfg = XmcConfig.load(None, args["sets"])
    outputs, evals = args["outputs"], {s: Path(d) for s, d in args["evals"].items()}
    model, corpus = Path(outputs["model"]), Path(outputs["corpus"])
    tracked = track_run(cfg, model, corpus, evals, Path(args["diagnostics"]), {}, {})
    if not cfg.registry.enabled:
        return tracked
    test = json.loads((evals["test"] / "metrics.json").read_text(encoding="utf-8"))
    return register_tracked(cfg, tracked, model, corpus, test)


def promote(args: dict[str, Any]) -> dict[str, Any]:
    """``promote_version`` (``xmc promote``); with ``kill``, killed right after the alias moved,
    before the alias history is written."""
    from xmc_core.config import XmcConfig
    from xmc_core.serving.registry.promotion import promote_version
    from xmc_core.serving.registry.store import RegistryStore

    if args.get("kill"):

        def die_instead(self: RegistryStore, history: list[str]) -> None:
            _die()

        RegistryStore.write_history = die_instead  # type: ignore[method-assign]
    cfg = XmcConfig.load(None, args["sets"])
    return promote_version(cfg, args["version"]).model_dump()


def open_fresh_store(uri: str, barrier: Any, results: Any) -> None:
    """Wait for the other process, then open the tracking store as a training run does."""
    from xmc_core.serving.tracking import experiment_id, tracking_client

    barrier.wait(timeout=300)
    try:
        results.put(("ok", experiment_id(tracking_client(uri), "race", uri)))
    except Exception as err:  # reported by the test
        results.put(("error", f"{type(err).__name__}: {err}"[:300]))


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    step = {"register": register, "promote": promote}[arguments["step"]]
    print(json.dumps(step(arguments), default=str))
