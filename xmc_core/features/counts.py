"""Per-partition term counts with a partition-local vocabulary, and their corpus-wide statistics.

Counting is the expensive, tokenizer-only step; it is done once per partition and reused when
only the vocabulary selection (min_df, max_features, ...) changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.config import TokenizerConfig
from xmc_core.features.tokenizer import words
from xmc_core.storage.artifacts import (
    load_csr,
    load_strings,
    read_meta,
    save_csr,
    save_strings,
    write_meta,
)


@dataclass(frozen=True)
class TermStats:
    """Document and term frequency of each term over a set of documents.

    ``terms``: string (n_terms,), ``df``/``tf``: (n_terms,) float64, ``n_docs``: documents seen.
    """

    terms: pa.Array
    df: np.ndarray
    tf: np.ndarray
    n_docs: int

    def sorted(self) -> TermStats:
        """The same statistics with terms in code-point order (scikit-learn's vocabulary order)."""
        order = pc.sort_indices(self.terms)
        idx = order.to_numpy()
        return TermStats(self.terms.take(order), self.df[idx], self.tf[idx], self.n_docs)

    @staticmethod
    def merge(parts: list[TermStats]) -> TermStats:
        """Sum statistics of disjoint document sets (terms in first-seen order)."""
        terms = pa.concat_arrays([p.terms.cast(pa.large_string()) for p in parts])
        encoded = pc.dictionary_encode(terms)
        idx = encoded.indices.to_numpy(zero_copy_only=False)
        n = len(encoded.dictionary)
        return TermStats(
            terms=encoded.dictionary,
            df=np.bincount(idx, weights=np.concatenate([p.df for p in parts]), minlength=n),
            tf=np.bincount(idx, weights=np.concatenate([p.tf for p in parts]), minlength=n),
            n_docs=sum(p.n_docs for p in parts),
        )


@dataclass(frozen=True)
class TermCounts:
    """Raw term frequencies of one partition.

    ``terms``: string (n_local,), the partition's own vocabulary; ``matrix``: csr
    (n_docs, n_local) float32 counts (or given feature values for bag-of-words corpora).
    """

    terms: pa.Array
    matrix: sp.csr_matrix

    def stats(self) -> TermStats:
        """Document / term frequencies of this partition."""
        m = self.matrix
        df = np.bincount(m.indices, minlength=m.shape[1]).astype(np.float64)
        tf = np.asarray(m.sum(axis=0), dtype=np.float64).ravel()
        return TermStats(self.terms, df, tf, m.shape[0])

    def save(self, folder: Path) -> None:
        """Write ``terms.parquet``, ``counts.npz`` and ``meta.json`` into ``folder``."""
        save_strings(folder / "terms.parquet", self.terms)
        save_csr(folder / "counts.npz", self.matrix)
        write_meta(folder, "TermCounts", {"shape": list(self.matrix.shape)})

    @classmethod
    def load(cls, folder: str | Path) -> TermCounts:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        read_meta(folder, "TermCounts")
        return cls(load_strings(folder / "terms.parquet"), load_csr(folder / "counts.npz"))


def count_texts(texts: pa.Array | list[str | None], cfg: TokenizerConfig) -> TermCounts:
    """Tokenize ``texts`` and count every n-gram per document.

    The partition's terms are the unigrams in first-seen order, then the bigrams in
    first-seen order, and so on (as dictionary-encoding :func:`tokenize`'s terms would give).
    An n-gram is encoded as the pair (its first n-1 words, its last word) of ids, so only the
    distinct n-grams are ever joined into strings."""
    found = words(texts, cfg)
    encoded = pc.dictionary_encode(found.tokens)
    unigram = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    terms, cols, rows = [encoded.dictionary], [unigram], [found.doc]
    previous, n_terms = unigram, len(encoded.dictionary)
    for n in range(2, cfg.ngram_max + 1):
        if len(unigram) < n:
            break
        start = len(unigram) - n + 1
        same = found.doc[:start] == found.doc[n - 1 :]
        keys = previous[:start][same] * len(encoded.dictionary) + unigram[n - 1 :][same]
        grams = pc.dictionary_encode(pa.array(keys))
        ids = grams.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        first, last = np.divmod(grams.dictionary.to_numpy(), len(encoded.dictionary))
        terms.append(
            pc.binary_join_element_wise(
                terms[-1].take(pa.array(first)),
                encoded.dictionary.take(pa.array(last)),
                pa.scalar(" ", pa.large_string()),
            )
        )
        cols.append(ids + n_terms)
        rows.append(found.doc[:start][same])
        previous = np.full(start, -1, dtype=np.int64)
        previous[same] = ids
        n_terms += len(grams.dictionary)
    matrix = sp.csr_matrix(
        (
            np.ones(sum(map(len, cols)), dtype=np.float32),
            (np.concatenate(rows), np.concatenate(cols)),
        ),
        shape=(found.n_docs, n_terms),
    )
    matrix.sum_duplicates()
    return TermCounts(pa.concat_arrays(terms), matrix)


def count_bow(ids: pa.ListArray, values: pa.ListArray, n_features: int) -> TermCounts:
    """Bag-of-words rows (feature ids, values) as counts over terms ``"0" .. str(n_features-1)``."""
    offsets = ids.offsets.to_numpy()
    indptr = (offsets - offsets[0]).astype(np.int64)
    matrix = sp.csr_matrix(
        (
            values.flatten().to_numpy().astype(np.float32),
            ids.flatten().to_numpy().astype(np.int64),
            indptr,
        ),
        shape=(len(ids), n_features),
    )
    matrix.sum_duplicates()
    terms = pa.array([str(i) for i in range(n_features)], type=pa.large_string())
    return TermCounts(terms, matrix)
