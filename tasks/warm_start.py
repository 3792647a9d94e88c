"""The retrain flow's choice of a warm or a cold start (``xmc_core.serving.registry.warm_start``).

Not cached: the champion can change between runs."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task

from tasks.landing import corpus_store
from xmc_core.config import XmcConfig
from xmc_core.intake.drops import TRAINED_FILE
from xmc_core.serving.registry.warm_start import plan_start


@task(name="plan-start", task_run_name="plan-start")
def plan_warm_start(cfg: XmcConfig, corpus: str, work_dir: str) -> dict[str, Any]:
    """``{"base": the WarmBase as a dict or None, "reason": "warm from ..." / "cold: ..."}``."""
    plan = plan_start(cfg, corpus, corpus_store(work_dir) / TRAINED_FILE)
    get_run_logger().info("start: %s", plan.reason)
    return plan.to_dict()
