"""XR-Transformer's zero-shot labels: a label with a text but no training document gets, as
its features in the ranker's space ``[TF-IDF, weight * embedding]``, its text's TF-IDF beside
the fine-tuned encoder's embedding of its text; it is placed in the ranker's tree by the
TF-IDF, and scored by both as XR-Linear scores its zero-shot labels
(:mod:`xmc_core.linear.zero_shot`: a fitted scale per block times the cosine of document and
text in that block)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.config import MatcherConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.featurize import zero_shot_on
from xmc_core.families.xr_transformer.warm import states_root
from xmc_core.features.label_features import LabelFeatures, aligned_label_texts, with_text_rows
from xmc_core.features.labels import LabelIndex
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.neural import resolve_device
from xmc_core.stages.graph import Runner
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.ranker import concat_features
from xmc_core.transformer.states import embed_final
from xmc_core.transformer.tokens import tokenize_texts


def label_texts(corpus: Corpus, index: LabelIndex) -> pa.Array:
    """Each label's text in label-id order (null where it has none); zero-shot labels come
    from the label texts, so a corpus without them is an error here."""
    texts = corpus.label_texts()
    if texts is None:
        raise ValueError("zero-shot labels need the corpus's label texts")
    return aligned_label_texts(index, texts)


def text_features(
    label_features: LabelFeatures, texts: pa.Array, checkpoint: MatcherCheckpoint,
    matcher: MatcherConfig, states_root: str | None = None,
) -> sp.csr_matrix:  # fmt: skip
    """csr (n_labels, d + h): the labels' text rows in the ranker's space, L2-normalized;
    zero rows for the labels without a text TF-IDF row (as :class:`LabelFeatures`' text).
    ``texts``: each label's text in label-id order (``aligned_label_texts``); embedded as
    documents are, through the encoder-state cache ``states_root`` when there is one
    (:func:`~xmc_core.transformer.states.embed_final`: a warm start runs only the top layers
    for the texts a run before it embedded)."""
    assert label_features.text is not None
    has = np.flatnonzero(np.diff(label_features.text.indptr) > 0)
    encoder, tokenizer = checkpoint.encoder()
    E = np.zeros((label_features.text.shape[0], encoder.hidden_size), dtype=np.float32)
    if has.size:
        tokens = tokenize_texts(tokenizer, texts.take(has), encoder.cfg.max_length)
        device = resolve_device(matcher.device)
        what = "embedding the label texts"
        E[has] = embed_final(encoder, tokens, device, matcher, states_root, what)
    return l2_normalize_rows(concat_features(label_features.text, E, matcher.embedding_weight))


def with_zero_shot(z: sp.csr_matrix, label_features: LabelFeatures, text: sp.csr_matrix,
                   kind: str) -> LabelFeatures:  # fmt: skip
    """The ranker's label features ``z`` (PIFA over ``[TF-IDF, embedding]``) with each
    zero-shot label's row replaced by its text's TF-IDF (the embedding block zero), the text
    rows and the zero-shot ids kept (what the zero-shot rankers read, one scale per block).
    A zero-shot label is placed in the tree by that row: a short label text's embedding is
    too unlike the mean embedding of a label's documents to place it by (debian-deps: the
    unseen labels' R@10 halves when it is placed by both blocks)."""
    unseen = np.zeros(z.shape[0], dtype=bool)
    unseen[label_features.zero_shot] = True
    assert label_features.text is not None
    width = label_features.text.shape[1]
    tfidf = sp.hstack([label_features.text, sp.csr_matrix((z.shape[0], z.shape[1] - width))])
    return LabelFeatures(
        with_text_rows(z, sp.csr_matrix(tfidf), unseen), kind, text, label_features.zero_shot,
        (width,),
    )  # fmt: skip


def zero_shot_inputs(
    run: Runner, feats: dict[str, Any], cfg: XmcConfig, checkpoint: Any
) -> dict[str, Any]:
    """What the ranker's label features need for zero-shot labels (this module), or {}
    when there are none to make (off, or no label texts)."""
    if not zero_shot_on(cfg, run.value(feats["corpus"])):
        return {}
    return {
        "label_features": feats["label_features"], "corpus": feats["corpus"],
        "index": feats["label_index"], "checkpoint": checkpoint, "matcher": cfg.matcher,
        "states_root": states_root(cfg.matcher, cfg.work_dir),
    }  # fmt: skip
