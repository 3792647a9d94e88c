"""Initial embeddings (MiniLM pieces, corpus PPMI-SVD, random) and GloVe-format files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from safetensors import safe_open

from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.embeddings import (
    cooccurrences,
    initial_embeddings,
    ppmi,
    randomized_svd,
    write_word_vectors,
)
from xmc_core.transformer.encoder import default_encoder_path, load_tokenizer

WORDS = ["<pad>", "<unk>", "the", "unbelievably", "cat"]


def test_minilm_row_is_the_mean_of_the_word_pieces() -> None:
    E = initial_embeddings(WORDS, XmlCnnConfig(embedding_init="minilm"))
    folder = default_encoder_path()
    with safe_open(str(folder / "model.safetensors"), framework="np") as f:
        table = f.get_tensor("embeddings.word_embeddings.weight")
    vocab = load_tokenizer(folder).get_vocab()
    # "unbelievably" is five WordPiece pieces in MiniLM's vocabulary
    pieces = [vocab["un"], vocab["##bel"], vocab["##ie"], vocab["##va"], vocab["##bly"]]
    got = load_tokenizer(folder)("unbelievably", add_special_tokens=False)["input_ids"]
    assert got == pieces
    assert E.shape == (5, 384) and E.dtype == np.float32
    np.testing.assert_allclose(E[3], table[pieces].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(E[2], table[vocab["the"]])  # one piece: its own row
    assert not E[0].any()  # padding
    np.testing.assert_allclose(E[1], E[2:].mean(axis=0), rtol=1e-6)  # unknown: the mean word


def test_random_is_seeded_and_small() -> None:
    cfg = XmlCnnConfig(embedding_init="random", embedding_dim=8, seed=3)
    a, b = initial_embeddings(WORDS, cfg), initial_embeddings(WORDS, cfg)
    assert a.shape == (5, 8) and np.array_equal(a, b)
    assert 0.02 < float(np.abs(a[2:]).mean()) < 0.2
    other = initial_embeddings(WORDS, cfg.model_copy(update={"seed": 4}))
    assert not np.array_equal(a, other)


def test_cooccurrence_and_ppmi_by_hand() -> None:
    ids = np.array([[2, 3, 4, 0], [2, 3, 1, 0]])  # words 2 3 4; 2 3 <unk>
    C = cooccurrences(ids, np.array([3, 3]), 5).toarray()
    assert C[2, 3] == 2 and C[3, 2] == 2  # adjacent twice
    assert C[2, 4] == 1 and C[3, 4] == 1  # within the window once
    assert C[:, 1].sum() == 0 and C[:, 0].sum() == 0  # unknown and padding left out
    P = ppmi(sp.csr_matrix(C)).toarray()
    total, row = C.sum(), C.sum(axis=1)  # 8; rows 2: 3, 3: 3, 4: 2
    assert P[2, 3] == pytest.approx(max(0.0, np.log(2 * total / (row[2] * row[3]))))
    assert P[2, 4] == pytest.approx(np.log(1 * total / (row[2] * row[4])))


def test_randomized_svd_recovers_a_low_rank_matrix() -> None:
    rng = np.random.default_rng(0)
    U = rng.normal(size=(40, 3))
    A = sp.csr_matrix(U @ U.T)
    V = randomized_svd(A, 3, seed=0)
    np.testing.assert_allclose(V @ V.T, A.toarray(), atol=1e-8)


def test_corpus_vectors_put_words_of_one_context_together() -> None:
    texts = ["red apple sweet apple", "sweet red apple", "fast car loud car", "loud fast car"] * 5
    words = ["<pad>", "<unk>", "apple", "car", "red", "sweet", "fast", "loud"]
    cfg = XmlCnnConfig(embedding_init="corpus", embedding_dim=2, max_length=8)
    E = initial_embeddings(words, cfg, texts)
    unit = E[2:] / np.linalg.norm(E[2:], axis=1, keepdims=True)
    cos = unit @ unit.T
    assert cos[2, 3] > 0.9 and cos[4, 5] > 0.9  # red~sweet, fast~loud
    assert cos[2, 4] < 0.1  # red vs fast
    with pytest.raises(ValueError, match="training texts"):
        initial_embeddings(words, cfg)


def test_glove_file(tmp_path: Path) -> None:
    write_word_vectors(tmp_path / "v.txt", ["a", "b"], np.array([[1.0, 0.5], [-2.0, 0.25]]))
    assert (tmp_path / "v.txt").read_text() == "a 1 0.5\nb -2 0.25\n"
    with pytest.raises(ValueError, match="2 words, 1 vectors"):
        write_word_vectors(tmp_path / "w.txt", ["a", "b"], np.ones((1, 2)))
