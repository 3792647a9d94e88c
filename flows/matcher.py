"""The ``matcher`` flow: XR-Transformer's matcher, one cached task per tree level, coarse to fine.

The train flow calls it in its own process, or, when ``XMC_MATCHER_DEPLOYMENT`` names a
deployment of it (e.g. ``matcher/xmc-matcher-gpu`` in ``prefect.yaml``), runs it on that
deployment's work pool, where a worker with a GPU picks it up. Either way every level is a
cached task, so a rerun after a failure at one level resumes at that level.
"""

from __future__ import annotations

from prefect import flow

from tasks.cache_records import record_storage
from tasks.xr_transformer import train_matcher_level
from xmc_core.config import EncoderConfig, MatcherConfig
from xmc_core.linear.tree import LabelTree
from xmc_core.transformer.shortlist import matcher_levels


@flow(name="matcher", log_prints=True, persist_result=True, result_serializer="json")
def matcher_flow(
    tokens_dir: str,
    train_dir: str,
    tree_dir: str,
    encoder: EncoderConfig,
    matcher: MatcherConfig,
    work_dir: str,
) -> list[str]:
    """Train the matcher levels of the tree at ``tree_dir`` on the tokenized training split
    (``tokens_dir``, rows aligned with the featurized ``train_dir``); returns the checkpoint
    folder of every level, coarse to fine (the last one is the fine-tuned matcher)."""
    levels = matcher_levels(LabelTree.load(tree_dir), matcher)
    print(f"matcher: tree levels {levels}")
    # verified cache records also on a worker of the deployment, whose own result storage is
    # a plain folder (PREFECT_RESULTS_LOCAL_STORAGE_PATH)
    train_level = train_matcher_level.with_options(result_storage=record_storage(work_dir))
    checkpoints: list[str] = []
    for level in levels:
        previous = checkpoints[-1] if checkpoints else None
        checkpoints.append(
            train_level(
                tokens_dir, train_dir, tree_dir, level, previous, encoder, matcher, work_dir
            )
        )
    return checkpoints
