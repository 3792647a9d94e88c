"""XR-Transformer's zero-shot labels: a label with a text but no training document gets, as
its features in the ranker's space ``[TF-IDF, weight * embedding]``, its text's TF-IDF beside
the fine-tuned encoder's embedding of its text; it is placed in the ranker's tree by them, and
scored by them as XR-Linear scores its zero-shot labels (:mod:`xmc_core.linear.zero_shot`: a
fitted scale times the cosine of document and text)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.config import MatcherConfig
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.neural import resolve_device
from xmc_core.transformer.matcher import MatcherCheckpoint
from xmc_core.transformer.onnx_int8 import embed_on
from xmc_core.transformer.ranker import concat_features
from xmc_core.transformer.tokens import tokenize_texts


def aligned_texts(index: LabelIndex, texts: pa.Table) -> list[str]:
    """Each label's text in label-id order ("" where it has none): ``texts`` has the columns
    ``label`` and ``text`` (nullable), any order."""
    pos = pc.index_in(index.names, value_set=texts.column("label").cast(pa.large_string()))
    return [t or "" for t in texts.column("text").combine_chunks().take(pos).to_pylist()]


def text_features(
    label_features: LabelFeatures, texts: list[str], checkpoint: MatcherCheckpoint,
    matcher: MatcherConfig,
) -> sp.csr_matrix:  # fmt: skip
    """csr (n_labels, d + h): the labels' text rows in the ranker's space, L2-normalized;
    zero rows for the labels without a text TF-IDF row (as :class:`LabelFeatures`' text)."""
    assert label_features.text is not None
    has = np.flatnonzero(np.diff(label_features.text.indptr) > 0)
    encoder, tokenizer = checkpoint.encoder()
    E = np.zeros((label_features.text.shape[0], encoder.hidden_size), dtype=np.float32)
    if has.size:
        tokens = tokenize_texts(tokenizer, [texts[i] for i in has], encoder.cfg.max_length)
        device = resolve_device(matcher.device)
        E[has] = embed_on(encoder, tokens, device, matcher, "embedding the label texts")
    return l2_normalize_rows(concat_features(label_features.text, E, matcher.embedding_weight))


def with_zero_shot(z: sp.csr_matrix, label_features: LabelFeatures, text: sp.csr_matrix,
                   kind: str) -> LabelFeatures:  # fmt: skip
    """The ranker's label features ``z`` (PIFA over ``[TF-IDF, embedding]``) with each
    zero-shot label's row replaced by its ``text`` row, the text rows and the zero-shot ids
    kept (what the tree places them by and the zero-shot rankers read)."""
    unseen = np.zeros(z.shape[0], dtype=np.float32)
    unseen[label_features.zero_shot] = 1.0
    z = sp.csr_matrix(sp.diags(1.0 - unseen) @ z + sp.diags(unseen) @ text, dtype=np.float32)
    return LabelFeatures(z, kind, text, label_features.zero_shot)
