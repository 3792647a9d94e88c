"""Word n-gram tokenizer, vectorized with Arrow compute kernels.

Tokens are maximal runs of Unicode word characters (letters, digits, underscore) of at least
``min_token_len`` characters, the same tokens as scikit-learn's default ``(?u)\\b\\w\\w+\\b``;
n-grams join consecutive tokens of a document with one space, as scikit-learn does.

ASCII texts (most of them) take a faster path with the same tokens: a byte table maps every
ASCII character that is not a word character to a space (and lowercases), then Arrow splits on
whitespace. Other texts go through the regular expression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xmc_core.config import TokenizerConfig

_NON_WORD = r"[^\p{L}\p{N}_]+"
_ASCII_WORD = b"0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The word characters among ASCII: ``\\p{L}`` and ``\\p{N}`` there are letters and digits."""


def _byte_table(lowercase: bool) -> np.ndarray:
    """uint8 (256,): an ASCII word character to itself (upper case lowered if ``lowercase``),
    any other byte to a space."""
    table = np.full(256, ord(" "), dtype=np.uint8)
    word = np.frombuffer(_ASCII_WORD, dtype=np.uint8)
    table[word] = np.frombuffer(_ASCII_WORD.lower() if lowercase else _ASCII_WORD, np.uint8)
    return table


_BYTE_TABLES = {case: _byte_table(case) for case in (False, True)}


@dataclass(frozen=True)
class Words:
    """Every kept token of a batch of documents, in order.

    ``tokens``: large string array (n_tokens,); ``doc``: int64 (n_tokens,) document index.
    """

    tokens: pa.Array
    doc: np.ndarray
    n_docs: int


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


def _split_ascii(arr: pa.Array, lowercase: bool) -> pa.ListArray:
    """Runs of word characters of ASCII texts (``arr``: large strings without nulls), per
    document, with empty strings where a text starts or ends with a separator."""
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf or b"", dtype=np.uint8)[offsets[0] : offsets[-1]]
    mapped = _BYTE_TABLES[lowercase][data]
    spaced = pa.LargeStringArray.from_buffers(
        len(arr), pa.py_buffer(offsets - offsets[0]), pa.py_buffer(mapped)
    )
    return pc.ascii_split_whitespace(spaced)


def _split_unicode(arr: pa.Array, lowercase: bool) -> pa.ListArray:
    """Runs of word characters of any texts, per document, with empty strings as above."""
    return pc.split_pattern_regex(pc.utf8_lower(arr) if lowercase else arr, pattern=_NON_WORD)


def _split(arr: pa.Array, lowercase: bool) -> pa.ListArray:
    """Runs of word characters per document: ASCII texts by the byte table, others by the
    regular expression, in document order."""
    is_ascii = pc.string_is_ascii(arr).to_numpy(zero_copy_only=False)
    if is_ascii.all():
        return _split_ascii(arr, lowercase)
    if not is_ascii.any():
        return _split_unicode(arr, lowercase)
    ascii_rows, other_rows = np.flatnonzero(is_ascii), np.flatnonzero(~is_ascii)
    both = pa.concat_arrays(
        [
            _split_ascii(arr.take(ascii_rows), lowercase),
            _split_unicode(arr.take(other_rows), lowercase),
        ]
    )
    order = np.empty(len(arr), dtype=np.int64)
    order[np.concatenate([ascii_rows, other_rows])] = np.arange(len(arr))
    return both.take(pa.array(order))


def words(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, cfg: TokenizerConfig) -> Words:
    """The tokens of ``texts`` (lowercased if ``cfg.lowercase``) of at least
    ``cfg.min_token_len`` characters; null texts have none."""
    arr = _as_arrow(texts)
    lists = _split(arr, cfg.lowercase)
    offsets = lists.offsets.to_numpy()
    tokens = lists.flatten()
    doc = np.repeat(np.arange(len(arr), dtype=np.int64), np.diff(offsets))
    keep = pc.greater_equal(pc.utf8_length(tokens), cfg.min_token_len)
    return Words(tokens.filter(keep), doc[keep.to_numpy(zero_copy_only=False)], len(arr))


def tokenize(
    texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, cfg: TokenizerConfig
) -> NGrams:
    """Unigrams (and n-grams up to ``cfg.ngram_max``) of ``texts``; null texts have no tokens."""
    found = words(texts, cfg)
    tokens, doc = found.tokens, found.doc
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
    return NGrams(pa.concat_arrays(terms), np.concatenate(docs), found.n_docs)
