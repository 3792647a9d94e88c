"""The diagnostics task: load the model's ranker and its input splits, compute
:class:`xmc_core.evaluation.diagnostics.Diagnostics`, save it (``diagnostics.json``, plots)."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from xmc_core.config import EvalConfig
from xmc_core.evaluation.diagnostics import MAX_DOCS, Diagnostics
from xmc_core.features.split_features import SplitFeatures
from xmc_core.model.xmc_model import load_ranker

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}


def _diagnose_key(
    model_dir: str, train_dir: str, test_dir: str, eval_cfg: EvalConfig, work_dir: str,
    matcher_checkpoints: list[str] | None = None, max_docs: int = MAX_DOCS,
) -> str:  # fmt: skip
    checkpoints = [fp(Path(c)) for c in matcher_checkpoints or []]
    return stage_key(
        "diagnostics", fp(model_dir), fp(train_dir), fp(test_dir), eval_cfg.fingerprint(),
        checkpoints, max_docs,
    )  # fmt: skip


@task(
    name="diagnose",
    task_run_name="diagnose",
    cache_key_fn=cache_key("diagnostics", _diagnose_key),
    **TASK_OPTIONS,
)
def diagnose(
    model_dir: str, train_dir: str, test_dir: str, eval_cfg: EvalConfig, work_dir: str,
    matcher_checkpoints: list[str] | None = None, max_docs: int = MAX_DOCS,
) -> str:  # fmt: skip
    """Diagnostics of a trained model -> folder with ``diagnostics.json`` and ``plots/*.png``.

    ``model_dir``: an ``XmcModel`` folder; ``train_dir``/``test_dir``: ``SplitFeatures``
    folders holding the model's input (for XR-Transformer the embedded splits);
    ``matcher_checkpoints``: XR-Transformer's matcher level folders (their loss history), or
    None; ``max_docs``: documents per split looked at (seeded sample beyond it).
    """
    log = get_run_logger()
    key = _diagnose_key(
        model_dir, train_dir, test_dir, eval_cfg, work_dir, matcher_checkpoints, max_docs
    )
    with produce(work_dir, "diagnostics", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            ranker, counts = load_ranker(model_dir)
            splits = {"train": SplitFeatures.load(train_dir), "test": SplitFeatures.load(test_dir)}
            found = Diagnostics.compute(
                ranker, counts, splits, eval_cfg, matcher_checkpoints or [], max_docs
            )
            found.save(tmp)
            log.info(
                "diagnostics in %.1f s: beam recall %s, loss %s", time.perf_counter() - start,
                found.report["beam_recall"], found.report["training_loss"],
            )  # fmt: skip
    return str(artifact_dir(work_dir, "diagnostics", key))
