"""TF-IDF vectorizer: vocabulary fitted from corpus statistics, transform one partition at a time.

Semantics follow scikit-learn's ``TfidfVectorizer(norm="l2")``: ``min_df``/``max_df`` as counts
(int) or fractions (float); ``max_features`` keeps the terms of highest corpus frequency (ties
broken by term order); vocabulary in code-point order; ``tf`` or ``1 + log(tf)``;
``idf = ln((1 + n) / (1 + df)) + 1`` (smooth) or ``ln(n / df) + 1``; rows L2-normalized.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.errors import XmcError
from xmc_core.features.counts import TermCounts, TermStats, count_texts
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.storage.artifacts import (
    load_arrays,
    load_strings,
    meta_fields,
    read_meta,
    save_arrays,
    save_strings,
    write_meta,
)

SMALL_BATCH_RATIO = 64
"""Batches with fewer than 1/64 as many distinct terms as the vocabulary use the term dict."""


class TfidfVectorizer:
    """``fit`` on term statistics (or texts), ``transform`` term counts (or texts) to TF-IDF.

    Fitted attributes: ``vocabulary_`` (string array, n_features), ``idf_`` (float64, n_features),
    ``n_docs_`` (documents the idf was fitted on).
    """

    def __init__(self, tfidf: TfidfConfig, tokenizer: TokenizerConfig) -> None:
        self.tfidf = tfidf
        self.tokenizer = tokenizer

    @property
    def n_features(self) -> int:
        """Size of the fitted vocabulary."""
        return len(self.vocabulary_)

    def fit_stats(self, stats: TermStats) -> TfidfVectorizer:
        """Select the vocabulary and compute idf from corpus-wide statistics.

        The terms are selected first and only the selected ones sorted (a million documents
        hold some 50M distinct terms, of which ``max_features`` are kept)."""
        idx = self._selected(stats)
        return self._fitted(stats, stats.terms.take(pa.array(idx)), stats.df[idx])

    def extend_stats(self, stats: TermStats, base: TfidfVectorizer) -> TfidfVectorizer:
        """A warm start's vocabulary: ``base``'s terms keep their columns, then the terms that
        :meth:`fit_stats` would select on ``stats`` and ``base`` lacks are appended (in
        code-point order); idf of every column from ``stats`` (a ``base`` term no document of
        ``stats`` holds counts as in one). The first ``base.n_features`` columns therefore
        mean what they meant in ``base``'s model."""
        if base.tokenizer != self.tokenizer:
            raise XmcError(
                "the warm start's base vectorizer tokenizes differently "
                f"({base.tokenizer.model_dump()} vs {self.tokenizer.model_dump()}): "
                "train cold, or keep the champion's tokenizer settings"
            )
        selected = stats.terms.take(pa.array(self._selected(stats)))
        new = selected.filter(pc.invert(pc.is_in(selected, value_set=base.vocabulary_)))
        vocabulary = pa.concat_arrays([base.vocabulary_.cast(pa.string()), new.cast(pa.string())])
        found = (
            pc.index_in(vocabulary, value_set=stats.terms)
            .fill_null(-1)
            .to_numpy(zero_copy_only=False)
        )
        df = np.where(found >= 0, stats.df[np.maximum(found, 0)], 1.0)  # a held term: df >= 1
        return self._fitted(stats, vocabulary, df)

    def _selected(self, stats: TermStats) -> np.ndarray:
        """Positions in ``stats`` of the terms the config keeps, in code-point order."""
        cfg, n = self.tfidf, stats.n_docs
        max_count = cfg.max_df if isinstance(cfg.max_df, int) else cfg.max_df * n
        min_count = cfg.min_df if isinstance(cfg.min_df, int) else cfg.min_df * n
        if max_count < min_count:
            raise XmcError(
                f"max_df ({cfg.max_df}) keeps fewer documents than min_df ({cfg.min_df})"
            )
        kept = np.flatnonzero((stats.df >= min_count) & (stats.df <= max_count))
        if cfg.max_features is not None and len(kept) > cfg.max_features:
            kept = _most_frequent(stats, kept, cfg.max_features)
        if not len(kept):
            raise XmcError(self._no_term_message(stats))
        return kept[pc.sort_indices(stats.terms.take(pa.array(kept))).to_numpy()]

    def _fitted(self, stats: TermStats, vocabulary: pa.Array, df: np.ndarray) -> TfidfVectorizer:
        """Set ``vocabulary_``, ``n_docs_`` and ``idf_`` from the terms' document frequencies."""
        n = stats.n_docs
        idf = np.log((1.0 + n) / (1.0 + df) if self.tfidf.smooth_idf else n / df) + 1.0
        self.vocabulary_ = vocabulary
        self.idf_ = idf.astype(np.float64)
        self.n_docs_ = n
        return self

    def _no_term_message(self, stats: TermStats) -> str:
        """Why no term survived: no word at all in the documents, or the df bounds."""
        cfg, n = self.tfidf, stats.n_docs
        if len(stats.terms) == 0:
            return (
                f"the {n} training documents hold no word: a token is a run of at least "
                f"{self.tokenizer.min_token_len} letters, digits or underscores, and the texts "
                "have none (e.g. only emoji, symbols, punctuation or empty texts). Fix: check "
                "that the text column holds the document texts; for one-character words set "
                "tokenizer.min_token_len=1"
            )
        return (
            f"no term left after min_df={cfg.min_df}, max_df={cfg.max_df} on {n} documents (the "
            f"most common term is in {int(stats.df.max())}, the rarest in {int(stats.df.min())}); "
            "lower min_df or raise max_df"
        )

    def fit(self, texts: pa.Array | list[str | None]) -> TfidfVectorizer:
        """Fit on one in-memory batch of texts (small corpora and tests)."""
        return self.fit_stats(count_texts(texts, self.tokenizer).stats())

    def transform_counts(self, counts: TermCounts) -> sp.csr_matrix:
        """TF-IDF rows of one partition: csr (n_docs, n_features) float32, rows L2-normalized."""
        mapping = self._term_ids(counts.terms)
        m = counts.matrix
        cols = mapping[m.indices]
        keep = cols >= 0
        rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))[keep]
        tf = m.data[keep].astype(np.float64)
        if self.tfidf.sublinear_tf:
            tf = 1.0 + np.log(tf)
        data = tf * self.idf_[cols[keep]]
        out = sp.csr_matrix((data, (rows, cols[keep])), shape=(m.shape[0], self.n_features))
        out.sort_indices()
        return l2_normalize_rows(out).astype(np.float32)

    def _term_ids(self, terms: pa.Array) -> np.ndarray:
        """Feature id of each term (-1: not in the vocabulary), (len(terms),) int64.

        Large batches use one vectorized hash join; small ones (online prediction) a term ->
        id dict built once, since the join rebuilds its hash table of the whole vocabulary on
        every call (~80 ms for 200,000 terms).
        """
        if len(terms) * SMALL_BATCH_RATIO >= len(self.vocabulary_):
            found = pc.index_in(terms, value_set=self.vocabulary_)
            return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        lookup = self.__dict__.get("_lookup")
        if lookup is None or lookup[0] is not self.vocabulary_:
            lookup = (self.vocabulary_, {t: i for i, t in enumerate(self.vocabulary_.to_pylist())})
            self._lookup = lookup
        ids = lookup[1]
        return np.fromiter((ids.get(t, -1) for t in terms.to_pylist()), np.int64, len(terms))

    def transform(self, texts: pa.Array | list[str | None]) -> sp.csr_matrix:
        """TF-IDF rows of raw texts."""
        return self.transform_counts(count_texts(texts, self.tokenizer))

    def save(self, folder: str | Path) -> None:
        """Write ``vocabulary.parquet``, ``idf.npz`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_strings(folder / "vocabulary.parquet", self.vocabulary_)
        save_arrays(folder / "idf.npz", idf=self.idf_)
        write_meta(
            folder,
            "TfidfVectorizer",
            {
                "tfidf": self.tfidf.model_dump(mode="json"),
                "tokenizer": self.tokenizer.model_dump(mode="json"),
                "n_features": self.n_features,
                "n_docs": self.n_docs_,
            },
        )

    @classmethod
    def load(cls, folder: str | Path) -> TfidfVectorizer:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "TfidfVectorizer")
        with meta_fields(folder):
            tfidf, tokenizer = TfidfConfig(**meta["tfidf"]), TokenizerConfig(**meta["tokenizer"])
            n_docs = int(meta["n_docs"])
        vec = cls(tfidf, tokenizer)
        vec.vocabulary_ = load_strings(folder / "vocabulary.parquet")
        vec.idf_ = load_arrays(folder / "idf.npz")["idf"]
        vec.n_docs_ = n_docs
        return vec


def _most_frequent(stats: TermStats, kept: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` terms at ``kept`` of highest ``tf``, ties broken by term (code-point) order,
    as scikit-learn's ``max_features``: those above the k-th highest tf, then the first of
    those equal to it, in term order."""
    tf = stats.tf[kept]
    threshold = -np.partition(-tf, k - 1)[k - 1]
    above, tied = kept[tf > threshold], kept[tf == threshold]
    first = pc.sort_indices(stats.terms.take(pa.array(tied))).to_numpy()[: k - len(above)]
    return np.concatenate([above, tied[first]])
