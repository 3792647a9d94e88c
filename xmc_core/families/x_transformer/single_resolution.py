"""X-Transformer's parts (Chang et al. 2020) on XR-Transformer's: one cluster resolution.

The label tree is cut to ``root -> K clusters -> labels`` at its finest cluster level (clusters
of at most ``tree.max_leaf_size`` labels). The matcher is fine-tuned once, at level 0 of that
tree (the K clusters), from the pretrained encoder, with neither head bootstrapping nor
importance weights: the squared hinge on ±1 cluster targets. The ranker is an XR-Linear model
over the same two-level tree whose level 0 *is* the matcher's head laid into the ranker's input
``[TF-IDF, weight * e]`` (zero on the TF-IDF columns), so beam search keeps the matcher's top
clusters and the label level scores only their labels; the label level is the per-label
squared-hinge models, trained on the labels of the true clusters (``tfn``), of the matcher's top
``matcher.beam_size`` clusters (``man``) or both.

Beam search transforms level 0's scores by ``predict.post_processor``: ``noop`` (the
reference's, the ranker's score alone) and ``sigmoid`` keep the matcher's order; ``l3-hinge``
caps scores of 1 and above at 1, so among more than ``beam_size`` such clusters the beam keeps
the lower ids.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xmc_core.config import MatcherConfig, RankerConfig, TreeConfig
from xmc_core.errors import InputError
from xmc_core.features.pifa import pifa, pifa_partial
from xmc_core.linear.levels import binarize, importance_weights, level_targets, matching_matrix
from xmc_core.linear.solver import train_level
from xmc_core.linear.tree import LabelTree, planned_level_sizes
from xmc_core.transformer.shortlist import levels_of_sizes

CLUSTER_LEVEL = 0
"""The level of :func:`cluster_tree` the matcher trains: its K clusters."""


def cluster_tree(tree: LabelTree) -> LabelTree:
    """``tree`` cut at its finest cluster level: ``root -> K clusters -> labels``, where the
    K clusters are the parents of the labels in ``tree`` (``C[-1]``: csr (n_labels, K))."""
    n_clusters = tree.C[-1].shape[1]
    root = sp.csr_matrix(np.ones((n_clusters, 1), dtype=np.float32))
    return LabelTree([root, tree.C[-1]], tree.config)


def single_level_matcher(tree: LabelTree, cfg: MatcherConfig) -> MatcherConfig:
    """``cfg`` set to train only level 0 of the cluster tree ``tree`` (its K clusters: the
    matcher's level choice, ``min_clusters = max_clusters = K``), from the pretrained encoder,
    without head bootstrapping or importance weights (±1 cluster targets)."""
    n_clusters, n_labels = tree.level_sizes()
    if tree.depth != 2 or n_clusters == n_labels:
        raise InputError(
            None,
            f"x-transformer needs clusters of several labels; this tree has {n_clusters:,} "
            f"clusters for {n_labels:,} labels",
            "raise tree.max_leaf_size (clusters hold up to that many labels)",
        )
    return cfg.model_copy(
        update={
            "min_clusters": n_clusters, "max_clusters": n_clusters, "bootstrap": False,
            "importance_weights": False,
        }
    )  # fmt: skip


def head_as_level(
    W: np.ndarray, b: np.ndarray, n_tfidf: int, embedding_weight: float, bias: float
) -> sp.csc_matrix:
    """The matcher head as ranker level 0: csc (n_tfidf + h + 1, K) float32.

    ``W``: (K, h), ``b``: (K,) the head (``score = e · W[k] + b[k]`` on unit embeddings ``e``).
    The ranker's input is ``[x_tfidf, embedding_weight * e, bias]``, so the rows of the
    embedding block hold ``W / embedding_weight`` and the bias row ``b / bias``: the level's
    score is the head's, up to float rounding. Zero on the TF-IDF rows.
    """
    check_bias(bias)
    n_clusters = W.shape[0]
    embedding = W.T / np.float32(embedding_weight)
    bias_row = (b / np.float32(bias))[None, :]
    head = sp.csc_matrix(np.vstack([embedding, bias_row]).astype(np.float32))
    tfidf = sp.csc_matrix((n_tfidf, n_clusters), dtype=np.float32)
    return sp.vstack([tfidf, head], format="csc")


def check_bias(bias: float) -> None:
    """Refuse ``ranker.bias`` 0: level 0 carries the head's bias on the bias feature."""
    if bias <= 0:
        raise InputError(
            None, "x-transformer needs ranker.bias > 0: the matcher head's bias rides on it",
            "set ranker.bias=1",
        )  # fmt: skip


def label_matching(
    Y: sp.csr_matrix, tree: LabelTree, matched: sp.csr_matrix, cfg: RankerConfig
) -> sp.csr_matrix:
    """Which clusters' label problems each training document joins: csr (n_docs, K) binary.

    ``Y``: csr (n_docs, n_labels); ``tree``: the cluster tree; ``matched``: csr (n_docs, K),
    the matcher's top clusters of each document. ``cfg.negatives``: ``tfn`` the true clusters,
    ``man`` the matched ones, ``tfn+man`` both. A document trains every label of the clusters
    it joins (positive where it has the label, negative otherwise).
    """
    return matching_matrix(level_targets(Y, tree.C), 1, cfg, binarize(matched))


def training_pairs(M: sp.csr_matrix, tree: LabelTree) -> sp.csr_matrix:
    """The (document, label) pairs the label level trains on: csr (n_docs, n_labels) binary,
    the labels of the clusters in ``M`` (csr (n_docs, K), :func:`label_matching`)."""
    return binarize(M @ tree.C[1].T)


def fit_label_level(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, matched: sp.csr_matrix,
    cfg: RankerConfig,
) -> sp.csc_matrix:  # fmt: skip
    """The per-label linear models: W csc (n_features + 1, n_labels), the last row the bias.

    ``X``: csr (n_docs, n_features), the ranker's input; ``matched``: csr (n_docs, K), the
    matcher's top clusters (see :func:`label_matching`). The XR-Linear solver (``cfg``: loss,
    costs, pruning threshold) fits each cluster's labels on the documents that join it.
    """
    M = label_matching(Y, tree, matched, cfg)
    R = importance_weights(Y, tree.C, 1) if cfg.importance_weights else None
    return train_level(X, binarize(Y), tree.C[1], M, cfg, R, what="x-transformer labels")


def neural_pifa(E: np.ndarray, Y: sp.csr_matrix) -> sp.csr_matrix:
    """PIFA over document embeddings: csr (n_labels, h) float32, unit rows.

    ``E``: float32 (n_docs, h); ``Y``: csr (n_docs, n_labels). A label's row is the normalized
    sum of its documents' (unit) embeddings.
    """
    return pifa([pifa_partial(sp.csr_matrix(E.astype(np.float32, copy=False)), Y)])


def xr_transformer_steps(n_labels: int, tree: TreeConfig, matcher: MatcherConfig) -> int:
    """The matcher steps XR-Transformer takes on ``n_labels`` labels with these settings:
    ``matcher.steps_per_level`` per level it trains (``matcher_levels`` of the tree
    ``LabelTree.build`` makes). Setting X-Transformer's ``matcher.steps_per_level`` to it
    gives both families the same step budget (e.g. debian-deps' 42,850 labels, branching 16,
    ``max_clusters`` 512: levels of 32 and 512 clusters, 2 x 150 = 300)."""
    levels = levels_of_sizes(planned_level_sizes(n_labels, tree), matcher)
    return len(levels) * matcher.steps_per_level
