"""Stages every family shares: the XR ranker levels over a label tree, and evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xmc_core.config import EvalConfig, PredictConfig, RankerConfig, TreeConfig, XmcConfig
from xmc_core.evaluation.diagnostics import Diagnostics, MatcherLevelRecord, describe_diagnostics
from xmc_core.evaluation.metrics import describe_metrics
from xmc_core.evaluation.report import read_json
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.split_features import SplitFeatures
from xmc_core.linear.model import LevelRankers, XRLinearModel, fit_level
from xmc_core.linear.negatives import MatcherShortlists
from xmc_core.linear.tree import LabelTree
from xmc_core.linear.tree_growth import build_with_placed
from xmc_core.linear.zero_shot import text_rankers
from xmc_core.model.xmc_model import ModelRanker, XmcModel
from xmc_core.stages.graph import Runner, Stage
from xmc_core.storage.artifacts import read_meta, write_meta
from xmc_core.storage.atomic import write_json

METRICS_FILE = "metrics.json"


@dataclass(frozen=True)
class Metrics:
    """Metric name -> value (fractions), as ``metrics.json`` beside a ``meta.json``."""

    values: dict[str, float]

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / METRICS_FILE, self.values)
        write_meta(folder, "Metrics", {"n_metrics": len(self.values)})

    @classmethod
    def load(cls, folder: str | Path) -> Metrics:
        read_meta(folder, "Metrics")
        return cls(read_json(Path(folder) / METRICS_FILE))


def build_tree(
    label_features: LabelFeatures, cfg: TreeConfig, split_for_zero_shot: bool = True
) -> LabelTree:
    """Hierarchical balanced k-means over the label features; zero-shot labels, and the labels
    whose row is empty (no term of the vocabulary in their text or documents), are then placed
    in its closest leaves (:func:`~xmc_core.linear.tree_growth.build_with_placed`; a leaf they
    grow past its bound is split unless ``split_for_zero_shot`` is False)."""
    if label_features.zero_shot.size:
        z = label_features.z  # csr
        placed = np.union1d(label_features.zero_shot, np.flatnonzero(np.diff(z.indptr) == 0))
        return build_with_placed(z, placed, cfg, split_for_zero_shot)
    return LabelTree.build(label_features.z, cfg)


def train_level(
    train: SplitFeatures, tree: LabelTree, above: list[LevelRankers], level: int,
    ranker: RankerConfig, post_processor: str, shortlists: MatcherShortlists | None = None,
    leaf_scale: float | None = None,
) -> LevelRankers:  # fmt: skip
    """The rankers of tree level ``level`` given the levels above; ``shortlists``: an external
    matcher's extra parents per level (XR-Transformer's final ranker), or None; ``leaf_scale``:
    where the leaf level's cost search starts (a warm start's champion's scale), None: 1."""
    extra = None if shortlists is None else shortlists.level(level)
    trained = [a.W for a in above]
    W, scale = fit_level(
        train.X, train.Y, tree, level, trained, ranker, post_processor, extra, leaf_scale
    )
    return LevelRankers(W, level, scale)


def zero_shot_rankers(
    train: SplitFeatures, tree: LabelTree, level: LevelRankers, label_features: LabelFeatures,
    ranker: RankerConfig,
) -> LevelRankers:  # fmt: skip
    """The leaf level with the zero-shot labels' rankers made from their texts
    (:func:`~xmc_core.linear.zero_shot.text_rankers`; one scale per block of the text's space,
    ``label_features.text_blocks``)."""
    if label_features.text is None:
        return level
    W = text_rankers(
        train.X,
        train.Y,
        tree,
        level.W,
        label_features.text,
        label_features.zero_shot,
        ranker,
        label_features.text_blocks,
    )
    return LevelRankers(W, level.level, level.cost_scale)


def diagnose(
    model: ModelRanker, train: SplitFeatures, test: SplitFeatures,
    checkpoints: list[MatcherLevelRecord] | None, eval_cfg: EvalConfig, max_docs: int,
) -> Diagnostics:  # fmt: skip
    """Diagnostics of a trained model on its encoded splits (``checkpoints``: the matcher
    levels of an XR-Transformer, for their loss history)."""
    return Diagnostics.compute(
        model.ranker, model.label_counts, {"train": train, "test": test}, eval_cfg,
        [c.folder for c in checkpoints or []], max_docs, model.calibrator,
    )  # fmt: skip


def level_ranker(
    tree: LabelTree, levels: list[LevelRankers], train: SplitFeatures, ranker: RankerConfig,
    predict: PredictConfig,
) -> XRLinearModel:  # fmt: skip
    """The XR ranker assembled from its tree and its levels, trained one task each."""
    return XRLinearModel(ranker, predict).set_levels(
        tree, [level.W for level in levels], train.X.shape[1], levels[-1].cost_scale
    )


def evaluate(model: XmcModel, split: SplitFeatures, cfg: EvalConfig) -> Metrics:
    """P@k, nDCG@k, R@k, PSP@k of ``model`` on an encoded split."""
    return Metrics(model.evaluate(split, cfg))


def describe_level(r: LevelRankers) -> str:
    """The log line of a stage that makes a level's rankers."""
    return f"level {r.level}: {r.W.shape[1]} nodes, W nnz {r.W.nnz}"


TREE = Stage(
    "tree", build_tree, LabelTree, {"label_features": LabelFeatures},
    describe=lambda t: f"nodes per level {t.level_sizes()}",
)  # fmt: skip
LEVEL = Stage(
    "level", train_level, LevelRankers,
    {"train": SplitFeatures, "tree": LabelTree, "above": LevelRankers,
     "shortlists": MatcherShortlists},
    describe=describe_level,
)  # fmt: skip
ZERO_SHOT = Stage(
    "zero-shot", zero_shot_rankers, LevelRankers,
    {"train": SplitFeatures, "tree": LabelTree, "level": LevelRankers,
     "label_features": LabelFeatures},
    describe=describe_level,
)  # fmt: skip
DIAGNOSE = Stage(
    "diagnostics", diagnose, Diagnostics,
    {"model": ModelRanker, "train": SplitFeatures, "test": SplitFeatures,
     "checkpoints": MatcherLevelRecord},
    describe=lambda d: describe_diagnostics(d.report),
)  # fmt: skip
EVALUATE = Stage(
    "evaluation", evaluate, Metrics, {"model": XmcModel, "split": SplitFeatures},
    describe=lambda m: describe_metrics(m.values),
)  # fmt: skip


def evaluated(run: Runner, outs: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """A family graph's handles ``outs`` (``model``, ``model_train``, ``model_test``, ...)
    with ``evaluation`` added: the model's test metrics. Every family graph ends here, in the
    frame (:func:`xmc_core.families.train.family_graph`, and the ensemble for its members)."""
    model, test = outs["model"], outs["model_test"]
    return {**outs, "evaluation": run(EVALUATE, label="evaluate", model=model, split=test,
                                      cfg=cfg.eval)}  # fmt: skip


def ranker_levels(
    run: Runner,
    train: Any,
    tree: Any,
    cfg: XmcConfig,
    shortlists: Any = None,
    prefix: str = "train",
    leaf_scale: float | None = None,
) -> list[Any]:
    """One LEVEL call per tree level, coarse to fine (each needs the ones above);
    ``leaf_scale``: where the leaf level's cost search starts (a warm start's champion's)."""
    levels: list[Any] = []
    depth = run.value(tree).depth
    for t in range(depth):
        kept = {"leaf_scale": leaf_scale} if leaf_scale is not None and t == depth - 1 else {}
        levels.append(
            run(
                LEVEL, label=f"{prefix}-level-{t}", train=train, tree=tree,
                above=list(levels), level=t, ranker=cfg.ranker,
                post_processor=cfg.predict.post_processor, shortlists=shortlists, **kept,
            )
        )  # fmt: skip
    return levels
