"""The word vocabulary: training words by frequency, reserved ids, truncation, round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xmc_core.config import TokenizerConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.families.xml_cnn.vocab import Vocabulary, build_vocabulary, vocabulary

TEXTS = ["the cat sat", "The dog sat on the mat", "a cat, a dog", None]


def test_words_by_count_then_first_seen_after_pad_and_unknown() -> None:
    cfg = XmlCnnConfig(vocab_size=6, max_length=8)
    vocab = build_vocabulary(TEXTS, TokenizerConfig(), cfg)
    # counts: the 3, sat 2, cat 2, dog 2, on 1, mat 1 ("a" is shorter than min_token_len=2)
    assert vocab.words == ["<pad>", "<unk>", "the", "cat", "sat", "dog"]
    twice = build_vocabulary(TEXTS, TokenizerConfig(), XmlCnnConfig(min_count=2, max_length=8))
    assert twice.words == ["<pad>", "<unk>", "the", "cat", "sat", "dog"]  # "on", "mat": 1 doc


def test_ids_are_padded_truncated_and_unknown_is_one() -> None:
    vocab = Vocabulary(["<pad>", "<unk>", "the", "cat"], TokenizerConfig(), max_length=3)
    tokens = vocab.ids(["The cat ate the fish", "cat", "", None])
    assert tokens.input_ids.tolist() == [[2, 3, 1], [3, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert tokens.lengths.tolist() == [3, 1, 0, 0]
    assert tokens.input_ids.dtype == np.int32


def test_built_from_the_training_split_only(cnn_dataset: Path) -> None:
    corpus = Corpus(cnn_dataset)
    vocab = vocabulary(corpus, TokenizerConfig(), 10**6, 1, 16)
    train = corpus.read_split("train", ["text"]).column("text")
    test = corpus.read_split("test", ["text"]).column("text")
    train_words = set(build_vocabulary(train, TokenizerConfig(), XmlCnnConfig()).words)
    assert set(vocab.words) == train_words
    test_only = set(build_vocabulary(test, TokenizerConfig(), XmlCnnConfig()).words) - train_words
    assert test_only and not test_only & set(vocab.words)


def test_round_trip_and_damage(tmp_path: Path) -> None:
    vocab = build_vocabulary(TEXTS, TokenizerConfig(lowercase=False), XmlCnnConfig(max_length=8))
    vocab.save(tmp_path / "v")
    again = Vocabulary.load(tmp_path / "v")
    assert again == vocab and again.tokenizer.lowercase is False
    (tmp_path / "v" / "vocab.json").write_text('["x"]')
    with pytest.raises(ArtifactError, match=r"vocab\.json"):
        Vocabulary.load(tmp_path / "v")
