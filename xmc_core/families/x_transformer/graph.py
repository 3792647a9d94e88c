"""X-Transformer (Chang et al. 2020) as a preset on XR-Transformer's parts: semantic label
indexing (PIFA over TF-IDF, PIFA over the pretrained encoder's embeddings, or label-text
TF-IDF), a tree cut at its finest cluster level, the transformer matcher fine-tuned once at
that resolution (XR-Transformer's matcher stage and hand-off, one level), and per-label linear
models on ``[TF-IDF, weight * embedding]`` scored only inside the matcher's top clusters (see
:mod:`xmc_core.families.x_transformer.single_resolution`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from xmc_core.config import (
    EncoderConfig,
    LabelFeaturesConfig,
    MatcherConfig,
    PredictConfig,
    RankerConfig,
    TreeConfig,
    XmcConfig,
)
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import SPLITS
from xmc_core.errors import InputError
from xmc_core.families.common import ZERO_SHOT, build_tree, level_ranker
from xmc_core.families.featurize import LABEL_FEATURES, zero_shot_on
from xmc_core.families.x_transformer import NAME
from xmc_core.families.x_transformer.single_resolution import (
    CLUSTER_LEVEL,
    check_bias,
    cluster_tree,
    fit_label_level,
    head_as_level,
    neural_pifa,
    single_level_matcher,
)
from xmc_core.families.x_transformer.zero_shot import (
    label_texts,
    neural_text_rows,
    ranker_text_features,
)
from xmc_core.families.xr_transformer.graph import (
    EMBED,
    matcher_graph,
    matcher_predictions,
    tokenize_splits,
    transformer_model,
)
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import LevelRankers
from xmc_core.linear.tree import LabelTree
from xmc_core.model.xmc_model import XmcModel
from xmc_core.neural import resolve_device
from xmc_core.stages.graph import Runner, Stage
from xmc_core.transformer.encoder import TextEncoder
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.onnx_int8 import embed_on
from xmc_core.transformer.ranker import EmbeddedSplit
from xmc_core.transformer.tokens import TokenizedTexts

log = logging.getLogger(__name__)
TFIDF_INDEXINGS = {"pifa_tfidf": "pifa", "label_text": "label_text"}
"""``x_transformer.indexing`` -> the featurize graph's ``label_features.kind`` that computes it."""


def neural_label_features(
    tokens: TokenizedTexts, train: SplitFeatures, encoder: EncoderConfig, matcher: MatcherConfig,
    label_features: LabelFeatures | None = None, corpus: Corpus | None = None,
    index: LabelIndex | None = None,
) -> LabelFeatures:  # fmt: skip
    """PIFA over the pretrained encoder's embeddings of every training document (on
    ``matcher.device``, ``matcher.embed_batch_size`` at a time); with zero-shot labels
    (``label_features`` has them; ``corpus`` and ``index`` then given), their rows are the
    encoder's embeddings of their texts (:mod:`.zero_shot`)."""
    model = TextEncoder.load(encoder)
    device = resolve_device(matcher.device)
    what = "x-transformer: embedding the training documents for PIFA"
    z = neural_pifa(embed_on(model, tokens, device, matcher, what), train.Y)
    if label_features is None or corpus is None or index is None:
        return LabelFeatures(z, "pifa_neural")
    texts = label_texts(corpus, index)
    return neural_text_rows(z, label_features, texts, model, encoder, matcher)


def clusters(label_features: LabelFeatures, cfg: TreeConfig) -> LabelTree:
    """The label tree over ``label_features``, cut at its finest cluster level. Zero-shot
    labels split no cluster: the matcher's clusters, and so its training, are those of the
    labels with documents alone (``build_tree``'s ``split_for_zero_shot``)."""
    return cluster_tree(build_tree(label_features, cfg, split_for_zero_shot=False))


def head_level(
    checkpoint: MatcherCheckpoint, vectorizer: TfidfVectorizer, ranker: RankerConfig,
    matcher: MatcherConfig,
) -> LevelRankers:  # fmt: skip
    """Ranker level 0: the matcher's head on the ranker's input ``[TF-IDF, embedding]``."""
    W, b = checkpoint.head().arrays()
    level = head_as_level(W, b, vectorizer.n_features, matcher.embedding_weight, ranker.bias)
    return LevelRankers(level, 0)


def label_level(
    train: EmbeddedSplit, tree: LabelTree, checkpoint: MatcherCheckpoint, ranker: RankerConfig,
    matcher: MatcherConfig,
) -> LevelRankers:  # fmt: skip
    """Ranker level 1: the per-label models, with the matcher's top ``matcher.beam_size``
    clusters of every training document as its (``man``) negatives."""
    assert train.E is not None
    matched = matcher_predictions(checkpoint, train.E, matcher.beam_size)
    return LevelRankers(fit_label_level(train.X, train.Y, tree, matched, ranker), 1)


def assemble(
    vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree, levels: list[LevelRankers],
    train: SplitFeatures, checkpoint: MatcherCheckpoint, ranker: RankerConfig,
    predict: PredictConfig, matcher: MatcherConfig,
) -> XmcModel:  # fmt: skip
    """Vectorizer + label index + the cluster tree's two levels + the matcher's encoder."""
    model = level_ranker(tree, levels, train, ranker, predict)
    return transformer_model(NAME, vectorizer, labels, model, train, checkpoint, matcher)


NEURAL_LABEL_FEATURES = Stage(
    "neural-label-features", neural_label_features, LabelFeatures,
    {"tokens": TokenizedTexts, "train": SplitFeatures, "label_features": LabelFeatures,
     "corpus": Corpus, "index": LabelIndex},
    describe=lambda z: f"{z.kind}: Z {z.z.shape}",
)  # fmt: skip
RANKER_TEXT = Stage(
    "ranker-text-features", ranker_text_features, LabelFeatures,
    {"label_features": LabelFeatures, "corpus": Corpus, "index": LabelIndex,
     "checkpoint": MatcherCheckpoint},
    describe=lambda z: f"text rows {z.z.shape}, {z.zero_shot.size} zero-shot labels",
)  # fmt: skip
CLUSTERS = Stage(
    "cluster-tree", clusters, LabelTree, {"label_features": LabelFeatures},
    describe=lambda t: f"{t.level_sizes()[0]:,} clusters of at most "
    f"{int(np.bincount(t.C[1].indices).max())} labels",
)  # fmt: skip
HEAD_LEVEL = Stage(
    "matcher-head-level", head_level, LevelRankers,
    {"checkpoint": MatcherCheckpoint, "vectorizer": TfidfVectorizer},
    describe=lambda r: f"the matcher's head as level 0: {r.W.shape[1]} clusters",
)  # fmt: skip
LABEL_LEVEL = Stage(
    "label-level", label_level, LevelRankers,
    {"train": EmbeddedSplit, "tree": LabelTree, "checkpoint": MatcherCheckpoint},
    describe=lambda r: f"{r.W.shape[1]} labels, W nnz {r.W.nnz}",
)  # fmt: skip
MODEL = Stage(
    "x-transformer-model", assemble, XmcModel,
    {"vectorizer": TfidfVectorizer, "labels": LabelIndex, "tree": LabelTree,
     "levels": LevelRankers, "train": SplitFeatures, "checkpoint": MatcherCheckpoint},
    describe=lambda m: f"{len(m.labels)} labels",
)  # fmt: skip


def index_features(run: Runner, feats: dict[str, Any], tokens: Any, cfg: XmcConfig) -> Any:
    """The label features ``x_transformer.indexing`` names: the featurize graph's own when
    ``label_features.kind`` already computes them, else one more stage."""
    indexing = cfg.x_transformer.indexing
    corpus = feats["corpus"]
    zero = zero_shot_on(cfg, run.value(corpus))
    if indexing == "pifa_neural":
        texts = {"label_features": feats["label_features"], "corpus": corpus,
                 "index": feats["label_index"]} if zero else {}  # fmt: skip
        return run(
            NEURAL_LABEL_FEATURES, tokens=tokens, train=feats["train"], encoder=cfg.encoder,
            matcher=cfg.matcher, **texts,
        )  # fmt: skip
    kind = TFIDF_INDEXINGS[indexing]
    if cfg.label_features.kind == kind:
        return feats["label_features"]
    if kind == "label_text" and run.value(corpus).label_texts() is None:
        raise InputError(
            run.value(corpus).path,
            "x_transformer.indexing=label_text needs label texts; this corpus has no "
            "labels.parquet",
            "re-ingest it with label texts, or set x_transformer.indexing=pifa_tfidf",
        )
    return run(
        LABEL_FEATURES, label=f"label-features-{indexing}", parts=[feats["train"]],
        vectorizer=feats["vectorizer"], index=feats["label_index"],
        corpus=corpus if kind == "label_text" or zero else None,
        cfg=LabelFeaturesConfig(kind=kind, label_text_weight=cfg.label_features.label_text_weight),
        **({"zero_shot": True} if zero else {}),
    )  # fmt: skip


def zero_shot_level(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, checkpoint: Any, train: Any, tree: Any,
    level: Any,
) -> Any:  # fmt: skip
    """The label level with the zero-shot labels' models made from their texts in the
    ranker's space (:mod:`.zero_shot`)."""
    text = run(
        RANKER_TEXT, label_features=feats["label_features"], corpus=feats["corpus"],
        index=feats["label_index"], checkpoint=checkpoint, matcher=cfg.matcher,
    )  # fmt: skip
    return run(
        ZERO_SHOT, label="zero-shot-rankers", train=train, tree=tree, level=level,
        label_features=text, ranker=cfg.ranker,
    )  # fmt: skip


def graph(run: Runner, feats: dict[str, Any], cfg: XmcConfig) -> dict[str, Any]:
    """Tokens, label features of the indexing, the cluster tree, the matcher (one level, in
    the ``matcher`` hand-off), embeddings, the two ranker levels, model."""
    check_bias(cfg.ranker.bias)  # before any work
    tokens = tokenize_splits(run, feats["corpus"], cfg.encoder)
    z = index_features(run, feats, tokens["train"], cfg)
    tree = run(CLUSTERS, label="cluster-tree", label_features=z, cfg=cfg.tree)
    matcher = single_level_matcher(run.value(tree), cfg.matcher)
    log.info(
        "x-transformer: the matcher trains once, on %s clusters (%s labels, indexing %s)",
        f"{matcher.max_clusters:,}", f"{run.value(tree).n_labels:,}", cfg.x_transformer.indexing,
    )  # fmt: skip
    checkpoints = run.handoff(
        "matcher", matcher_graph, tokens=tokens["train"], train=feats["train"], tree=tree,
        encoder=cfg.encoder, matcher=matcher,
    )  # fmt: skip
    last = checkpoints[CLUSTER_LEVEL]
    embedded = {
        s: run(
            EMBED, label=f"embed-{s}", split=feats[s], tokens=tokens[s], checkpoint=last,
            name=s, matcher=matcher,
        )
        for s in SPLITS
    }  # fmt: skip
    levels = [
        run(
            HEAD_LEVEL, label="ranker-level-0", checkpoint=last, vectorizer=feats["vectorizer"],
            ranker=cfg.ranker, matcher=matcher,
        ),
        run(
            LABEL_LEVEL, label="ranker-level-1", train=embedded["train"], tree=tree,
            checkpoint=last, ranker=cfg.ranker, matcher=matcher,
        ),
    ]  # fmt: skip
    if zero_shot_on(cfg, run.value(feats["corpus"])):
        levels[-1] = zero_shot_level(run, feats, cfg, last, embedded["train"], tree, levels[-1])
    model = run(
        MODEL, label="assemble-model", vectorizer=feats["vectorizer"],
        labels=feats["label_index"], tree=tree, levels=levels, train=embedded["train"],
        checkpoint=last, ranker=cfg.ranker, predict=cfg.predict, matcher=matcher,
    )  # fmt: skip
    return {
        "tokens_train": tokens["train"], "tokens_test": tokens["test"], "index_features": z,
        "tree": tree, "matcher": last, "matcher_levels": checkpoints,
        "embedded_train": embedded["train"], "embedded_test": embedded["test"],
        "model": model,
        "model_train": embedded["train"], "model_test": embedded["test"],
    }  # fmt: skip
