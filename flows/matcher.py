"""The ``matcher`` flow: XR-Transformer's matcher, one cached task per tree level, coarse to fine.

The train flow hands the matcher sub-graph (``xmc_core.families.xr_transformer.matcher_graph``)
to :func:`run_matcher`: it runs this flow in its own process or, when
``XMC_MATCHER_DEPLOYMENT`` names a deployment of it (e.g. ``matcher/xmc-matcher-gpu`` in
``prefect.yaml``), on that deployment's work pool, where a worker with a GPU picks it up. Either
way every level is a cached task, so a rerun after a failure at one level resumes at that level.
"""

from __future__ import annotations

import os
from typing import Any

from prefect import flow
from prefect.deployments import run_deployment

from flows.stage_runner import PrefectRunner, Ref
from tasks.cache_records import record_storage, returned_folders
from xmc_core.config import EncoderConfig, MatcherConfig
from xmc_core.families.xr_transformer.graph import MATCHER_LEVEL, matcher_graph
from xmc_core.families.xr_transformer.warm import states_root
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.work_dir import WorkDir
from xmc_core.transformer.champion import ChampionEncoder
from xmc_core.transformer.tokens import TokenizedTexts

MATCHER_DEPLOYMENT_ENV = "XMC_MATCHER_DEPLOYMENT"
"""Names the matcher deployment (``FLOW/DEPLOYMENT``) to run the matcher on; unset: in-process."""


@flow(name="matcher", log_prints=True, persist_result=True, result_serializer="json")
def matcher_flow(
    tokens_dir: str,
    train_dir: str,
    tree_dir: str,
    encoder: EncoderConfig,
    matcher: MatcherConfig,
    work_dir: str,
    start_dir: str | None = None,
    base_docs: int = 0,
) -> list[str]:
    """Train the matcher levels of the tree at ``tree_dir`` on the tokenized training split
    (``tokens_dir``, rows aligned with the featurized ``train_dir``); returns the checkpoint
    folder of every level, coarse to fine (the last one is the fine-tuned matcher).
    ``start_dir``: a warm start's champion encoder (its model's ``encoder/`` part, the model
    trained on ``base_docs`` documents): only the finest level is trained, from it."""
    # verified cache records also on a worker of the deployment, whose own result storage is
    # a plain folder (PREFECT_RESULTS_LOCAL_STORAGE_PATH)
    run = PrefectRunner(work_dir, result_storage=record_storage(work_dir))
    start = None if start_dir is None else run.source(ChampionEncoder, start_dir)
    checkpoints = matcher_graph(
        run, run.source(TokenizedTexts, tokens_dir), run.source(SplitFeatures, train_dir),
        run.source(LabelTree, tree_dir), encoder, matcher, start, base_docs,
        states_root(matcher, work_dir),
    )  # fmt: skip
    folders = [run.path(c) for c in checkpoints]
    print(f"matcher: {len(folders)} level(s) trained")
    return folders


def run_matcher(
    run: PrefectRunner, tokens: Ref, train: Ref, tree: Ref, encoder: EncoderConfig,
    matcher: MatcherConfig, start: Ref | None = None, base_docs: int = 0,
    states_root: str | None = None,
) -> list[Ref]:  # fmt: skip
    """The matcher checkpoints, coarse to fine: :func:`matcher_flow` in this process, or its
    deployment named by ``XMC_MATCHER_DEPLOYMENT`` (waits for the run, reads its result).
    ``states_root``: the graph's encoder-state cache, which the matcher flow finds itself
    from ``matcher`` and the work dir (the same folder)."""
    params: dict[str, Any] = {
        "tokens_dir": run.path(tokens), "train_dir": run.path(train),
        "tree_dir": run.path(tree), "encoder": encoder, "matcher": matcher,
        "work_dir": run.work_dir,
        "start_dir": None if start is None else run.path(start), "base_docs": base_docs,
    }  # fmt: skip
    deployment = os.environ.get(MATCHER_DEPLOYMENT_ENV)
    if not deployment:
        return [Ref(MATCHER_LEVEL.output, f) for f in matcher_flow(**params)]
    params |= {k: params[k].model_dump(mode="json") for k in ("encoder", "matcher")}
    # the worker keeps its results (task cache records included) beside the artifacts
    storage = {"PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(WorkDir.of(run.work_dir).artifacts)}
    state = run_deployment(
        deployment, parameters=params, job_variables={"env": storage}, timeout=None
    )
    if state.state is None or not state.state.is_completed():
        name = None if state.state is None else state.state.name
        raise RuntimeError(f"matcher deployment {deployment}: flow run {state.name} ended {name}")
    # not state.result(): it may unpickle
    folders = returned_folders(state.state, run.work_dir, MATCHER_LEVEL.name)
    return [Ref(MATCHER_LEVEL.output, f) for f in folders]
