"""XR-Linear (PECOS): a balanced k-means label tree, one linear ranker per level (the
family's stages in :mod:`.graph`)."""

from __future__ import annotations

from xmc_core.model.contract import Family, Lazy

NAME = "xr_linear"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.xr_linear.graph:graph"),
    description="XR-Linear: TF-IDF, balanced k-means label tree, one linear ranker per level",
    sections=("tokenizer", "tfidf", "label_features", "tree", "ranker", "predict", "eval"),
    warm_start=True,
    zero_shot=True,
)
