"""Word n-gram tokenizer."""

from __future__ import annotations

import pyarrow as pa

from xmc_core.config import TokenizerConfig
from xmc_core.features.tokenizer import tokenize, words


def grams(texts: list[str | None], **cfg: object) -> list[list[str]]:
    out = tokenize(texts, TokenizerConfig(**cfg))
    per_doc: list[list[str]] = [[] for _ in range(out.n_docs)]
    for term, doc in zip(out.terms.to_pylist(), out.doc.tolist(), strict=True):
        per_doc[doc].append(term)
    return per_doc


def test_unigrams_lowercase_unicode_and_min_length() -> None:
    docs = grams(["The Café-au-lait, x 42 ÉCOLE_1!"], ngram_max=1)
    assert docs == [["the", "café", "au", "lait", "42", "école_1"]]


def test_case_kept_when_lowercase_off() -> None:
    assert grams(["Hello World"], ngram_max=1, lowercase=False) == [["Hello", "World"]]


def test_bigrams_and_trigrams_never_cross_documents() -> None:
    docs = grams(["aa bb cc", "dd ee"], ngram_max=3)
    assert sorted(docs[0]) == sorted(["aa", "bb", "cc", "aa bb", "bb cc", "aa bb cc"])
    assert sorted(docs[1]) == sorted(["dd", "ee", "dd ee"])


def test_ngrams_skip_dropped_short_tokens_like_sklearn() -> None:
    # "a" is dropped first; the bigram joins the neighbours that remain.
    assert sorted(grams(["xx a yy"], ngram_max=2)[0]) == ["xx", "xx yy", "yy"]


def test_empty_and_null_texts_have_no_tokens() -> None:
    assert grams(["", None, "  ,, ", "ok"], ngram_max=2) == [[], [], [], ["ok"]]


def test_accepts_arrow_arrays() -> None:
    arr = pa.chunked_array([["aa bb"], ["cc"]])
    out = tokenize(arr, TokenizerConfig(ngram_max=1))
    assert out.terms.to_pylist() == ["aa", "bb", "cc"]
    assert out.doc.tolist() == [0, 0, 1]


def test_ascii_texts_split_as_the_regular_expression_does() -> None:
    texts = ["Foo-bar BAZ_1 x", "café Crème-brûlée ok", "tab\there\x0bvt 9_9", "Ωmega, end.", "  "]
    assert grams(texts, ngram_max=1) == [
        ["foo", "bar", "baz_1"], ["café", "crème", "brûlée", "ok"], ["tab", "here", "vt", "9_9"],
        ["ωmega", "end"], [],
    ]  # fmt: skip
    # the ASCII path (a batch of ASCII texts) and the regular expression (a non-ASCII text in
    # the batch sends only that one there) give every ASCII text the same tokens
    for cfg in ({"ngram_max": 1}, {"ngram_max": 2, "lowercase": False, "min_token_len": 1}):
        alone = [grams([t], **cfg)[0] for t in texts]
        assert grams(texts, **cfg) == alone
        assert grams([t for t in texts if t.isascii()], **cfg) == [
            a for t, a in zip(texts, alone, strict=True) if t.isascii()
        ]


def test_words_keep_document_order_across_both_paths() -> None:
    found = words(["b1 é2", "AA", None, "ü x"], TokenizerConfig(min_token_len=1))
    assert found.tokens.to_pylist() == ["b1", "é2", "aa", "ü", "x"]
    assert found.doc.tolist() == [0, 0, 1, 3, 3]
    assert found.n_docs == 4
