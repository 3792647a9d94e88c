"""Whether a retrain starts warm and from which model: the registry's champion of the corpus's
lineage, or without a registry the model the last retrain trained; cold, with the reason,
otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from tests.serving.conftest import ALIAS, MODEL_NAME, Registry, tracking
from xmc_core.config import XmcConfig
from xmc_core.families.warm import START_TAG, start_line, start_tags
from xmc_core.serving.registry.lineage import version_tags
from xmc_core.serving.registry.warm_start import plan_start
from xmc_core.serving.run_lineage import version_description

TREE = ["tree.branching=2", "tree.max_leaf_size=4"]  # the tiny model's


def no_registry(tmp_path: Path, *sets: str) -> XmcConfig:
    return XmcConfig.load(None, [f"work_dir={tmp_path}", "tracking.enabled=false", *sets])


def record(tmp_path: Path, model: Path | None) -> Path:
    path = tmp_path / "trained.json"
    path.write_text(json.dumps({} if model is None else {"model": str(model)}))
    return path


@pytest.mark.parametrize(
    ("sets", "recorded", "reason"),
    [
        (["retrain.warm_start=false"], True, "cold: retrain.warm_start is off"),
        (["model.kind=xml_cnn"], True, "cold: xml_cnn always starts cold"),
        ([], False, "cold: {trained} names no model folder"),
        (["tree.branching=4"], True, "cold: the last trained model (model) was trained with "
         "other tree settings"),
        (["retrain.cold_every=1"], True, "cold: the periodic cold retrain (retrain.cold_every=1; "
         "0 warm retrain(s) in a row led to the last trained model (model))"),
        ([], True, "warm from the last trained model (model)"),
    ],
)  # fmt: skip
def test_without_a_registry_the_last_trained_model_is_started_from(
    tmp_path: Path, tiny_model_dir: Path, tiny_dataset: Path, sets: list[str], recorded: bool,
    reason: str,
) -> None:  # fmt: skip
    trained = record(tmp_path, tiny_model_dir if recorded else None)
    plan = plan_start(no_registry(tmp_path, *TREE, *sets), tiny_dataset, trained)
    assert plan.reason == reason.format(trained=trained)
    assert (plan.base is not None) == reason.startswith("warm")
    if plan.base is not None:
        assert plan.base.model_dir == str(tiny_model_dir) and plan.base.warm_in_a_row == 0


def test_no_record_means_a_cold_start(tmp_path: Path, tiny_dataset: Path) -> None:
    plan = plan_start(no_registry(tmp_path, *TREE), tiny_dataset, tmp_path / "trained.json")
    assert plan.reason == "cold: no model trained before in this corpus store"


def test_the_registrys_champion_is_started_from_only_when_of_the_corpus_lineage(
    registry: Registry, tiny_dataset: Path, tmp_path: Path
) -> None:
    sets = [f"work_dir={tmp_path}", f"tracking.uri={registry.uri}", *TREE,
            f"registry.model_name={MODEL_NAME}"]  # fmt: skip
    cfg = XmcConfig.load(None, sets)
    with tracking(registry.uri):
        plan = plan_start(cfg, tiny_dataset, None)
        assert plan.base is None and plan.reason.startswith(
            f"cold: the {ALIAS} (version 1) is not of the lineage synthetic"
        )
        client = mlflow.MlflowClient()
        tags = version_tags(tiny_dataset)
        for key, value in tags.items():
            client.set_model_version_tag(MODEL_NAME, "1", key, value)
        try:
            plan = plan_start(cfg, tiny_dataset, None)
        finally:
            for key in tags:
                client.delete_model_version_tag(MODEL_NAME, "1", key)
    assert plan.reason == f"warm from {MODEL_NAME} version 1 ({ALIAS})"
    assert plan.base is not None and (Path(plan.base.model_dir) / "meta.json").is_file()


def test_the_start_is_said_in_words_in_the_run_tags_and_the_version_description(
    tiny_dataset: Path,
) -> None:
    reused = {
        "vocabulary_columns": 200000, "new_columns": 65181, "labels": 20228, "new_labels": 9836,
        "tree_leaves_kept": 23, "tree_leaves": 429, "leaf_cost_scale": 1.0,
    }  # fmt: skip
    line = start_line("warm from xmc-debian version 1 (champion)", {"reused": reused})
    assert line == (
        "warm from xmc-debian version 1 (champion): kept 200,000 vocabulary columns (+65,181 "
        "new), 20,228 labels (+9,836 new), 23 of 429 tree leaves unchanged, the leaf cost "
        "scale searched from the champion's 1.0; every ranker level trained again"
    )
    tags = start_tags("warm from xmc-debian version 1 (champion)", {"reused": reused})
    assert tags == {START_TAG: line, "xmc.start.reused": json.dumps(reused, sort_keys=True)}
    assert start_tags("cold: no champion", None) == {START_TAG: "cold: no champion"}
    text = version_description("xr_linear", tiny_dataset, {"P@1": 0.5}, tags, "abc")
    assert f"\n\nStart: {line}.\n\n" in text
    assert "Start:" not in version_description("xr_linear", tiny_dataset, {}, {}, "abc")
