"""HierarchicalXC (Srinivasan, Rao, Agarwal): a binary label tree by complete-link agglomerative
clustering on label co-occurrence (:mod:`xmc_core.families.hierarchical_xc.hierarchy`), one
logistic classifier per tree node trained on the documents that reach its parent (left / right /
both: the node's two
children each say whether their labels are relevant), and scored prediction: beam search
multiplies the node probabilities down the tree, so every label has a score and P@k is defined
(the report's version predicted hard 0/1 paths). The encoder is TF-IDF itself.
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, RankerConfig, TreeConfig, XmcConfig
from xmc_core.families.hierarchical_xc import NAME
from xmc_core.families.hierarchical_xc.config import HierarchicalXcConfig
from xmc_core.families.hierarchical_xc.hierarchy import build_hierarchy
from xmc_core.families.hierarchical_xc.ranker import (
    HierarchicalXcRanker,
    fit_node_level,
    node_settings,
    only_children,
)
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel
from xmc_core.stages.graph import Runner, Stage


def agglomerative_tree(
    train: SplitFeatures, label_features: LabelFeatures, hxc: HierarchicalXcConfig,
    tree: TreeConfig,
) -> LabelTree:  # fmt: skip
    """The binary co-occurrence tree of the training labels, as a level chain."""
    return build_hierarchy(train.Y, label_features.z, hxc, tree).to_label_tree()


def train_node_level(
    train: SplitFeatures, tree: LabelTree, above: list[LevelRankers], level: int,
    ranker: RankerConfig, post_processor: str,
) -> LevelRankers:  # fmt: skip
    """The node classifiers of tree level ``level`` given the levels above."""
    trained = [a.W for a in above]
    W = fit_node_level(train.X, train.Y, tree, level, trained, ranker, post_processor)
    return LevelRankers(W, level)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree, levels: list[LevelRankers],
    train: SplitFeatures, ranker: RankerConfig, predict: PredictConfig,
) -> XmcModel:  # fmt: skip
    """Vectorizer + label index + tree + node classifiers -> a deployable model."""
    model = HierarchicalXcRanker(ranker, predict)
    model.set_levels(tree, [level.W for level in levels], train.X.shape[1])
    return XmcModel(
        NAME, vectorizer, labels, TfidfEncoder(), model, label_counts(train.Y), train.X.shape[0]
    )


def describe_tree(tree: LabelTree) -> str:
    certain = sum(int(only_children(C).sum()) for C in tree.C)
    return f"depth {tree.depth}, nodes per level {tree.level_sizes()}, {certain:,} only children"


TREE = Stage(
    "agglomerative-tree", agglomerative_tree, LabelTree,
    {"train": SplitFeatures, "label_features": LabelFeatures}, describe=describe_tree,
)  # fmt: skip
LEVEL = Stage(
    "node-level", train_node_level, LevelRankers,
    {"train": SplitFeatures, "tree": LabelTree, "above": LevelRankers},
    describe=lambda r: f"level {r.level}: {r.W.shape[1]} nodes, W nnz {r.W.nnz}",
)  # fmt: skip
MODEL = Stage(
    "model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures},
    describe=lambda m: f"{len(m.labels)} labels, tree depth {m.ranker.tree_.depth}",
)  # fmt: skip


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Tree, the node levels in order, model (the frame adds its evaluation)."""
    ranker, predict = node_settings(cfg.ranker, cfg.predict)
    tree = run(
        TREE, label="agglomerative-tree", train=feats["train"],
        label_features=feats["label_features"], hxc=cfg.hierarchical_xc, tree=cfg.tree,
    )  # fmt: skip
    levels: list[Any] = []
    for t in range(run.value(tree).depth):
        levels.append(
            run(
                LEVEL, label=f"train-level-{t}", train=feats["train"], tree=tree,
                above=list(levels), level=t, ranker=ranker,
                post_processor=predict.post_processor,
            )
        )  # fmt: skip
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=feats["train"],
        ranker=ranker, predict=predict,
    )  # fmt: skip
    return {
        "tree": tree, "model": model,
        "model_train": feats["train"], "model_test": feats["test"],
    }  # fmt: skip
