"""The tests' tiny encoder is the same every time it is built (the transformer tests compare
models trained in two processes, each against its own build's results)."""

from __future__ import annotations

from pathlib import Path

from tokenizers import normalizers, pre_tokenizers

from tests.transformer.tiny import build_tiny_encoder, vocab

TEXTS = ["Cats chase mice.", "cats sleep", "Mice chase cheese; cats sleep!"]


def test_vocab_is_ranked_by_count_then_spelling() -> None:
    ids = vocab(
        TEXTS, normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    )
    chars = sorted(set("catschasemicesleepcheese.;!"))
    words = ["cats", "chase", "mice", "sleep", "cheese"]  # 3, 2, 2, 2, 1 times
    assert list(ids) == [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars), *words,
    ]  # fmt: skip
    assert list(ids.values()) == list(range(len(ids)))


def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    texts = [f"topic {i % 7} word{i % 13} shared words and more words {i}" for i in range(200)]
    a = build_tiny_encoder(tmp_path / "a", texts)
    b = build_tiny_encoder(tmp_path / "b", texts)
    for name in ("tokenizer.json", "model.safetensors"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
