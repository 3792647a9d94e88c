"""XR-Linear tasks: label tree, one task per tree level, model assembly, evaluation."""

from __future__ import annotations

import time
from pathlib import Path

import scipy.sparse as sp
from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from xmc_core.artifacts import load_csr, meta_fields, read_meta
from xmc_core.atomic import write_json
from xmc_core.config import EvalConfig, PredictConfig, RankerConfig, TreeConfig
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.fingerprint import closure_fingerprint
from xmc_core.linear.model import XRLinearModel, fit_level, load_level, save_level
from xmc_core.linear.tree import LabelTree
from xmc_core.metrics import format_metrics
from xmc_core.pipeline import evaluate_model, label_counts
from xmc_core.text_model import XmcModel

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}


def _tree_key(label_features_dir: str, cfg: TreeConfig, work_dir: str) -> str:
    return stage_key(
        "tree", fp(label_features_dir), cfg.fingerprint(), code=closure_fingerprint(__name__)
    )


@task(
    name="label-tree",
    task_run_name="label-tree",
    cache_key_fn=cache_key("tree", _tree_key),
    **TASK_OPTIONS,
)
def build_tree(label_features_dir: str, cfg: TreeConfig, work_dir: str) -> str:
    """Hierarchical balanced k-means over the label features -> ``LabelTree`` folder."""
    log = get_run_logger()
    key = _tree_key(label_features_dir, cfg, work_dir)
    with produce(work_dir, "tree", key, log) as tmp:
        if tmp is not None:
            tree = LabelTree.build(LabelFeatures.load(label_features_dir).z, cfg)
            tree.save(tmp)
            log.info("label tree: nodes per level %s", tree.level_sizes())
    return str(artifact_dir(work_dir, "tree", key))


def _level_key(
    train_dir: str, tree_dir: str, above: list[str], level: int, ranker: RankerConfig,
    post_processor: str, work_dir: str, shortlists_dir: str | None = None,
) -> str:  # fmt: skip
    extra = [] if shortlists_dir is None else [fp(shortlists_dir)]
    return stage_key(
        "level", fp(train_dir), fp(tree_dir), [fp(d) for d in above], level,
        ranker.fingerprint(), post_processor, *extra, code=closure_fingerprint(__name__),
    )  # fmt: skip


def load_shortlist(folder: str | Path, level: int) -> sp.csr_matrix | None:
    """Extra parents of ranker level ``level`` from a ``MatcherShortlists`` folder: csr
    (n_docs, K_level), or None when the level has none."""
    meta = read_meta(folder, "MatcherShortlists")
    with meta_fields(folder):
        listed = level in meta["levels"]
    return load_csr(Path(folder) / f"level-{level}.npz") if listed else None


@task(
    name="train-level",
    task_run_name="train-level-{level}",
    cache_key_fn=cache_key("level", _level_key),
    **TASK_OPTIONS,
)
def train_level(
    train_dir: str, tree_dir: str, above: list[str], level: int, ranker: RankerConfig,
    post_processor: str, work_dir: str, shortlists_dir: str | None = None,
) -> str:  # fmt: skip
    """The rankers of one tree level, given the levels above -> ``LevelRankers`` folder.

    ``shortlists_dir``: an external matcher's extra parents per level (XR-Transformer's final
    ranker), or None.
    """
    log = get_run_logger()
    key = _level_key(
        train_dir, tree_dir, above, level, ranker, post_processor, work_dir, shortlists_dir
    )
    with produce(work_dir, "level", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            train, tree = SplitFeatures.load(train_dir), LabelTree.load(tree_dir)
            trained = [load_level(d) for d in above]
            extra = None if shortlists_dir is None else load_shortlist(shortlists_dir, level)
            W = fit_level(train.X, train.Y, tree, level, trained, ranker, post_processor, extra)
            save_level(tmp, W, level)
            log.info(
                "level %d: %d nodes, W nnz %d, %.1f s",
                level, W.shape[1], W.nnz, time.perf_counter() - start,
            )  # fmt: skip
    return str(artifact_dir(work_dir, "level", key))


def _model_key(
    vocab_dir: str, index_dir: str, tree_dir: str, level_dirs: list[str], train_dir: str,
    ranker: RankerConfig, predict: PredictConfig, work_dir: str,
) -> str:  # fmt: skip
    return stage_key(
        "model", fp(vocab_dir), fp(index_dir), fp(tree_dir), [fp(d) for d in level_dirs],
        fp(train_dir), ranker.fingerprint(), predict.fingerprint(),
        code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="assemble-model",
    task_run_name="assemble-model",
    cache_key_fn=cache_key("model", _model_key),
    **TASK_OPTIONS,
)
def assemble_model(
    vocab_dir: str, index_dir: str, tree_dir: str, level_dirs: list[str], train_dir: str,
    ranker: RankerConfig, predict: PredictConfig, work_dir: str,
) -> str:  # fmt: skip
    """Vectorizer + label index + tree + level rankers -> a deployable ``XmcModel`` folder."""
    log = get_run_logger()
    key = _model_key(
        vocab_dir, index_dir, tree_dir, level_dirs, train_dir, ranker, predict, work_dir
    )
    with produce(work_dir, "model", key, log) as tmp:
        if tmp is not None:
            train, tree = SplitFeatures.load(train_dir), LabelTree.load(tree_dir)
            weights = [load_level(d) for d in level_dirs]
            ranker_model = XRLinearModel(ranker, predict).set_levels(
                tree, weights, train.X.shape[1]
            )
            model = XmcModel(
                TfidfVectorizer.load(vocab_dir), LabelIndex.load(index_dir), ranker_model,
                label_counts(train.Y), train.X.shape[0],
            )  # fmt: skip
            model.save(tmp)
    return str(artifact_dir(work_dir, "model", key))


def _eval_key(model_dir: str, split_dir: str, cfg: EvalConfig, work_dir: str) -> str:
    return stage_key(
        "evaluation",
        fp(model_dir),
        fp(split_dir),
        cfg.fingerprint(),
        code=closure_fingerprint(__name__),
    )


@task(
    name="evaluate",
    task_run_name="evaluate",
    cache_key_fn=cache_key("evaluation", _eval_key),
    **TASK_OPTIONS,
)
def evaluate(model_dir: str, split_dir: str, cfg: EvalConfig, work_dir: str) -> str:
    """P@k, nDCG@k, R@k, PSP@k on a featurized split -> folder with ``metrics.json``."""
    log = get_run_logger()
    key = _eval_key(model_dir, split_dir, cfg, work_dir)
    with produce(work_dir, "evaluation", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            metrics = evaluate_model(XmcModel.load(model_dir), SplitFeatures.load(split_dir), cfg)
            write_json(tmp / "metrics.json", metrics)
            log.info(
                "evaluated in %.1f s:\n%s", time.perf_counter() - start, format_metrics(metrics)
            )
    return str(artifact_dir(work_dir, "evaluation", key))
