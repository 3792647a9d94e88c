"""NeuralXC (Srinivasan, Rao, Agarwal; :mod:`xmc_core.families.neural_xc`): an autoencoder on
the TF-IDF input, one on the multi-hot labels and a regressor between their codes, trained together
(``alpha`` x input reconstruction + ``beta`` x label reconstruction + BCE through the label
decoder); dense over every label. The model's encoder is TF-IDF itself and its ranker the
network (:class:`~xmc_core.families.neural_xc.ranker.NeuralXcRanker`). A baseline, reported as is.
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, XmcConfig
from xmc_core.families.neural_xc import NAME
from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.neural_xc.ranker import NeuralXcRanker
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import TfidfEncoder, XmcModel
from xmc_core.stages.graph import Runner, Stage


def train_network(
    train: SplitFeatures, neural_xc: NeuralXcConfig, predict: PredictConfig
) -> NeuralXcRanker:
    """The network trained on the training split (its memory checked first)."""
    return NeuralXcRanker(neural_xc, predict).fit(train.X, train.Y)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, ranker: NeuralXcRanker, train: SplitFeatures
) -> XmcModel:
    """Vectorizer + labels + TF-IDF (encoder) + the network (ranker)."""
    n = train.X.shape[0]
    return XmcModel(NAME, vectorizer, labels, TfidfEncoder(), ranker, label_counts(train.Y), n)


TRAIN = Stage(
    "neural-xc-network", train_network, NeuralXcRanker, {"train": SplitFeatures},
    describe=lambda r: r.describe(),
)  # fmt: skip
MODEL = Stage(
    "neural-xc-model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "ranker": NeuralXcRanker,
     "train": SplitFeatures},
    describe=lambda m: f"{len(m.labels)} labels, dense",
)  # fmt: skip


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """The network on the TF-IDF of the training split and the model (the frame adds its
    evaluation)."""
    network = run(
        TRAIN, label="neural-xc-network", train=feats["train"], neural_xc=cfg.neural_xc,
        predict=cfg.predict,
    )  # fmt: skip
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], ranker=network, train=feats["train"],
    )  # fmt: skip
    return {
        "network": network, "model": model,
        "model_train": feats["train"], "model_test": feats["test"],
    }  # fmt: skip
