"""The train flow with an ensemble: each member's stages are separate cached tasks, so a rerun
after a member failed trains only that member; the run report and the summary show each
member's test metrics beside the ensemble's."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.runtime import configured, prefect_api
from flows.train import train_pipeline
from tests.flows.conftest import task_states
from xmc_core.app.summary import flow_summary
from xmc_core.config import XmcConfig
from xmc_core.linear.tree import LabelTree

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = [
    "model.kind=ensemble",
    "tracking.enabled=false",
    "data.synthetic_scale=0.25",
    "data.rows_per_group=600",
    "tree.branching=4",
    "tree.max_leaf_size=8",
    "tfidf.max_features=20000",
]
MEMBER_STAGES = ("label-tree", "train-level-0", "assemble-model", "evaluate")


def run(work: Path, members: int) -> tuple[object, dict[str, str]]:
    """Train the ensemble; the task states once those of every stage of the first ``members``
    members exist (and of the ensemble's, when all three), and member 2's label tree's."""
    cfg = XmcConfig.load(None, [f"work_dir={work}", *SETS])
    with prefect_api():
        state = configured(train_pipeline, cfg, use_dask=False)(cfg, return_state=True)
    expect = {f"member-{i}-{s}" for i in range(members) for s in MEMBER_STAGES}
    expect |= {"member-2-label-tree"} | (
        {"assemble-ensemble", "evaluate"} if members == 3 else set()
    )
    return state, task_states(state.state_details.flow_run_id, expect=frozenset(expect))


def test_a_failed_member_is_the_only_one_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_build = LabelTree.build

    def crash_for_seed_two(Z: object, cfg: object) -> LabelTree:
        if cfg.seed == 2:  # type: ignore[attr-defined]
            raise RuntimeError("simulated crash in member 2")
        return real_build(Z, cfg)  # type: ignore[arg-type]

    monkeypatch.setattr(LabelTree, "build", staticmethod(crash_for_seed_two))
    state, states = run(tmp_path, 2)
    assert state.is_failed()
    assert all(states[f"member-{i}-{s}"] == "Completed" for i in (0, 1) for s in MEMBER_STAGES)
    assert states["member-2-label-tree"] == "Failed"

    monkeypatch.setattr(LabelTree, "build", real_build)
    state, states = run(tmp_path, 3)
    assert state.is_completed(), state.message
    assert all(states[f"member-{i}-{s}"] == "Cached" for i in (0, 1) for s in MEMBER_STAGES)
    assert all(states[f"member-2-{s}"] == "Completed" for s in MEMBER_STAGES)
    assert states["assemble-ensemble"] == "Completed" and states["evaluate"] == "Completed"

    outputs = state.result()
    report = Path(outputs["report"]).read_text()
    section = report.split("## Ensemble members")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[1:]] == [
        "| 0: xr_linear tree.seed=0", "| 1: xr_linear tree.seed=1", "| 2: xr_linear tree.seed=2",
        "| **ensemble**",
    ]  # fmt: skip
    summary = flow_summary(outputs, "ensemble").format()
    assert summary.count("%") >= 7 and "\n  members   P@1 " in summary, summary
