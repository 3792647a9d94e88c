"""XML-CNN (Liu et al. 2017): a CNN over word embeddings with dynamic max pooling, flat or the
matcher of an XR tree (stages in :mod:`.graph`, section in :mod:`.config`; vocabulary, word
vectors, network, trainer and saved parts beside them)."""

from __future__ import annotations

from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.model.contract import Family, Lazy

NAME = "xml_cnn"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.xml_cnn.graph:graph"),
    description="XML-CNN: a CNN over word embeddings with dynamic max pooling and a "
    "bottleneck, one sigmoid output per label (flat) or the matcher of an XR tree (xr)",
    section=XmlCnnConfig,
    parts={
        "CnnFeatures": "xmc_core.families.xml_cnn.parts:CnnFeatures",
        "CnnOutputRanker": "xmc_core.families.xml_cnn.parts:CnnOutputRanker",
    },
    contract_settings=(
        "xml_cnn.placement=flat",
        "xml_cnn.embedding_init=random",
        "xml_cnn.embedding_dim=64",
        "xml_cnn.num_filters=32",
        "xml_cnn.hidden_dim=128",
        "xml_cnn.max_length=64",
        "xml_cnn.epochs=10",
        "xml_cnn.batch_size=16",
        "xml_cnn.lr=0.003",
        "xml_cnn.dropout=0.2",
        "xml_cnn.threads=1",
    ),
    config_position=1,
    sections=(
        "tokenizer",
        "tfidf",
        "label_features",
        "tree",
        "ranker",
        "predict",
        "xml_cnn",
        "eval",
    ),
    needs_text=True,
    requirements=("torch", "safetensors"),
)
