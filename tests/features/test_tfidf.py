"""TF-IDF: hand-checked values, scikit-learn parity, partitions, save/load."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer as SkTfidf

from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.errors import ArtifactError, XmcError
from xmc_core.features.counts import TermStats, count_texts
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.features.tokenizer import tokenize
from xmc_core.storage.artifacts import write_meta

TOY = ["apple banana", "apple cherry cherry", "apple"]
UNI = TokenizerConfig(ngram_max=1)


def vec(tok: TokenizerConfig = UNI, **tfidf: object) -> TfidfVectorizer:
    cfg = {"max_features": None, "sublinear_tf": False, **tfidf}
    return TfidfVectorizer(TfidfConfig(**cfg), tok)


def test_idf_on_three_document_toy_smooth() -> None:
    v = vec().fit(TOY)
    assert v.vocabulary_.to_pylist() == ["apple", "banana", "cherry"]
    # smooth: ln((1+n)/(1+df)) + 1 with n=3; df = 3, 1, 1
    np.testing.assert_allclose(v.idf_, [1.0, 1.0 + math.log(2.0), 1.0 + math.log(2.0)])
    x = v.transform(TOY).toarray()
    b = 1.0 + math.log(2.0)
    np.testing.assert_allclose(x[0], np.array([1.0, b, 0.0]) / math.hypot(1.0, b), rtol=1e-6)
    # "cherry" counted twice, raw tf
    np.testing.assert_allclose(
        x[1], np.array([1.0, 0.0, 2 * b]) / math.hypot(1.0, 2 * b), rtol=1e-6
    )
    np.testing.assert_allclose(x[2], [1.0, 0.0, 0.0])


def test_idf_unsmoothed_and_sublinear_tf() -> None:
    v = vec(smooth_idf=False, sublinear_tf=True).fit(TOY)
    np.testing.assert_allclose(v.idf_, [1.0, 1.0 + math.log(3.0), 1.0 + math.log(3.0)])
    row = v.transform(["cherry cherry"]).toarray()[0]
    np.testing.assert_allclose(row, [0.0, 0.0, 1.0])  # one nonzero: normalized to 1
    tf = 1.0 + math.log(2.0)
    raw = np.array([1.0, 0.0, tf * (1.0 + math.log(3.0))])
    np.testing.assert_allclose(
        v.transform(["apple cherry cherry"]).toarray()[0], raw / np.linalg.norm(raw), rtol=1e-6
    )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"min_df": 2},
        {"max_df": 0.5},
        {"min_df": 0.05, "max_df": 10},
        {"sublinear_tf": True, "smooth_idf": False},
    ],
)
def test_matches_scikit_learn(settings: dict[str, object]) -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i:02d}" for i in range(40)]
    docs = [" ".join(rng.choice(words, size=rng.integers(3, 15))) for _ in range(60)]
    ours = vec(TokenizerConfig(ngram_max=2), **settings).fit(docs)
    sk = SkTfidf(ngram_range=(1, 2), **{"sublinear_tf": False, **settings}).fit(docs)
    assert ours.vocabulary_.to_pylist() == sorted(sk.vocabulary_)
    diff = ours.transform(docs) - sk.transform(docs)
    assert abs(diff).max() < 1e-6


def test_max_features_keeps_most_frequent_ties_by_term_order() -> None:
    docs = ["dd dd dd cc cc bb bb aa", "ee"]  # tf: dd 3, cc 2, bb 2, aa 1, ee 1
    assert vec(max_features=1).fit(docs).vocabulary_.to_pylist() == ["dd"]
    assert vec(max_features=2).fit(docs).vocabulary_.to_pylist() == ["bb", "dd"]
    assert vec(max_features=4).fit(docs).vocabulary_.to_pylist() == ["aa", "bb", "cc", "dd"]


def test_partitioned_fit_equals_whole_fit() -> None:
    docs = [f"tok{i % 7} tok{i % 3} shared" for i in range(30)]
    tok = TokenizerConfig(ngram_max=2)
    parts = [count_texts(docs[i : i + 7], tok) for i in range(0, 30, 7)]
    split = TfidfVectorizer(TfidfConfig(), tok).fit_stats(
        TermStats.merge([p.stats() for p in parts])
    )
    whole = TfidfVectorizer(TfidfConfig(), tok).fit(docs)
    assert split.vocabulary_.equals(whole.vocabulary_)
    np.testing.assert_allclose(split.idf_, whole.idf_)
    stacked = sp.vstack([split.transform_counts(p) for p in parts])
    assert abs(stacked - whole.transform(docs)).max() == 0


def test_unknown_terms_and_empty_documents_give_zero_rows() -> None:
    v = vec().fit(TOY)
    x = v.transform(["zebra", "", None])
    assert x.shape == (3, 3) and x.nnz == 0


def test_errors_when_nothing_survives_or_bounds_conflict() -> None:
    with pytest.raises(XmcError, match="no term left"):
        vec(min_df=2, max_df=2).fit(TOY)
    with pytest.raises(XmcError, match="max_df"):
        vec(min_df=3, max_df=1).fit(TOY)


def test_save_load_transform_identical(tmp_path: Path) -> None:
    v = vec(TokenizerConfig(ngram_max=2), sublinear_tf=True).fit(TOY)
    v.save(tmp_path / "v")
    loaded = TfidfVectorizer.load(tmp_path / "v")
    assert loaded.tfidf == v.tfidf and loaded.tokenizer == v.tokenizer
    assert (loaded.transform(TOY) != v.transform(TOY)).nnz == 0


def test_load_rejects_corrupt_or_foreign_folders(tmp_path: Path) -> None:
    v = vec().fit(TOY)
    v.save(tmp_path / "v")
    (tmp_path / "v" / "idf.npz").write_bytes(b"garbage")
    with pytest.raises(ArtifactError, match=r"idf\.npz.*checksum"):
        TfidfVectorizer.load(tmp_path / "v")
    (tmp_path / "other").mkdir()
    write_meta(tmp_path / "other", "LabelIndex", {})
    with pytest.raises(ArtifactError, match="holds a 'LabelIndex'"):
        TfidfVectorizer.load(tmp_path / "other")


def test_small_batches_map_terms_like_the_vectorized_join(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-document transforms (online serving) take the term dict; the result is the same."""
    import xmc_core.features.tfidf as tfidf

    corpus = [f"term{i} shared word{i % 7} other{i % 3}" for i in range(300)]
    vec = tfidf.TfidfVectorizer(TfidfConfig(), TokenizerConfig()).fit(corpus)
    docs = ["term5 word3 unknownword", "", "shared other1 term299 term299"]
    small = [vec.transform([d]) for d in docs]
    monkeypatch.setattr(tfidf, "SMALL_BATCH_RATIO", 10**9)  # always the join
    for d, got in zip(docs, small, strict=True):
        assert abs(got - vec.transform([d])).max() == 0.0
    assert small[0].nnz == 2 and small[1].nnz == 0


def test_counts_list_unigrams_then_ngrams_each_in_first_seen_order() -> None:
    counts = count_texts(["aa bb aa", "bb aa cc", "dd"], TokenizerConfig(ngram_max=3))
    assert counts.terms.to_pylist() == [
        "aa", "bb", "cc", "dd", "aa bb", "bb aa", "aa cc", "aa bb aa", "bb aa cc",
    ]  # fmt: skip
    assert counts.matrix.toarray().tolist() == [
        [2, 1, 0, 0, 1, 1, 0, 1, 0],
        [1, 1, 1, 0, 0, 1, 1, 0, 1],
        [0, 0, 0, 1, 0, 0, 0, 0, 0],
    ]
    assert counts.matrix.has_canonical_format


def test_counts_equal_counting_the_tokenizer_terms() -> None:
    texts = ["x yy zz yy zz", "Ünï cödé, ASCII too; yy zz", "", None, "a b c a b c", "zz"]
    for cfg in (TokenizerConfig(ngram_max=n, min_token_len=1) for n in (1, 2, 3)):
        counts = count_texts(texts, cfg)
        grams = tokenize(texts, cfg)
        terms = counts.terms.to_pylist()
        assert terms == list(dict.fromkeys(grams.terms.to_pylist()))  # first-seen order
        expected = np.zeros(counts.matrix.shape)
        for term, doc in zip(grams.terms.to_pylist(), grams.doc.tolist(), strict=True):
            expected[doc, terms.index(term)] += 1
        np.testing.assert_array_equal(counts.matrix.toarray(), expected)


def test_a_warm_vocabulary_keeps_the_base_columns_and_appends_new_terms(tmp_path: Path) -> None:
    base = vec().fit(TOY)  # apple, banana, cherry
    merged = [*TOY, "date apple", "banana date elder"]  # the old documents and a new drop
    warm = vec().extend_stats(count_texts(merged, UNI).stats(), base)
    assert warm.vocabulary_.to_pylist() == ["apple", "banana", "cherry", "date", "elder"]
    # idf over the 5 merged documents, smooth: df apple 4, banana 2, cherry 1, date 2, elder 1
    df = np.array([4.0, 2.0, 1.0, 2.0, 1.0])
    np.testing.assert_allclose(warm.idf_, np.log(6.0 / (1.0 + df)) + 1.0)
    assert warm.n_docs_ == 5
    # here the cold vocabulary is the same; a base term no new document holds keeps its column
    cold = vec().fit(merged)
    assert cold.vocabulary_.to_pylist() == ["apple", "banana", "cherry", "date", "elder"]
    only_new = vec().extend_stats(count_texts(["date elder", "elder"], UNI).stats(), base)
    assert only_new.vocabulary_.to_pylist() == ["apple", "banana", "cherry", "date", "elder"]
    np.testing.assert_allclose(only_new.idf_[:3], math.log(3.0 / 2.0) + 1.0)  # df 0 counts as 1
    warm.save(tmp_path / "v")
    again = TfidfVectorizer.load(tmp_path / "v")
    assert again.vocabulary_.to_pylist() == warm.vocabulary_.to_pylist()
    assert (again.transform(["elder apple"]) != warm.transform(["elder apple"])).nnz == 0


def test_a_warm_vocabulary_respects_max_features_for_new_terms_only() -> None:
    base = vec().fit(TOY)
    merged = [*TOY, "date date date fig", "date fig grape"]
    warm = vec(max_features=4).extend_stats(count_texts(merged, UNI).stats(), base)
    # the cold selection of 4 by term frequency: date (4), apple (3), cherry (2), fig (2);
    # base terms keep their columns, the selected new ones follow in code-point order
    assert warm.vocabulary_.to_pylist() == ["apple", "banana", "cherry", "date", "fig"]


def test_a_warm_start_refuses_a_base_that_tokenizes_differently() -> None:
    base = vec(TokenizerConfig(ngram_max=2)).fit(TOY)
    with pytest.raises(XmcError, match="tokenizes differently"):
        vec().extend_stats(count_texts(TOY, UNI).stats(), base)
