"""NeuralXC (Srinivasan, Rao, Agarwal): input and label autoencoders with a regressor between
their codes (stages in :mod:`.graph`, section in :mod:`.config`, network and ranker beside)."""

from __future__ import annotations

from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.model.contract import Family, Lazy

NAME = "neural_xc"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.neural_xc.graph:graph"),
    description="NeuralXC: input and label autoencoders with a regressor between their codes, "
    "one sigmoid output per label (a baseline)",
    section=NeuralXcConfig,
    parts={"NeuralXcRanker": "xmc_core.families.neural_xc.ranker:NeuralXcRanker"},
    contract_settings=(  # the reference widths and lr need more steps than 19 batches an epoch
        "neural_xc.input_max_features=2000",
        "neural_xc.input_hidden=[256,128]",
        "neural_xc.input_code=64",
        "neural_xc.batch_size=16",
        "neural_xc.lr=0.001",
        "neural_xc.label_prior_bias=true",
        "neural_xc.epochs=30",
        "neural_xc.patience=30",
        "neural_xc.threads=1",
    ),
    config_position=6,
    sections=("tokenizer", "tfidf", "predict", "neural_xc", "eval"),
    requirements=("torch", "safetensors"),
)
