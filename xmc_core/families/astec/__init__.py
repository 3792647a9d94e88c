"""DeepXML / Astec (Dahiya et al., WSDM 2021): a TF-IDF-weighted bag of embeddings trained on
meta-labels, ANN shortlists over label vectors, a shortlist classifier (stages in :mod:`.graph`,
section in :mod:`.config`, parts beside them)."""

from __future__ import annotations

from xmc_core.families.astec.config import AstecConfig
from xmc_core.model.contract import Family, Lazy

NAME = "astec"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.astec.graph:graph"),
    description="DeepXML / Astec: TF-IDF-weighted bag of embeddings trained on meta-labels, "
    "ANN shortlists over label vectors, a shortlist classifier fused with the ANN similarity",
    section=AstecConfig,
    parts={
        "AstecEncoder": "xmc_core.families.astec.parts:AstecEncoder",
        "AstecRanker": "xmc_core.families.astec.parts:AstecRanker",
    },
    contract_settings=(
        "astec.embedding_dim=32",
        "astec.surrogate_epochs=10",
        "astec.classifier_epochs=10",
        "astec.batch_size=16",
        "astec.lr=0.01",
        "astec.hnsw_m=8",
        "astec.ef_construction=40",
        "astec.ef_search=40",
        "astec.shortlist_size=20",
        "astec.n_random=10",
        "astec.val_fraction=0.1",
        "astec.threads=1",
    ),
    config_position=5,
    sections=("tokenizer", "tfidf", "label_features", "tree", "predict", "astec", "eval"),
    requirements=("faiss-cpu",),
)
