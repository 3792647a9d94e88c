"""The retrain flow starts warm from the model it trained last (no registry here): a grown
corpus extends its vocabulary, labels and tree; a kill in the middle resumes; a retrain with no
new document gives the champion's rankers back; ``retrain.cold_every`` makes one cold again."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.retrain import retrain
from flows.runtime import prefect_api
from tests.corpus.helpers import parquet_drop
from tests.flows.conftest import tree_task_states
from xmc_core.families import warm as warm_module
from xmc_core.model.xmc_model import XmcModel

pytestmark = pytest.mark.usefixtures("prefect_server")
STAGES = frozenset({"extend-vocabulary", "extend-label-index", "grow-label-tree", "train-level-0"})


def sets(work: Path, *more: str) -> list[str]:
    return [
        f"work_dir={work}", "data.rows_per_group=150", "tree.branching=4",
        "tree.max_leaf_size=8", "tracking.enabled=false", "dask.n_workers=1", *more,
    ]  # fmt: skip


def test_a_retrain_starts_warm_from_the_last_model_resumes_and_can_go_cold(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = pq.read_table(small_corpus / "train.parquet")
    test = pq.read_table(small_corpus / "test.parquet")
    work = tmp_path / "work"
    with prefect_api():
        parquet_drop(work / "landing", "a", train.slice(0, 200), test)
        first = retrain(None, sets(work))["outputs"]
        assert first["start"] == "cold: no model trained before in this corpus store"

        parquet_drop(work / "landing", "b", train.slice(200), test)
        real = warm_module.grow_tree

        def killed(*args: object, **kwargs: object) -> object:
            raise RuntimeError("simulated kill while growing the tree")

        monkeypatch.setattr(warm_module, "grow_tree", killed)
        assert retrain(None, sets(work), return_state=True).is_failed()
        monkeypatch.setattr(warm_module, "grow_tree", real)
        state = retrain(None, sets(work), return_state=True)
        second = state.result()["outputs"]
        stages = tree_task_states(state.state_details.flow_run_id, STAGES)
        again = [*sets(work), "retrain.retrain_without_new_data=true", "retrain.cold_every=3"]
        third = retrain(None, again)["outputs"]  # nothing new: warm gives the champion back
        fourth = retrain(None, again)["outputs"]  # two warm in a row: the third is cold
    champion = XmcModel.load(first["model"])
    model = XmcModel.load(second["model"])
    assert second["start"].startswith(
        f"warm from the last trained model ({Path(first['model']).name}): kept "
    )
    assert second["start"].endswith("; every ranker level trained again")
    assert model.start["from"] == f"the last trained model ({Path(first['model']).name})"
    assert (
        model.labels.names.to_pylist()[: len(champion.labels)] == champion.labels.names.to_pylist()
    )
    assert model.start["reused"]["labels"] == len(champion.labels)
    assert model.start["reused"]["leaf_cost_scale"] == champion.ranker.leaf_cost_scale_
    assert model.start["warm_in_a_row"] == 1
    assert stages["extend-vocabulary"] == "Cached" and stages["extend-label-index"] == "Cached"
    assert stages["grow-label-tree"] == "Completed" and stages["train-level-0"] == "Completed"
    same = XmcModel.load(third["model"])
    assert third["start"].startswith(
        f"warm from the last trained model ({Path(second['model']).name}): kept "
    )
    assert "(+0 new)" in third["start"]
    report = Path(third["report"]).read_text()
    assert f"- start: {third['start']}" in report
    assert same.start["warm_in_a_row"] == 2 and same.start["reused"]["new_columns"] == 0
    for before, after in zip(model.ranker.weights_, same.ranker.weights_, strict=True):
        assert (before != after).nnz == 0
    assert fourth["start"] == (
        "cold: the periodic cold retrain (retrain.cold_every=3; 2 warm retrain(s) in a row led "
        f"to the last trained model ({Path(third['model']).name}))"
    )
    assert XmcModel.load(fourth["model"]).start is None
