"""DeepXML / Astec (Dahiya et al., WSDM 2021) on the TF-IDF rows (:mod:`xmc_core.families.astec`).

Stages after featurization: the meta-labels (balanced 2-means leaves over the label features),
module 1 (the encoder trained on them: the model's encoder), the encoded splits, modules 2-4
(ANN index over label vectors, shortlist classifier, fusion weight: the model's ranker), the
model and its evaluation. The validation rows that choose the best epochs and ``beta`` are a
seeded part of the training split (``astec.val_fraction``); the test split is only encoded
and evaluated.
"""

from __future__ import annotations

from typing import Any

from xmc_core.config import PredictConfig, TreeConfig, XmcConfig
from xmc_core.corpus.schema import SPLITS
from xmc_core.families.astec import NAME
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.parts import AstecEncoder, AstecRanker
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts
from xmc_core.model.xmc_model import XmcModel
from xmc_core.stages.graph import Runner, Stage
from xmc_core.wording import counted


def meta_labels(label_features: LabelFeatures, tree: TreeConfig, astec: AstecConfig) -> LabelTree:
    """Module 1's meta-labels (:func:`xmc_core.families.astec.surrogate.meta_labels`)."""
    from xmc_core.families.astec import surrogate

    return surrogate.meta_labels(label_features, tree, astec)


def train_encoder(train: SplitFeatures, meta: LabelTree, astec: AstecConfig) -> AstecEncoder:
    """Module 1: the encoder trained on the meta-labels of the training split."""
    from xmc_core.families.astec import surrogate

    return surrogate.train_surrogate(train, meta, astec)


def encode_split(split: SplitFeatures, encoder: AstecEncoder, name: str) -> SplitFeatures:
    """A split as the model's input: X = the encodings csr (n, D) (``name``: the split)."""
    return split.with_X(encoder.transform(split.X))


def train_ranker(train: SplitFeatures, astec: AstecConfig, predict: PredictConfig) -> AstecRanker:
    """Modules 2-4 on the encoded training split."""
    return AstecRanker(astec, predict).fit(train.X, train.Y)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, encoder: AstecEncoder, ranker: AstecRanker,
    train: SplitFeatures,
) -> XmcModel:  # fmt: skip
    """Vectorizer + labels + the encoder + the shortlist ranker."""
    n = train.X.shape[0]
    return XmcModel(NAME, vectorizer, labels, encoder, ranker, label_counts(train.Y), n)


def describe_encoder(encoder: AstecEncoder) -> str:
    record = encoder.record
    return (
        f"E {encoder.E.shape}, {record.get('meta_labels', '?')} meta-labels, "
        f"{counted(len(record.get('history', [])), 'epoch')} (best {record.get('best_epoch')}), "
        f"{record.get('stopped', '')}"
    )


def describe_ranker(ranker: AstecRanker) -> str:
    record = ranker.record_
    return (
        f"{ranker.shortlister_.labels.kind} index of {len(ranker.shortlister_.labels.ids):,} "
        f"labels, beta {ranker.beta_:.2f}, "
        f"{counted(len(record.get('history', [])), 'epoch')} (best {record.get('best_epoch')})"
    )


META = Stage(
    "astec-meta-labels", meta_labels, LabelTree, {"label_features": LabelFeatures},
    describe=lambda t: f"{t.level_sizes()[-2] if t.depth > 1 else 1} meta-labels",
)  # fmt: skip
ENCODER = Stage(
    "astec-encoder", train_encoder, AstecEncoder, {"train": SplitFeatures, "meta": LabelTree},
    describe=describe_encoder,
)  # fmt: skip
ENCODE = Stage(
    "astec-encoded", encode_split, SplitFeatures,
    {"split": SplitFeatures, "encoder": AstecEncoder}, describe=lambda s: f"X {s.X.shape}",
)  # fmt: skip
RANKER = Stage(
    "astec-ranker", train_ranker, AstecRanker, {"train": SplitFeatures},
    describe=describe_ranker,
)  # fmt: skip
MODEL = Stage(
    "astec-model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "encoder": AstecEncoder,
     "ranker": AstecRanker, "train": SplitFeatures},
    describe=lambda m: f"{len(m.labels)} labels",
)  # fmt: skip


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Meta-labels, module 1, the encoded splits, modules 2-4, model."""
    c = cfg.astec
    meta = run(META, label="astec-meta-labels", label_features=feats["label_features"],
               tree=cfg.tree, astec=c)  # fmt: skip
    encoder = run(ENCODER, label="astec-encoder", train=feats["train"], meta=meta, astec=c)
    encoded = {
        s: run(ENCODE, label=f"astec-encode-{s}", split=feats[s], encoder=encoder, name=s)
        for s in SPLITS
    }
    ranker = run(RANKER, label="astec-ranker", train=encoded["train"], astec=c,
                 predict=cfg.predict)  # fmt: skip
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], encoder=encoder, ranker=ranker, train=feats["train"],
    )  # fmt: skip
    return {
        "meta_labels": meta, "encoder": encoder, "ranker": ranker, "model": model,
        "model_train": encoded["train"],
        "model_test": encoded["test"],
    }  # fmt: skip
