"""XR-Linear (PECOS): a balanced k-means label tree on the label features, one linear ranker
per tree level trained coarse to fine, beam search to predict; the encoder is TF-IDF itself.
It can start warm from a champion (:mod:`xmc_core.families.warm`): the champion's tree grown by
the new labels, the leaf cost search started from its scale."""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, RankerConfig, XmcConfig
from xmc_core.families.common import TREE, ZERO_SHOT, level_ranker, ranker_levels
from xmc_core.families.featurize import zero_shot_on
from xmc_core.families.warm import TREE_WARM, WarmHandles, start_record
from xmc_core.families.xr_linear import NAME
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel
from xmc_core.stages.graph import Runner, Stage


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree, levels: list[LevelRankers],
    train: SplitFeatures, ranker: RankerConfig, predict: PredictConfig,
    base_tree: LabelTree | None = None, start: dict[str, Any] | None = None,
) -> XmcModel:  # fmt: skip
    """Vectorizer + label index + tree + level rankers -> a deployable model; ``base_tree`` and
    ``start``: a warm start's champion tree and record (what was reused is added to it)."""
    model = level_ranker(tree, levels, train, ranker, predict)
    if start is not None and base_tree is not None:
        scale = start.get("leaf_cost_scale")
        start = start_record(start, vectorizer, labels, tree, base_tree, scale)
    return XmcModel(
        NAME, vectorizer, labels, TfidfEncoder(), model, label_counts(train.Y), train.X.shape[0],
        start,
    )  # fmt: skip


MODEL = Stage(
    "model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures, "base_tree": LabelTree},
    describe=lambda m: f"{len(m.labels)} labels, tree {m.ranker.tree_.level_sizes()}",
)  # fmt: skip


def graph(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, warm: WarmHandles | None = None
) -> dict[str, Any]:
    """Tree (the champion's, grown, when ``warm``), the levels in order, model (the frame adds
    its evaluation)."""
    z = feats["label_features"]
    if warm is None:
        tree = run(TREE, label="label-tree", label_features=z, cfg=cfg.tree)
        levels = ranker_levels(run, feats["train"], tree, cfg)
        extra: dict[str, Any] = {}
    else:
        tree = run(TREE_WARM, label="grow-label-tree", label_features=z, base=warm.tree,
                   cfg=cfg.tree)  # fmt: skip
        levels = ranker_levels(run, feats["train"], tree, cfg, leaf_scale=warm.leaf_scale)
        start = {**warm.start, "leaf_cost_scale": warm.leaf_scale}
        extra = {"base_tree": warm.tree, "start": start}
    if "corpus" in feats and zero_shot_on(cfg, run.value(feats["corpus"])):  # not matrices
        levels[-1] = run(ZERO_SHOT, label="zero-shot-rankers", train=feats["train"], tree=tree,
                         level=levels[-1], label_features=z, ranker=cfg.ranker)  # fmt: skip
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=feats["train"],
        ranker=cfg.ranker, predict=cfg.predict, **extra,
    )  # fmt: skip
    return {
        "tree": tree, "model": model,
        "model_train": feats["train"], "model_test": feats["test"],
    }  # fmt: skip
