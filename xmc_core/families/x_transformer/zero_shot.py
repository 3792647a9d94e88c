"""X-Transformer's zero-shot labels: a label with a text but no training document joins the
semantic label index by its text (the text's TF-IDF for the TF-IDF indexings, the pretrained
encoder's embedding of it for ``pifa_neural``), so it has a cluster the matcher can pick; its
per-label model is then made from its text in the ranker's space ``[TF-IDF, weight *
embedding]`` (the fine-tuned encoder's embedding), as XR-Transformer's
(:mod:`xmc_core.families.xr_transformer.zero_shot`; the fitted scale of
:mod:`xmc_core.linear.zero_shot`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.config import EncoderConfig, MatcherConfig
from xmc_core.corpus import Corpus
from xmc_core.families.xr_transformer.zero_shot import label_texts, text_features
from xmc_core.features.label_features import LabelFeatures, with_text_rows
from xmc_core.features.labels import LabelIndex
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.neural import resolve_device
from xmc_core.transformer.encoder import TextEncoder, default_encoder_path, load_tokenizer
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.onnx_int8 import embed_on
from xmc_core.transformer.tokens import tokenize_texts


def neural_text_rows(
    z: sp.csr_matrix, label_features: LabelFeatures, texts: pa.Array, model: TextEncoder,
    encoder: EncoderConfig, matcher: MatcherConfig,
) -> LabelFeatures:  # fmt: skip
    """``z`` (PIFA over the pretrained encoder's document embeddings, csr (n_labels, h)) with
    each zero-shot label's row replaced by the same encoder's unit embedding of its text."""
    ids = label_features.zero_shot
    if not ids.size:
        return LabelFeatures(z, "pifa_neural")
    tokenizer = load_tokenizer(encoder.path or default_encoder_path())
    tokens = tokenize_texts(tokenizer, texts.take(pa.array(ids)), encoder.max_length)
    device = resolve_device(matcher.device)
    rows = np.zeros((z.shape[0], z.shape[1]), dtype=np.float32)
    rows[ids] = embed_on(model, tokens, device, matcher, "x-transformer: embedding label texts")
    unseen = np.zeros(z.shape[0], dtype=bool)
    unseen[ids] = True
    text = l2_normalize_rows(sp.csr_matrix(rows))
    return LabelFeatures(with_text_rows(z, text, unseen), "pifa_neural", text, ids)


def ranker_text_features(
    label_features: LabelFeatures, corpus: Corpus, index: LabelIndex,
    checkpoint: MatcherCheckpoint, matcher: MatcherConfig,
) -> LabelFeatures:  # fmt: skip
    """The labels' text rows in the ranker's space (TF-IDF beside the fine-tuned encoder's
    embedding, L2-normalized), with the zero-shot ids: what the zero-shot rankers read."""
    texts = label_texts(corpus, index)
    text = text_features(label_features, texts, checkpoint, matcher)
    blocks = (label_features.text.shape[1],)  # [TF-IDF, embedding]: each scaled on its own
    return LabelFeatures(text, "label_text_ranker", text, label_features.zero_shot, blocks)
