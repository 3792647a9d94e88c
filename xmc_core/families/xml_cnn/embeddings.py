"""Initial word embeddings of XML-CNN, and GloVe-format word-vector files.

Three initialisations (``xml_cnn.embedding_init``), each float32 (len(words), dim):

- ``minilm``: each word's WordPiece pieces by the packaged all-MiniLM-L6-v2's tokenizer, the
  mean of their rows of its ``embeddings.word_embeddings.weight`` (dim 384; pretrained and
  offline: the nearest thing to the paper's GloVe vectors);
- ``corpus``: word vectors learnt from ``texts`` (the training documents): a truncated SVD
  (seeded randomized SVD, numpy/scipy only) of the positive-PMI matrix of word co-occurrences
  within :data:`WINDOW` words, ``U * sqrt(S)``, each row scaled to unit norm;
- ``random``: seeded normal values times :data:`RANDOM_SCALE`.

Row 0 (padding) is zero and stays zero (the network's ``padding_idx``); row 1 (unknown words)
is the mean of the other rows, the vector of an average word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.config import TokenizerConfig
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.storage.artifacts import load_arrays, read_meta, save_arrays, write_meta
from xmc_core.storage.atomic import write_text

WINDOW = 5
"""``corpus``: words at most this far apart co-occur."""
RANDOM_SCALE = 0.1
"""``random``: standard deviation of the initial values."""
MINILM_KEY = "embeddings.word_embeddings.weight"


def initial_embeddings(
    words: list[str], cfg: XmlCnnConfig, texts: Sequence[str | None] | None = None,
    tokenizer: TokenizerConfig | None = None,
) -> np.ndarray:  # fmt: skip
    """The initial embedding matrix float32 (len(words), dim) of a vocabulary whose first two
    words are padding and unknown (see the module docstring). ``texts``: the training texts
    (``corpus`` only), cut into words by ``tokenizer`` (default: the project's defaults)."""
    if cfg.embedding_init == "minilm":
        E = minilm_vectors(words[2:])
    elif cfg.embedding_init == "corpus":
        if texts is None:
            raise ValueError("embedding_init=corpus needs the training texts")
        E = corpus_vectors(words, texts, cfg.embedding_dim, cfg.seed, cfg.max_length, tokenizer)
        E = E[2:]
    else:
        rng = np.random.default_rng([cfg.seed, 7])
        E = rng.normal(0.0, RANDOM_SCALE, (len(words) - 2, cfg.embedding_dim))
    E = np.asarray(E, dtype=np.float32)
    unknown = E.mean(axis=0) if len(E) else np.zeros(E.shape[1], np.float32)
    return np.vstack([np.zeros((1, E.shape[1]), np.float32), unknown[None, :], E])


def minilm_vectors(words: list[str]) -> np.ndarray:
    """Mean of each word's WordPiece rows in the packaged MiniLM: float32 (len(words), 384)."""
    from safetensors import safe_open

    from xmc_core.transformer.encoder import default_encoder_path, load_tokenizer

    folder = default_encoder_path()
    tokenizer = load_tokenizer(folder)
    with safe_open(str(folder / "model.safetensors"), framework="np") as weights:
        table = weights.get_tensor(MINILM_KEY).astype(np.float32)
    pieces = tokenizer(words, add_special_tokens=False)["input_ids"] if words else []
    out = np.zeros((len(words), table.shape[1]), dtype=np.float32)
    for i, ids in enumerate(pieces):
        ids = ids or [tokenizer.unk_token_id]
        out[i] = table[ids].mean(axis=0)
    return out


def cooccurrences(ids: np.ndarray, lengths: np.ndarray, n_words: int) -> sp.csr_matrix:
    """Symmetric counts csr (n_words, n_words) of word pairs at most :data:`WINDOW` apart in
    the documents ``ids`` int (n, T) (padding id 0 and unknown id 1 left out)."""
    rows, cols = [], []
    valid = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    for d in range(1, min(WINDOW, ids.shape[1] - 1) + 1):
        a, b = ids[:, :-d], ids[:, d:]
        ok = valid[:, d:] & (a > 1) & (b > 1)
        rows += [a[ok], b[ok]]
        cols += [b[ok], a[ok]]
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    data = np.ones(len(r), dtype=np.float64)
    return sp.csr_matrix((data, (r, c)), shape=(n_words, n_words))


def ppmi(C: sp.csr_matrix) -> sp.csr_matrix:
    """Positive pointwise mutual information of co-occurrence counts ``C``."""
    C = sp.csr_matrix(C, dtype=np.float64)
    total = C.sum()
    if total == 0:
        return C
    row = np.asarray(C.sum(axis=1)).ravel()
    coo = C.tocoo()
    pmi = np.log(coo.data * total / (row[coo.row] * row[coo.col]))
    keep = pmi > 0
    return sp.csr_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=C.shape)


def randomized_svd(A: sp.csr_matrix, k: int, seed: int, n_iter: int = 4) -> np.ndarray:
    """``U * sqrt(S)`` of the top ``k`` singular triplets of ``A`` (n, n): float64 (n, k)
    (Halko et al.: seeded Gaussian sketch, ``n_iter`` power iterations, QR in between)."""
    n = A.shape[0]
    width = min(n, k + 10)
    Q = np.random.default_rng([seed, 11]).normal(size=(n, width))
    Q, _ = np.linalg.qr(A @ Q)
    for _ in range(n_iter):
        Q, _ = np.linalg.qr(A.T @ Q)
        Q, _ = np.linalg.qr(A @ Q)
    U_small, S, _ = np.linalg.svd(np.asarray((A.T @ Q).T), full_matrices=False)
    U = (Q @ U_small)[:, :k] * np.sqrt(S[:k])
    return np.pad(U, ((0, 0), (0, k - U.shape[1])))  # fewer words than k: zero columns


def corpus_vectors(
    words: list[str], texts: Sequence[str | None], dim: int, seed: int, max_length: int,
    tokenizer: TokenizerConfig | None = None,
) -> np.ndarray:  # fmt: skip
    """Word vectors float32 (len(words), dim) from the first ``max_length`` words of each of
    ``texts``: unit rows of the PPMI SVD (rows of words that co-occur with none stay zero)."""
    from xmc_core.families.xml_cnn.vocab import Vocabulary

    tokens = Vocabulary(words, tokenizer or TokenizerConfig(), max_length).ids(texts)
    U = randomized_svd(ppmi(cooccurrences(tokens.input_ids, tokens.lengths, len(words))), dim, seed)
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    return (U / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def write_word_vectors(path: str | Path, words: list[str], vectors: np.ndarray) -> None:
    """``words`` and their rows of ``vectors`` (len(words), dim) as a GloVe text file (``word
    v1 v2 ...`` a line), written atomically."""
    if len(words) != len(vectors):
        raise ValueError(f"{len(words)} words, {len(vectors)} vectors")
    lines = (
        f"{w} {' '.join(f'{v:.6g}' for v in row)}\n" for w, row in zip(words, vectors, strict=True)
    )
    write_text(path, "".join(lines))


@dataclass(frozen=True)
class WordVectors:
    """An initial embedding matrix float32 (n_words, dim), saved as ``vectors.npz``."""

    vectors: np.ndarray

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / "vectors.npz", vectors=self.vectors)
        write_meta(folder, "WordVectors", {"shape": [*self.vectors.shape]})

    @classmethod
    def load(cls, folder: str | Path) -> WordVectors:
        read_meta(folder, "WordVectors")
        return cls(load_arrays(Path(folder) / "vectors.npz")["vectors"])
