"""The featurization stages, one function each, as the orchestrator calls them.

Each takes loaded inputs and returns the object to persist; reading and writing by path is the
caller's job (the stage graph, :mod:`xmc_core.families.featurize`), so every stage runs the same
with or without Prefect.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from xmc_core.config import LabelFeaturesConfig, TfidfConfig, TokenizerConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.features.counts import TermCounts, TermStats, count_bow, count_texts
from xmc_core.features.label_features import (
    LabelFeatures,
    concat_label_features,
    label_text_matrix,
    pifa,
    pifa_partial,
)
from xmc_core.features.labels import LabelIndex
from xmc_core.features.split_features import SplitFeatures
from xmc_core.features.tfidf import TfidfVectorizer


def count_partition(corpus: Corpus, ref: PartitionRef, cfg: TokenizerConfig) -> TermCounts:
    """Term counts of one partition (text corpora: tokenized; bag-of-words: the given features)."""
    if corpus.kind == "bow":
        table = corpus.read_partition(ref, ["feature_ids", "feature_values"])
        n_features = corpus.manifest.n_features
        assert n_features is not None, "bag-of-words manifest without n_features"
        return count_bow(
            table.column("feature_ids").combine_chunks(),
            table.column("feature_values").combine_chunks(),
            n_features,
        )
    return count_texts(corpus.read_partition(ref, ["text"]).column("text"), cfg)


def fit_vectorizer(
    counts: Iterable[TermCounts], tfidf: TfidfConfig, tokenizer: TokenizerConfig
) -> TfidfVectorizer:
    """Vocabulary and idf from the training partitions' counts."""
    stats = TermStats.merge([c.stats() for c in counts])
    return TfidfVectorizer(tfidf, tokenizer).fit_stats(stats)


def extend_vectorizer(
    counts: Iterable[TermCounts], base: TfidfVectorizer, tfidf: TfidfConfig,
    tokenizer: TokenizerConfig,
) -> TfidfVectorizer:  # fmt: skip
    """A warm start's vocabulary: ``base``'s columns, then the new terms the training
    partitions' counts select (:meth:`TfidfVectorizer.extend_stats`)."""
    stats = TermStats.merge([c.stats() for c in counts])
    return TfidfVectorizer(tfidf, tokenizer).extend_stats(stats, base)


def fit_label_index(corpus: Corpus) -> LabelIndex:
    """Every label that occurs in the training split."""
    return LabelIndex.from_label_lists(_train_labels(corpus))


def extend_label_index(corpus: Corpus, base: LabelIndex) -> LabelIndex:
    """A warm start's label index: ``base``'s labels keep their ids, the training split's new
    labels follow (:meth:`LabelIndex.extended`)."""
    return LabelIndex.extended(base, _train_labels(corpus))


def _train_labels(corpus: Corpus) -> Iterable[pa.ChunkedArray]:
    return (
        corpus.read_partition(r, ["labels"]).column("labels") for r in corpus.partitions("train")
    )


def featurize_partition(
    corpus: Corpus,
    ref: PartitionRef,
    counts: TermCounts,
    vectorizer: TfidfVectorizer,
    index: LabelIndex,
) -> SplitFeatures:
    """TF-IDF rows and label rows of one partition."""
    table = corpus.read_partition(ref, ["doc_id", "labels"])
    y, unknown = index.encode(table.column("labels"))
    return SplitFeatures(
        vectorizer.transform_counts(counts), y, table.column("doc_id").combine_chunks(), unknown
    )


def build_label_features(
    parts: Iterable[SplitFeatures],
    cfg: LabelFeaturesConfig,
    vectorizer: TfidfVectorizer,
    index: LabelIndex,
    label_texts: pa.Table | None,
) -> LabelFeatures:
    """PIFA, label-text TF-IDF, or both concatenated, per ``cfg.kind``."""
    blocks, weights = [], []
    if cfg.kind in ("pifa", "pifa_label_text"):
        blocks.append(pifa(pifa_partial(p.X, p.Y) for p in parts))
        weights.append(1.0)
    if cfg.kind in ("label_text", "pifa_label_text"):
        if label_texts is None:
            raise ValueError(
                f"label_features.kind={cfg.kind!r} needs label texts, but the corpus has no "
                "labels.parquet; re-ingest with label texts or use kind=pifa"
            )
        blocks.append(label_text_matrix(vectorizer, index, label_texts))
        weights.append(cfg.label_text_weight)
    return LabelFeatures(concat_label_features(blocks, weights), cfg.kind)
