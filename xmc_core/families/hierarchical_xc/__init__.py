"""HierarchicalXC (Srinivasan, Rao, Agarwal): a binary complete-link co-occurrence label tree,
one logistic classifier per node, probabilities multiplied down the tree (stages in
:mod:`.graph`, section in :mod:`.config`, parts beside them)."""

from __future__ import annotations

from xmc_core.families.hierarchical_xc.config import HierarchicalXcConfig
from xmc_core.model.contract import Family, Lazy

NAME = "hierarchical_xc"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.hierarchical_xc.graph:graph"),
    description="HierarchicalXC: TF-IDF, binary complete-link co-occurrence label tree, "
    "one logistic classifier per node, probabilities multiplied down the tree",
    section=HierarchicalXcConfig,
    parts={"HierarchicalXcRanker": "xmc_core.families.hierarchical_xc.ranker:HierarchicalXcRanker"},
    contract_settings=(  # its preset's node classifiers
        "ranker.loss=logistic",
        "ranker.Cp=8",
        "ranker.Cn=8",
        "predict.post_processor=sigmoid",
    ),
    config_position=4,
    sections=(
        "tokenizer",
        "tfidf",
        "label_features",
        "tree",
        "hierarchical_xc",
        "ranker",
        "predict",
        "eval",
    ),
)
