"""The word vocabulary of XML-CNN and documents as word ids.

The vocabulary is built from the TRAINING split only, with the project's word tokenizer
(:mod:`xmc_core.features.tokenizer`, unigrams): the ``vocab_size`` words of most occurrences
among those seen in at least ``min_count`` documents (ties: the word's order), after two
reserved ids, ``0`` padding and ``1`` unknown. A document is its first ``max_length`` words as
ids, held in a :class:`~xmc_core.transformer.tokens.TokenizedTexts` (ids int32 (n, max_length)
padded with 0, lengths int32 (n,)). Saved as ``vocab.json`` (no pickle).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xmc_core.config import TokenizerConfig
from xmc_core.errors import ArtifactError
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.features.tokenizer import tokenize
from xmc_core.storage.artifacts import meta_fields, read_meta, write_meta
from xmc_core.storage.atomic import write_json
from xmc_core.transformer.tokens import TokenizedTexts

if TYPE_CHECKING:
    from xmc_core.corpus import Corpus, PartitionRef

PAD, UNKNOWN = 0, 1
RESERVED = ("<pad>", "<unk>")
VOCAB_FILE = "vocab.json"
Texts = Sequence[str | None] | pa.Array | pa.ChunkedArray


def word_tokenizer(tokenizer: TokenizerConfig) -> TokenizerConfig:
    """The project's tokenizer settings with unigrams only (a CNN reads word sequences)."""
    return tokenizer.model_copy(update={"ngram_max": 1})


@dataclass(frozen=True)
class Vocabulary:
    """``words``: id -> word (``words[0]`` padding, ``words[1]`` unknown); ``tokenizer``: how
    texts are cut into words; ``max_length``: words kept per document."""

    words: list[str]
    tokenizer: TokenizerConfig
    max_length: int

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, texts: Texts) -> TokenizedTexts:
        """Word ids of ``texts``: int32 (n, max_length), each row its first ``max_length``
        words (unknown words -> 1), padded with 0; lengths int32 (n,)."""
        grams = tokenize(texts, word_tokenizer(self.tokenizer))
        n = grams.n_docs
        starts = np.searchsorted(grams.doc, np.arange(n))
        position = np.arange(len(grams.doc)) - starts[grams.doc]
        keep = position < self.max_length
        found = pc.index_in(grams.terms, value_set=pa.array(self.words[2:], pa.large_string()))
        word = found.fill_null(UNKNOWN - 2).to_numpy(zero_copy_only=False).astype(np.int64) + 2
        ids = np.zeros((n, self.max_length), dtype=np.int32)
        ids[grams.doc[keep], position[keep]] = word[keep]
        lengths = np.minimum(np.bincount(grams.doc, minlength=n), self.max_length)
        return TokenizedTexts(ids, lengths.astype(np.int32))

    def save(self, folder: str | Path) -> None:
        """``vocab.json`` (the words, id order) and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / VOCAB_FILE, self.words)
        fields = {
            "n_words": len(self.words), "max_length": self.max_length,
            "tokenizer": self.tokenizer.model_dump(mode="json"),
        }  # fmt: skip
        write_meta(folder, "Vocabulary", fields)

    @classmethod
    def load(cls, folder: str | Path) -> Vocabulary:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "Vocabulary")
        words = json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8"))
        if not isinstance(words, list) or words[:2] != list(RESERVED):
            raise ArtifactError(folder / VOCAB_FILE, "not a word list", "re-create it")
        with meta_fields(folder):
            return cls(words, TokenizerConfig(**meta["tokenizer"]), int(meta["max_length"]))


def build_vocabulary(texts: Texts, tokenizer: TokenizerConfig, cfg: XmlCnnConfig) -> Vocabulary:
    """The ``cfg.vocab_size`` words of ``texts`` (the training documents) with the most
    occurrences, among those in at least ``cfg.min_count`` documents; ties in first-seen
    order. ``vocab_size`` counts the two reserved ids; documents keep ``cfg.max_length``
    words."""
    return count_vocabulary(texts, tokenizer, cfg.vocab_size, cfg.min_count, cfg.max_length)


def count_vocabulary(
    texts: Texts, tokenizer: TokenizerConfig, vocab_size: int, min_count: int, max_length: int
) -> Vocabulary:
    """:func:`build_vocabulary` from the settings it reads."""
    grams = tokenize(texts, word_tokenizer(tokenizer))
    encoded = grams.terms.dictionary_encode()  # term ids in first-seen order
    terms = encoded.dictionary.to_pylist()
    term_of = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    counts = np.bincount(term_of, minlength=len(terms))
    n_docs = max(grams.n_docs, 1)
    pairs = np.unique(term_of * n_docs + grams.doc)
    doc_counts = np.bincount(pairs // n_docs, minlength=len(terms))
    kept = np.flatnonzero(doc_counts >= min_count)
    order = kept[np.argsort(-counts[kept], kind="stable")][: vocab_size - len(RESERVED)]
    return Vocabulary([*RESERVED, *(terms[i] for i in order)], tokenizer, max_length)


def vocabulary(
    corpus: Corpus, tokenizer: TokenizerConfig, vocab_size: int, min_count: int, max_length: int
) -> Vocabulary:
    """The vocabulary of a corpus's training split (:func:`count_vocabulary`)."""
    texts = corpus.read_split("train", ["text"]).column("text")
    return count_vocabulary(texts, tokenizer, vocab_size, min_count, max_length)


def partition_ids(corpus: Corpus, ref: PartitionRef, vocab: Vocabulary) -> TokenizedTexts:
    """Word ids of one corpus partition's texts."""
    return vocab.ids(corpus.read_partition(ref, ["text"]).column("text"))
