"""Label index, PIFA and label-text features against hand-computed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.features.label_features import (
    LabelFeatures,
    concat_label_features,
    label_text_matrix,
    pifa,
    pifa_partial,
)
from xmc_core.features.labels import LabelIndex
from xmc_core.features.tfidf import TfidfVectorizer

# 3 documents x 4 features; rows normalize to [.6 .8 0 0], [0 0 1 0], [0 0 0 1]
X = sp.csr_matrix(np.array([[3.0, 4.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 2.0]]))
# label 0 on docs 0 and 1; label 1 on docs 1 and 2
Y = sp.csr_matrix(np.array([[1.0, 0], [1.0, 1.0], [0, 1.0]]))
R2 = 1 / np.sqrt(2)


def test_pifa_rows_on_3x4_toy() -> None:
    z = pifa([pifa_partial(X, Y)]).toarray()
    # doc 1 has two labels: each gets 1/sqrt(2) of it (PECOS's PIFA), docs 0 and 2 all of theirs
    # label 0: [.6, .8, 0, 0] + [0, 0, R2, 0] = [.6, .8, R2, 0], norm sqrt(1.5)
    # label 1: [0, 0, R2, 0] + [0, 0, 0, 1] = [0, 0, R2, 1], norm sqrt(1.5)
    r15 = 1 / np.sqrt(1.5)
    np.testing.assert_allclose(z[0], [0.6 * r15, 0.8 * r15, R2 * r15, 0.0], rtol=1e-6)
    np.testing.assert_allclose(z[1], [0.0, 0.0, R2 * r15, r15], rtol=1e-6)


def test_pifa_sum_over_partitions_equals_whole() -> None:
    parts = [pifa_partial(X[:1], Y[:1]), pifa_partial(X[1:], Y[1:])]
    assert abs(pifa(parts) - pifa([pifa_partial(X, Y)])).max() < 1e-7


def test_pifa_label_without_documents_is_zero_row() -> None:
    y = sp.hstack([Y, sp.csr_matrix((3, 1))], format="csr")
    z = pifa([pifa_partial(X, y)]).toarray()
    assert z.shape == (3, 4) and not z[2].any()


def test_pifa_equals_the_matrix_formula_on_many_chunks() -> None:
    # 300 documents, 90 labels, unsorted duplicate entries in X: more rows than kernel chunks
    rng = np.random.default_rng(0)
    x = sp.random(300, 50, density=0.1, random_state=0, format="coo", dtype=np.float32)
    x = sp.csr_matrix((np.r_[x.data, x.data[:20]], (np.r_[x.row, x.row[:20]],
                       np.r_[x.col, x.col[:20]])), shape=x.shape)  # fmt: skip
    y = sp.csr_matrix((rng.random((300, 90)) < 0.05).astype(np.float32))
    dense = x.toarray().astype(np.float64)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    y_dense = y.toarray().astype(np.float64)
    y_norms = np.linalg.norm(y_dense, axis=1, keepdims=True)
    y_rows = y_dense / np.where(y_norms > 0, y_norms, 1.0)
    sums = y_rows.T @ (dense / np.where(norms > 0, norms, 1.0))
    partial = pifa_partial(x, y)
    assert partial.has_sorted_indices and partial.dtype == np.float64
    np.testing.assert_allclose(partial.toarray(), sums, rtol=1e-12, atol=1e-12)
    lengths = np.linalg.norm(sums, axis=1, keepdims=True)
    z = pifa([partial])
    assert z.dtype == np.float32 and z.has_sorted_indices
    np.testing.assert_allclose(z.toarray(), sums / np.where(lengths > 0, lengths, 1.0), atol=1e-7)


def test_pifa_rejects_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="rows"):
        pifa_partial(X, Y[:2])


def test_concat_weights_blocks_and_normalizes() -> None:
    a = sp.csr_matrix(np.array([[3.0, 4.0], [0.0, 0.0]]))
    b = sp.csr_matrix(np.array([[2.0], [5.0]]))
    z = concat_label_features([a, b], [1.0, 2.0]).toarray()
    # row 0: [.6, .8] and [2] -> [.6, .8, 2] / sqrt(5); row 1: only the text block -> [0, 0, 1]
    np.testing.assert_allclose(z[0], np.array([0.6, 0.8, 2.0]) / np.sqrt(5.0), rtol=1e-6)
    np.testing.assert_allclose(z[1], [0.0, 0.0, 1.0])


def test_label_index_sorted_encode_unknown_and_duplicates() -> None:
    idx = LabelIndex.from_label_lists([pa.array([["b", "a"], ["c"]]), pa.array([["a"]])])
    assert idx.names.to_pylist() == ["a", "b", "c"]
    y, unknown = idx.encode(pa.array([["c", "zz"], [], ["a", "a", "b"]]))
    assert unknown == 1
    assert y.toarray().tolist() == [[0, 0, 1], [0, 0, 0], [1, 1, 0]]
    assert idx.decode(np.array([2, 0])) == ["c", "a"]


def test_an_extended_label_index_keeps_the_base_ids_and_appends_new_labels() -> None:
    base = LabelIndex.from_label_lists([pa.array([["b", "d"], ["a"]])])  # a, b, d
    idx = LabelIndex.extended(base, [pa.array([["e", "b"], ["c"]]), pa.array([["a", "c"]])])
    assert idx.names.to_pylist() == ["a", "b", "d", "c", "e"]  # d keeps its id without documents
    y, unknown = idx.encode(pa.array([["c", "d"], ["e", "zz"]]))
    assert unknown == 1 and y.toarray().tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 0, 1]]
    assert LabelIndex.extended(base, [pa.array([["a"]])]).names.equals(base.names)


def test_label_index_and_features_round_trip(tmp_path: Path) -> None:
    idx = LabelIndex(["x", "y"])
    idx.save(tmp_path / "idx")
    assert LabelIndex.load(tmp_path / "idx").names.equals(idx.names)
    lf = LabelFeatures(pifa([pifa_partial(X, Y)]), "pifa")
    lf.save(tmp_path / "z")
    back = LabelFeatures.load(tmp_path / "z")
    assert back.kind == "pifa" and (back.z != lf.z).nnz == 0 and back.text_blocks == ()
    z = lf.z
    blocked = LabelFeatures(z, "pifa_concat", z, np.array([1]), (1,))
    blocked.save(tmp_path / "t")
    back = LabelFeatures.load(tmp_path / "t")
    assert back.text_blocks == (1,) and back.zero_shot.tolist() == [1]
    for bad in ((0,), (z.shape[1],), (2, 1)):
        with pytest.raises(ValueError, match="do not split"):
            LabelFeatures(z, "pifa_concat", z, None, bad)


def test_label_text_matrix_aligns_by_name_and_zero_for_missing() -> None:
    vec = TfidfVectorizer(TfidfConfig(max_features=None), TokenizerConfig(ngram_max=1))
    vec.fit(["red apple", "green pear", "red pear"])
    idx = LabelIndex(["fruit-a", "fruit-b", "no-text"])
    texts = pa.table({"label": ["fruit-b", "fruit-a"], "text": ["green pear", "red apple"]})
    m = label_text_matrix(vec, idx, texts)
    expected = vec.transform(["red apple", "green pear", None])
    assert m.shape == (3, vec.n_features) and abs(m - expected).max() == 0
    assert m[2].nnz == 0
