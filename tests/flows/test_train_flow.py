"""The train flow with XR-Linear: a P@1 floor, and a failure at level 2 resumes at level 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import xmc_core.families.common as family_stages
from flows.runtime import configured, prefect_api
from flows.train import train_pipeline
from tests.flows.conftest import task_states
from xmc_core.config import XmcConfig

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = [
    "data.synthetic_scale=0.25",
    "data.rows_per_group=600",
    "tree.branching=4",
    "tree.max_leaf_size=8",
    "tfidf.max_features=20000",
]


def run(work: Path) -> tuple[object, dict[str, str]]:
    cfg = XmcConfig.load(None, [f"work_dir={work}", *SETS])
    with prefect_api():
        state = configured(train_pipeline, cfg, use_dask=False)(cfg, return_state=True)
    levels = frozenset({"train-level-0", "train-level-1", "train-level-2"})
    return state, task_states(state.state_details.flow_run_id, expect=levels)


def test_failure_at_level_two_resumes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fit_level = family_stages.fit_level

    def crash_at_level_two(*args: object, **kwargs: object) -> object:
        if args[3] == 2:
            raise RuntimeError("simulated crash at level 2")
        return real_fit_level(*args, **kwargs)

    monkeypatch.setattr(family_stages, "fit_level", crash_at_level_two)
    state, states = run(tmp_path)
    assert state.is_failed()
    assert states["train-level-0"] == "Completed" and states["train-level-1"] == "Completed"
    assert states["train-level-2"] == "Failed"

    monkeypatch.setattr(family_stages, "fit_level", real_fit_level)
    state, states = run(tmp_path)
    assert state.is_completed(), state.message
    assert states["train-level-0"] == "Cached" and states["train-level-1"] == "Cached"
    assert states["train-level-2"] == "Completed"
    assert states["evaluate"] == "Completed"
    outputs = state.result()
    metrics = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())
    assert metrics["P@1"] >= 0.6, metrics  # the embedded corpus is learnable (~0.8 at scale 1)
