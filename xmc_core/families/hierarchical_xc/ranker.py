"""The node classifiers of HierarchicalXC, on XR-Linear's per-level linear rankers.

In the level chain of a binary label tree (:mod:`xmc_core.families.hierarchical_xc.hierarchy`)
a node with a sibling is one half of its parent's decision: its logistic classifier, trained on
the documents that
reach the parent, says whether the node's labels are relevant (left, right or both). An *only
child* (a label continued below its depth, or a 2-means cluster with one child) is relevant
exactly when its parent is: it is not trained, and its weights are a bias alone whose sigmoid
is 1 in float32, so beam search multiplies the real decisions' probabilities only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.config import PredictConfig, RankerConfig
from xmc_core.errors import InputError
from xmc_core.linear.levels import importance_weights, level_problems
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.solver import train_level
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import Negatives
from xmc_core.storage.artifacts import read_meta, write_meta

log = logging.getLogger(__name__)

CERTAIN_LOGIT = 40.0
"""The score of an only child: sigmoid(40) = 1 - 4e-18, exactly 1.0 in float32."""


def only_children(C: sp.csr_matrix) -> np.ndarray:
    """Nodes of a level (rows of ``C``: csr (K, P) child -> parent) that are their parent's
    only child: bool (K,)."""
    parent = sp.csr_matrix(C).indices
    return np.bincount(parent, minlength=C.shape[1])[parent] == 1


def fit_node_level(
    X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, t: int, trained: list[sp.csc_matrix],
    cfg: RankerConfig, post_processor: str, extra_parents: sp.csr_matrix | None = None,
) -> sp.csc_matrix:  # fmt: skip
    """The classifiers of tree level ``t`` (as :func:`xmc_core.linear.model.fit_level`), only
    children set to certain. ``X``: csr (n_docs, n_features); ``Y``: csr (n_docs, n_labels);
    ``trained``: the levels above; returns W: csc (n_features + 1, K_{t+1}), last row the bias
    weights (``cfg.bias`` must be > 0)."""
    if len(trained) != t:
        raise ValueError(f"level {t} needs the {t} levels above it, got {len(trained)}")
    if cfg.bias <= 0:
        raise ValueError("only children need a bias feature: ranker.bias must be > 0")
    C = tree.C[t]
    decided = np.flatnonzero(~only_children(C))
    W = sp.csc_matrix((X.shape[1] + 1, 0), dtype=np.float32)
    start = time.perf_counter()
    if decided.size:
        targets, M = level_problems(X, Y, tree.C, t, trained, cfg, post_processor, extra_parents)
        R = importance_weights(Y, tree.C, t)[:, decided] if cfg.importance_weights else None
        W = train_level(X, targets[t][:, decided], C[decided], M, cfg, R, what=f"level {t}")
    log.debug(
        "level %d: %d of %d nodes decide, W nnz %d, %.1f s",
        t, decided.size, C.shape[0], W.nnz, time.perf_counter() - start,
    )  # fmt: skip
    return with_certain_nodes(W, decided, C.shape[0], cfg.bias)


def with_certain_nodes(
    W: sp.csc_matrix, decided: np.ndarray, n_nodes: int, bias: float
) -> sp.csc_matrix:
    """The level's weights: csc (n_features + 1, n_nodes) with ``W``'s columns at ``decided``
    and, in every other column, the bias weight ``CERTAIN_LOGIT / bias`` alone."""
    n_rows = W.shape[0]
    certain = np.setdiff1d(np.arange(n_nodes), decided)
    bias_only = sp.csc_matrix(
        (np.full(certain.size, CERTAIN_LOGIT / bias, np.float32),
         (np.full(certain.size, n_rows - 1), np.arange(certain.size))),
        shape=(n_rows, certain.size),
    )  # fmt: skip
    joined = sp.hstack([sp.csc_matrix(W, dtype=np.float32), bias_only], format="csc")
    position = np.empty(n_nodes, dtype=np.int64)
    position[np.concatenate([decided, certain])] = np.arange(n_nodes)
    out = sp.csc_matrix(joined[:, position], dtype=np.float32)
    out.sort_indices()
    return out


class HierarchicalXcRanker(XRLinearModel):
    """XR-Linear's level rankers over a binary label tree: logistic node classifiers, only
    children certain, sigmoid probabilities multiplied down the tree by beam search. Saved as
    an XR-Linear model is, under its own class name."""

    def fit(
        self,
        X: sp.csr_matrix,
        Y: sp.csr_matrix,
        tree: LabelTree,
        negatives: Negatives | None = None,
    ) -> HierarchicalXcRanker:
        """Train every level, coarse to fine, as the family does (:func:`fit_node_level`)."""
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows, Y has {Y.shape[0]}")
        if Y.shape[1] != tree.n_labels:
            raise ValueError(f"Y has {Y.shape[1]} labels, the tree {tree.n_labels}")
        weights: list[sp.csc_matrix] = []
        post = self.predict_cfg.post_processor
        for t in range(tree.depth):
            extra = None if negatives is None else negatives.level(t)
            weights.append(fit_node_level(X, Y, tree, t, weights, self.ranker, post, extra))
        self.set_levels(tree, weights, X.shape[1])
        return self

    def save(self, folder: str | Path) -> None:
        """XR-Linear's layout (``tree/``, ``W{t}.npz``, ``meta.json``), under this class's name."""
        folder = Path(folder)
        super().save(folder)
        meta = read_meta(folder, "XRLinearModel")
        write_meta(folder, type(self).__name__, {k: meta[k] for k in _FIELDS})

    @classmethod
    def load(cls, folder: str | Path) -> HierarchicalXcRanker:
        """Read a folder written by :meth:`save`; fails clearly if anything is off."""
        return cls.load_as(Path(folder), cls.__name__)


_FIELDS = ("ranker", "predict", "n_features", "n_labels", "depth")
"""The fields of XR-Linear's ``meta.json`` a saved :class:`HierarchicalXcRanker` keeps."""


def node_settings(
    ranker: RankerConfig, predict: PredictConfig
) -> tuple[RankerConfig, PredictConfig]:
    """The ranker and predict sections this family trains with: logistic loss, sigmoid
    post-processor (a different setting is replaced, with a warning). ``ranker.bias`` 0 is
    refused: an only child's certainty is its bias weight."""
    if ranker.bias <= 0:
        raise InputError(
            None,
            f"hierarchical-xc needs the bias feature (ranker.bias={ranker.bias}): an only "
            "child's probability 1 is carried by its bias weight",
            "set ranker.bias to a positive value (the default is 1)",
        )
    if ranker.loss != "logistic" or predict.post_processor != "sigmoid":
        log.warning(
            "hierarchical-xc: node classifiers are logistic and their probabilities multiply "
            "down the tree; ranker.loss=%s and predict.post_processor=%s replaced by logistic "
            "and sigmoid", ranker.loss, predict.post_processor,
        )  # fmt: skip
    return (
        ranker.model_copy(update={"loss": "logistic"}),
        predict.model_copy(update={"post_processor": "sigmoid"}),
    )
