"""XR-Transformer end to end in one process (``xmc train`` with ``model.kind=xr-transformer``;
the flows run the same stages as cached tasks): tokenize, matcher tree, matcher levels
(checkpointed, resumable), embeddings, refined tree, final ranker."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.config import MatcherConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.fingerprint import combine
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.transformer.encoder import (
    TextEncoder,
    default_encoder_path,
    embed,
    load_tokenizer,
    resolve_device,
)
from xmc_core.transformer.matcher import MatcherCheckpoint, train_matcher
from xmc_core.transformer.ranker import (
    EmbeddingFeatures,
    concat_features,
    matcher_parent_shortlists,
    ranker_label_features,
)
from xmc_core.transformer.shortlist import top_clusters
from xmc_core.transformer.tokens import TokenizedTexts, tokenize_partition

log = logging.getLogger(__name__)


def tokenize_split(corpus: Corpus, split: str, cfg: XmcConfig) -> TokenizedTexts:
    """Every partition of ``split`` tokenized with the configured encoder's tokenizer."""
    tokenizer = load_tokenizer(cfg.encoder.path or default_encoder_path())
    parts = [
        tokenize_partition(corpus, ref, tokenizer, cfg.encoder.max_length)
        for ref in corpus.partitions(split)
    ]
    return TokenizedTexts.concat(parts)


def checkpoint_root(corpus: Corpus, cfg: XmcConfig) -> Path:
    """Where the matcher checkpoints of this corpus and configuration live (resumable)."""
    sections = (cfg.tokenizer, cfg.tfidf, cfg.label_features, cfg.tree, cfg.encoder, cfg.matcher)
    key = combine("matcher", corpus.fingerprint, *(s.fingerprint() for s in sections))
    return Path(cfg.work_dir) / "checkpoints" / key[:24]


def matcher_predictions(ckpt: MatcherCheckpoint, E: np.ndarray, beam_size: int) -> sp.csr_matrix:
    """The last matcher level's top ``beam_size`` clusters for embeddings ``E`` (n, h)."""
    W, b = ckpt.head().arrays()
    return top_clusters(E, W, b, beam_size)


def final_embeddings(
    ckpt: MatcherCheckpoint, encoder: TextEncoder, tokens: TokenizedTexts, cfg: MatcherConfig
) -> np.ndarray:
    """Embeddings float32 (n, h) of every training document by the last level's encoder: the
    checkpoint already holds those of the matcher's documents; the rest are computed."""
    rows, E, _ = ckpt.state(tokens.n_docs)
    missing = np.setdiff1d(np.arange(tokens.n_docs), rows)
    if missing.size:
        device = resolve_device(cfg.device)
        what = "embedding the other training documents"
        E[missing] = embed(
            encoder, tokens.take(missing), device, cfg.embed_batch_size, cfg.bf16, what
        )
    return E


def fit_final_ranker(
    X: sp.csr_matrix,
    E: np.ndarray,
    Y: sp.csr_matrix,
    matcher_tree: LabelTree,
    ckpt: MatcherCheckpoint,
    cfg: XmcConfig,
) -> XRLinearModel:
    """XR-Linear on ``[X, w E]`` over a tree refined on the concatenated label features, with
    the matcher's predictions as extra (matcher-aware) negatives."""
    start = time.perf_counter()
    tree = LabelTree.build(ranker_label_features(X, E, Y), cfg.tree)
    P = matcher_predictions(ckpt, E, cfg.matcher.beam_size)
    extra = matcher_parent_shortlists(P, matcher_tree, ckpt.level, tree, cfg.matcher.beam_size)
    Xc = concat_features(X, E, cfg.matcher.embedding_weight)
    ranker = XRLinearModel(cfg.ranker, cfg.predict).fit(Xc, Y, tree, extra)
    log.info("final ranker on %d features in %.1f s", Xc.shape[1], time.perf_counter() - start)
    return ranker


def train_transformer(
    X: sp.csr_matrix, Y: sp.csr_matrix, label_features: sp.csr_matrix, corpus: Corpus,
    cfg: XmcConfig,
) -> tuple[XRLinearModel, EmbeddingFeatures]:  # fmt: skip
    """Matcher (every level, resuming from finished checkpoints), then the final ranker.

    ``X``, ``Y``: the training split's TF-IDF and labels, in corpus order; ``label_features``:
    csr (n_labels, d) for the matcher's tree. Returns the ranker and the feature extractor.
    """
    start = time.perf_counter()
    tokens = tokenize_split(corpus, "train", cfg)
    log.info("tokenized %d documents in %.1f s", tokens.n_docs, time.perf_counter() - start)
    matcher_tree = LabelTree.build(label_features, cfg.tree)
    ckpts = train_matcher(
        tokens, Y, matcher_tree, cfg.encoder, cfg.matcher, checkpoint_root(corpus, cfg)
    )
    encoder, tokenizer = ckpts[-1].encoder()
    E = final_embeddings(ckpts[-1], encoder, tokens, cfg.matcher)
    ranker = fit_final_ranker(X, E, Y, matcher_tree, ckpts[-1], cfg)
    features = EmbeddingFeatures(
        encoder, tokenizer, cfg.matcher.embedding_weight, cfg.matcher.embed_batch_size,
        cfg.matcher.device, cfg.matcher.bf16,
    )  # fmt: skip
    log.info("XR-Transformer trained in %.1f s", time.perf_counter() - start)
    return ranker, features
