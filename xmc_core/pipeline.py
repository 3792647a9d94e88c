"""The whole training pipeline in one process (the ``xmc`` CLI; the flows run the same stages
as cached tasks): featurize a dataset folder, build the tree, train XR-Linear or
XR-Transformer, evaluate."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import EvalConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import InputError
from xmc_core.features import stages
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.metrics import evaluate
from xmc_core.text_model import XmcModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Featurized:
    """Everything featurization produces for one dataset."""

    vectorizer: TfidfVectorizer
    labels: LabelIndex
    label_features: LabelFeatures
    train: SplitFeatures
    test: SplitFeatures


def featurize_corpus(corpus: Corpus, cfg: XmcConfig) -> Featurized:
    """All featurization stages, partition by partition, in this process."""
    start = time.perf_counter()
    refs = {s: corpus.partitions(s) for s in ("train", "test")}
    counts = {s: [stages.count_partition(corpus, r, cfg.tokenizer) for r in refs[s]] for s in refs}
    vec = stages.fit_vectorizer(counts["train"], cfg.tfidf, cfg.tokenizer)
    index = stages.fit_label_index(corpus)
    parts = {
        s: [
            stages.featurize_partition(corpus, r, c, vec, index)
            for r, c in zip(refs[s], counts[s], strict=True)
        ]
        for s in refs
    }
    z = stages.build_label_features(
        parts["train"], cfg.label_features, vec, index, corpus.label_texts()
    )
    log.info("featurized in %.1f s: %d features", time.perf_counter() - start, vec.n_features)
    return Featurized(
        vec, index, z, SplitFeatures.concat(parts["train"]), SplitFeatures.concat(parts["test"])
    )


def label_counts(Y: sp.csr_matrix) -> np.ndarray:
    """Training documents per label: (n_labels,) int64."""
    return np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.int64)


def train_model(feats: Featurized, cfg: XmcConfig, corpus: Corpus | None = None) -> XmcModel:
    """XR-Linear (label tree on the label features, then the rankers), or XR-Transformer
    (``model.kind``; needs the ``corpus`` for its texts)."""
    start = time.perf_counter()
    counts = label_counts(feats.train.Y)
    n_train = feats.train.X.shape[0]
    if cfg.model.kind == "xr-transformer":
        from xmc_core.transformer.pipeline import train_transformer

        if corpus is None or corpus.kind != "text":
            raise InputError(
                None if corpus is None else corpus.path,
                "XR-Transformer needs a raw-text corpus",
                "pass a text dataset, or set model.kind=xr-linear",
            )
        ranker, embedding = train_transformer(
            feats.train.X, feats.train.Y, feats.label_features.z, corpus, cfg
        )
        return XmcModel(feats.vectorizer, feats.labels, ranker, counts, n_train, embedding)
    tree = LabelTree.build(feats.label_features.z, cfg.tree)
    log.info("label tree %s in %.1f s", tree.level_sizes(), time.perf_counter() - start)
    ranker = XRLinearModel(cfg.ranker, cfg.predict).fit(feats.train.X, feats.train.Y, tree)
    log.info("trained XR-Linear in %.1f s", time.perf_counter() - start)
    return XmcModel(feats.vectorizer, feats.labels, ranker, counts, n_train)


def model_split(model: XmcModel, corpus: Corpus, split: str, feats: SplitFeatures) -> SplitFeatures:
    """``feats`` (TF-IDF of ``split``) as the model's input: with the embeddings of the texts
    appended for an XR-Transformer model."""
    if model.embedding is None:
        return feats
    texts = corpus.read_split(split, ["text"]).column("text")
    X = model.features(feats.X, texts)
    return SplitFeatures(X, feats.Y, feats.doc_ids, feats.unknown_labels)


def evaluate_model(
    model: XmcModel,
    split: SplitFeatures,
    cfg: EvalConfig,
    beam_size: int | None = None,
    topk: int | None = None,
) -> dict[str, float]:
    """P@k, nDCG@k, R@k and PSP@k of ``model`` on a featurized split."""
    k = max([*cfg.ks, topk or model.ranker.predict_cfg.topk])
    scores = model.predict_features(split.X, topk=k, beam_size=beam_size)
    return evaluate(split.Y, scores, cfg, model.label_counts, model.n_train_docs)


def featurize_split(corpus: Corpus, split: str, model: XmcModel) -> SplitFeatures:
    """One split of a dataset folder as a trained model's input (its vectorizer and labels;
    its encoder too for XR-Transformer)."""
    tok = model.vectorizer.tokenizer
    parts = [
        stages.featurize_partition(
            corpus, ref, stages.count_partition(corpus, ref, tok), model.vectorizer, model.labels
        )
        for ref in corpus.partitions(split)
    ]
    return model_split(model, corpus, split, SplitFeatures.concat(parts))
