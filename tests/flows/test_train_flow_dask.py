"""The train flow with ``dask.address`` set: the XR-Linear levels train their batches on that
cluster (two worker processes), and the model is the one trained in a single process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from distributed import LocalCluster

from flows.runtime import configured, prefect_api
from flows.train import train_pipeline
from xmc_core.config import XmcConfig
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.model import XRLinearModel
from xmc_core.model.xmc_model import XmcModel

pytestmark = pytest.mark.usefixtures("prefect_server")

SETS = ["tree.branching=4", "tree.max_leaf_size=8", "tfidf.max_features=20000"]


def test_dask_address_trains_the_levels_on_the_cluster(small_corpus: Path, tmp_path: Path) -> None:
    sets = [f"work_dir={tmp_path}", f"data.dataset={small_corpus}", "tracking.enabled=false"]
    # workers inherit PREFECT_API_URL from the process that starts them
    with (
        prefect_api(),
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
    ):
        cfg = XmcConfig.load(None, [*sets, *SETS, f"dask.address={cluster.scheduler_address}"])
        state = configured(train_pipeline, cfg)(cfg, return_state=True)
        prefixes = set(cluster.scheduler.task_prefixes)
    assert state.is_completed(), state.message
    assert "ranker-batch" in prefixes  # the level batches went through this cluster
    outputs = state.result()
    model = XmcModel.load(Path(outputs["model"])).ranker
    train = SplitFeatures.load(outputs["model_train"])
    here = XRLinearModel(cfg.ranker, cfg.predict).fit(train.X, train.Y, model.tree_)
    assert model.tree_.depth >= 3
    for a, b in zip(model.weights_, here.weights_, strict=True):
        assert a.shape == b.shape and a.nnz == b.nnz > 0
        np.testing.assert_array_equal(a.toarray(), b.toarray())
