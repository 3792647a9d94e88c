"""The featurize flow: results, cache hits on rerun, selective recompute, Dask execution."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dask.distributed import LocalCluster

from flows.featurize import featurize_pipeline
from flows.runtime import configured, prefect_api
from tests.flows.conftest import featurize_tasks, task_states
from xmc_core.config import XmcConfig
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer

pytestmark = pytest.mark.usefixtures("prefect_server")
TASKS = featurize_tasks({"train": 3, "test": 1})  # 400 and 120 rows, 150 a row group


def run(corpus: Path, work: Path, *overrides: str, dask: bool = False) -> tuple[dict, dict]:
    sets = [f"work_dir={work}", "dask.n_workers=2", *overrides]
    cfg = XmcConfig.load(None, sets)
    with prefect_api():
        flow = configured(featurize_pipeline, cfg, use_dask=dask)
        state = flow(str(corpus), cfg, return_state=True)
    assert state.is_completed(), state.message
    return state.result(), task_states(state.state_details.flow_run_id, expect=TASKS)


def test_rerun_is_fully_cached_and_config_change_recomputes_only_dependents(
    small_corpus: Path, tmp_path: Path
) -> None:
    first, states = run(small_corpus, tmp_path)
    assert set(first) == {"vectorizer", "label_index", "label_features", "train", "test"}
    assert states and all(s == "Completed" for s in states.values()), states
    assert {"fit-vocabulary", "label-index", "label-features"} <= set(states)
    assert sum(n.startswith("count-train") for n in states) == 3  # 400 rows / 150 per group

    second, states = run(small_corpus, tmp_path)
    assert second == first
    assert all(s == "Cached" for s in states.values()), states

    third, states = run(small_corpus, tmp_path, "tfidf.max_features=500")
    cached = {n for n, s in states.items() if s == "Cached"}
    assert cached == {n for n in states if n.startswith(("count-", "label-index"))}, states
    assert TfidfVectorizer.load(third["vectorizer"]).n_features == 500
    assert SplitFeatures.load(third["train"]).X.shape == (400, 500)
    assert third["label_index"] == first["label_index"]


def test_existing_dask_cluster_gives_identical_artifacts(
    small_corpus: Path, tmp_path: Path
) -> None:
    local, _ = run(small_corpus, tmp_path / "local")
    # Workers inherit PREFECT_API_URL from the process that starts them.
    with (
        prefect_api(),
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c,
    ):
        distributed, states = run(
            small_corpus, tmp_path / "dask", f"dask.address={c.scheduler_address}", dask=True
        )
        ran_on_cluster = c.scheduler.transition_counter
    assert ran_on_cluster > 0  # the flow's tasks went through this cluster's scheduler
    assert all(s == "Completed" for s in states.values()), states
    for name in local:
        assert Path(local[name]).name == Path(distributed[name]).name  # same content key
    a, b = SplitFeatures.load(local["test"]), SplitFeatures.load(distributed["test"])
    assert (a.X != b.X).nnz == 0 and (a.Y != b.Y).nnz == 0
    assert a.doc_ids.equals(b.doc_ids)


def test_deleted_artifact_is_rebuilt_not_served_from_cache(
    small_corpus: Path, tmp_path: Path
) -> None:
    first, _ = run(small_corpus, tmp_path)
    shutil.rmtree(first["vectorizer"])  # its Prefect cache record lives inside it
    second, states = run(small_corpus, tmp_path)
    assert second == first and Path(second["vectorizer"]).is_dir()
    assert states["fit-vocabulary"] == "Completed"
    assert states["label-index"] == "Cached"
    assert TfidfVectorizer.load(second["vectorizer"]).n_features > 0
