"""XR-Linear (PECOS): a balanced k-means label tree on the label features, one linear ranker
per tree level trained coarse to fine, beam search to predict; the encoder is TF-IDF itself."""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, RankerConfig, XmcConfig
from xmc_core.families.common import TREE, level_ranker, ranker_levels
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
) -> XmcModel:  # fmt: skip
    """Vectorizer + label index + tree + level rankers -> a deployable model."""
    model = level_ranker(tree, levels, train, ranker, predict)
    return XmcModel(
        NAME, vectorizer, labels, TfidfEncoder(), model, label_counts(train.Y), train.X.shape[0]
    )


MODEL = Stage(
    "model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures},
    describe=lambda m: f"{len(m.labels)} labels, tree {m.ranker.tree_.level_sizes()}",
)  # fmt: skip


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Tree, the levels in order, model (the frame adds its evaluation)."""
    tree = run(TREE, label="label-tree", label_features=feats["label_features"], cfg=cfg.tree)
    levels = ranker_levels(run, feats["train"], tree, cfg)
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=feats["train"],
        ranker=cfg.ranker, predict=cfg.predict,
    )  # fmt: skip
    return {
        "tree": tree, "model": model,
        "model_train": feats["train"], "model_test": feats["test"],
    }  # fmt: skip
