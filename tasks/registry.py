"""The gated promotion of a newly registered model version, as a Prefect task.

Not cached (the registry changes between runs) and never retried (a promotion is a decision,
not a transient I/O step; ``promote_gated`` is safe to rerun by hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from xmc_core.config import XmcConfig
from xmc_core.serving.registry.promotion import format_decision, not_promoted, promote_gated


@task(
    name="promote-candidate",
    task_run_name="promote-version-{version}",
    retries=0,
    cache_policy=NO_CACHE,
)
def promote_candidate(cfg: XmcConfig, version: str, dataset: str) -> dict[str, Any]:
    """Evaluate ``version`` and the alias holder on ``registry.eval_split`` of the dataset folder
    ``dataset`` and move the alias if the gate passes (when ``registry.enabled`` and
    ``registry.promote``) -> the decision as a dict
    (``xmc_core.serving.registry.store.Decision``)."""
    log = get_run_logger()
    if not cfg.registry.enabled:
        decision = not_promoted(cfg, version, "registry disabled (registry.enabled=false)")
    elif not cfg.registry.promote:
        decision = not_promoted(cfg, version, "promotion disabled (registry.promote=false)")
    else:
        decision = promote_gated(cfg, version, Path(dataset))
    # what happened, in one line: the figures are in the run's summary, state message and report
    log.info("%s", format_decision(decision).splitlines()[0])
    return decision.model_dump()
