"""A tiny random BERT with a WordPiece tokenizer built from the given texts, saved as a local
Hugging Face folder, so the XR-Transformer tests run in seconds on a CPU without downloads.

The vocabulary is built here, not by ``tokenizers``' trainer: the trainer breaks ties between
equally frequent merges differently in every process, so two test runs got two different
encoders (and a model trained in-process vs through the CLI could disagree only in some runs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_encoder(folder: Path, texts: Iterable[str], hidden: int = 32, seed: int = 0) -> Path:
    """Write a 2-layer BERT (``hidden`` wide) and its tokenizer to ``folder``; returns it."""
    normalizer = normalizers.BertNormalizer(lowercase=True)
    splitter = pre_tokenizers.BertPreTokenizer()
    tok = Tokenizer(models.WordPiece(vocab(texts, normalizer, splitter), unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, splitter, decoders.WordPiece()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    from tokenizers.processors import TemplateProcessing

    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )  # fmt: skip
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=128,
    )  # fmt: skip
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    fast.save_pretrained(folder)
    return folder


def vocab(
    texts: Iterable[str], normalizer: normalizers.Normalizer,
    splitter: pre_tokenizers.PreTokenizer, size: int = 600,
) -> dict[str, int]:  # fmt: skip
    """Token ids, the same in every process: the specials, every character seen (alone and as a
    ``##`` continuation), then the most frequent words (ties by spelling) up to ``size``."""
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in words for c in w})
    tokens = [*SPECIALS, *chars, *(f"##{c}" for c in chars)]
    ranked = sorted((w for w in words if len(w) > 1), key=lambda w: (-words[w], w))
    tokens += ranked[: max(size - len(tokens), 0)]
    return {t: i for i, t in enumerate(tokens)}
