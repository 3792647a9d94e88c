"""Word n-gram tokenizer, vectorized with Arrow compute kernels.

Tokens are maximal runs of Unicode word characters (letters, digits, underscore) of at least
``min_token_len`` characters, the same tokens as scikit-learn's default ``(?u)\\b\\w\\w+\\b``;
n-grams join consecutive tokens of a document with one space, as scikit-learn does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xmc_core.config import TokenizerConfig

_NON_WORD = r"[^\p{L}\p{N}_]+"


@dataclass(frozen=True)
class NGrams:
    """Every n-gram occurrence of a batch of documents.

    ``terms``: string array (n_occurrences,); ``doc``: int64 (n_occurrences,) document index.
    """

    terms: pa.Array
    doc: np.ndarray
    n_docs: int


def _as_arrow(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(texts, type=pa.large_string())
    return texts.cast(pa.large_string()).fill_null("")


def tokenize(
    texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, cfg: TokenizerConfig
) -> NGrams:
    """Unigrams (and n-grams up to ``cfg.ngram_max``) of ``texts``; null texts have no tokens."""
    arr = _as_arrow(texts)
    if cfg.lowercase:
        arr = pc.utf8_lower(arr)
    lists = pc.split_pattern_regex(arr, pattern=_NON_WORD)
    offsets = lists.offsets.to_numpy()
    tokens = lists.flatten()
    doc = np.repeat(np.arange(len(arr), dtype=np.int64), np.diff(offsets))
    keep = pc.greater_equal(pc.utf8_length(tokens), cfg.min_token_len)
    tokens = tokens.filter(keep)
    doc = doc[keep.to_numpy(zero_copy_only=False)]
    terms, docs = [tokens], [doc]
    gram = tokens
    for n in range(2, cfg.ngram_max + 1):
        if len(tokens) < n:
            break
        gram = pc.binary_join_element_wise(
            gram.slice(0, len(tokens) - n + 1),
            tokens.slice(n - 1),
            pa.scalar(" ", pa.large_string()),
        )
        same = doc[: len(tokens) - n + 1] == doc[n - 1 :]
        terms.append(gram.filter(pa.array(same)))
        docs.append(doc[: len(tokens) - n + 1][same])
    return NGrams(pa.concat_arrays(terms), np.concatenate(docs), len(arr))
