"""A tiny random BERT with a WordPiece tokenizer trained on the given texts, saved as a local
Hugging Face folder, so the XR-Transformer tests run in seconds on a CPU without downloads."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_encoder(folder: Path, texts: Iterable[str], hidden: int = 32, seed: int = 0) -> Path:
    """Write a 2-layer BERT (``hidden`` wide) and its tokenizer to ``folder``; returns it."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(
        texts, trainers.WordPieceTrainer(vocab_size=600, special_tokens=SPECIALS)
    )
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
