"""The featurization stages, one function each, as the orchestrator calls them.

Each takes loaded inputs and returns the object to persist; reading and writing by path is the
caller's job (the stage graph, :mod:`xmc_core.families.featurize`), so every stage runs the same
with or without Prefect.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.config import LabelFeaturesConfig, TfidfConfig, TokenizerConfig
from xmc_core.corpus import Corpus, PartitionRef
from xmc_core.features.counts import TermCounts, TermStats, count_bow, count_texts
from xmc_core.features.label_features import (
    LabelFeatures,
    concat_label_features,
    label_text_matrix,
    pifa,
    pifa_partial,
    with_text_rows,
)
from xmc_core.features.labels import LabelIndex
from xmc_core.features.normalize import l2_normalize_rows
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


def fit_label_index(corpus: Corpus, label_texts: bool = False) -> LabelIndex:
    """Every label that occurs in the training split (``label_texts``: and every label the
    corpus has a text for, the zero-shot labels)."""
    return LabelIndex.from_label_lists(_train_labels(corpus, label_texts))


def extend_label_index(corpus: Corpus, base: LabelIndex, label_texts: bool = False) -> LabelIndex:
    """A warm start's label index: ``base``'s labels keep their ids, the training split's new
    labels (``label_texts``: and the labels with a text) follow (:meth:`LabelIndex.extended`)."""
    return LabelIndex.extended(base, _train_labels(corpus, label_texts))


def _train_labels(corpus: Corpus, label_texts: bool) -> list[pa.ChunkedArray | pa.ListArray]:
    batches: list[pa.ChunkedArray | pa.ListArray] = [
        corpus.read_partition(r, ["labels"]).column("labels") for r in corpus.partitions("train")
    ]
    texts = corpus.label_texts() if label_texts else None
    if texts is not None:  # the labels with a (non-empty) text, as one list of names
        named = texts.filter(pc.invert(pc.is_null(texts["text"]))).column("label")
        named = named.combine_chunks().cast(pa.large_string())
        batches.append(pa.LargeListArray.from_arrays(pa.array([0, len(named)]), named))
    return batches


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
    zero_shot: bool = False,
) -> LabelFeatures:
    """PIFA, label-text TF-IDF, or both concatenated, per ``cfg.kind``. ``zero_shot``: also
    keep the labels' text TF-IDF, and give each label that has a text but no training document
    its text row as its features (:class:`LabelFeatures`)."""
    parts = list(parts)
    if cfg.kind != "pifa" and label_texts is None:
        raise ValueError(
            f"label_features.kind={cfg.kind!r} needs label texts, but the corpus has no "
            "labels.parquet; re-ingest with label texts or use kind=pifa"
        )
    text = None
    if label_texts is not None and (cfg.kind != "pifa" or zero_shot):
        text = label_text_matrix(vectorizer, index, label_texts)
    blocks, weights = [], []
    if cfg.kind in ("pifa", "pifa_label_text"):
        blocks.append(pifa(pifa_partial(p.X, p.Y) for p in parts))
        weights.append(1.0)
    if cfg.kind in ("label_text", "pifa_label_text"):
        blocks.append(text)
        weights.append(cfg.label_text_weight)
    features = LabelFeatures(concat_label_features(blocks, weights), cfg.kind)
    if zero_shot and text is not None:
        return _with_zero_shot(features, parts, l2_normalize_rows(text))
    return features


def _with_zero_shot(
    features: LabelFeatures, parts: list[SplitFeatures], text: sp.csr_matrix
) -> LabelFeatures:
    """``features`` with the text rows kept and, for every label with a text but no training
    document, its row of Z replaced by its text row (PIFA: the same feature space; a
    concatenation holds the text block already, and a zero PIFA block)."""
    docs = np.zeros(text.shape[0], dtype=np.int64)
    for p in parts:
        docs += np.diff(sp.csc_matrix(p.Y).indptr)
    unseen = (docs == 0) & (np.diff(text.indptr) > 0)
    z = features.z
    if features.kind == "pifa" and unseen.any():
        z = with_text_rows(z, text, unseen)
    return LabelFeatures(z, features.kind, text.astype(np.float32), np.flatnonzero(unseen))
