"""A warm start's label tree: the champion's tree keeps its clusters, new labels join them.

Labels ``0 .. base.n_labels - 1`` are the champion's (a warm start's label index keeps their
ids, ``LabelIndex.extended``), the rest are new. Each new label joins the leaf cluster whose
centroid (the normalized sum of its known labels' normalized features) is closest in cosine,
ties to the lower leaf; a new label without features (no document, no text) joins the leaf with
fewest labels. A leaf grown past ``max_leaf_size`` is split by the same balanced spherical
2-means as :meth:`LabelTree.build`, its pieces taking its place under its parent (so siblings
stay contiguous); every other cluster keeps its labels, which is what lets a warm start reuse
the rankers of the nodes whose training problem did not change. Guests (X-Transformer's
zero-shot labels) split no leaf (:func:`build_with_placed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import InputError
from xmc_core.features.normalize import l2_normalize_rows
from xmc_core.linear.tree import LabelTree
from xmc_core.linear.tree import _assignment as _assign  # the same package's helper

CHUNK_ROWS = 4096
"""New labels scored against every leaf at a time (a dense block of this many rows)."""


@dataclass(frozen=True)
class Growth:
    """What :func:`grow_tree` did: the new labels' leaves in the grown tree (int64, one per
    new label), the base leaves that were split, and the grown leaves that hold exactly the
    labels they held in the base tree (``kept_leaves``: grown id -> base id)."""

    new_label_leaves: np.ndarray
    split_leaves: list[int]
    kept_leaves: dict[int, int]


def leaf_centroids(tree: LabelTree, Z: sp.csr_matrix) -> sp.csr_matrix:
    """csr (n_leaves, d): each leaf's normalized sum of its labels' normalized rows of ``Z``
    (the first ``tree.n_labels`` rows)."""
    known = l2_normalize_rows(sp.csr_matrix(Z[: tree.n_labels], dtype=np.float64))
    return l2_normalize_rows(sp.csr_matrix(tree.C[-1].T.astype(np.float64) @ known))


def place_new_labels(tree: LabelTree, Z: sp.csr_matrix) -> np.ndarray:
    """The base leaf of each new label (rows ``tree.n_labels ..`` of ``Z``): int64."""
    n_leaves = tree.C[-1].shape[1]
    new = l2_normalize_rows(sp.csr_matrix(Z[tree.n_labels :], dtype=np.float64))
    centroids_t = leaf_centroids(tree, Z).T.tocsc()
    best = np.empty(new.shape[0], dtype=np.int64)
    for lo in range(0, new.shape[0], CHUNK_ROWS):  # dense scores a chunk of labels at a time
        scores = (new[lo : lo + CHUNK_ROWS] @ centroids_t).toarray()
        best[lo : lo + CHUNK_ROWS] = np.argmax(scores, axis=1)  # ties: the lower leaf
    empty = np.diff(new.indptr) == 0
    placed = np.concatenate([tree.C[-1].indices, best[~empty]]).astype(np.int64)
    sizes = np.bincount(placed, minlength=n_leaves)
    for i in np.flatnonzero(empty):  # no features: the smallest leaf, then the lower id
        best[i] = int(np.argmin(sizes))
        sizes[best[i]] += 1
    return best


def grow_tree(
    base: LabelTree, Z: sp.csr_matrix, cfg: TreeConfig, guests: np.ndarray | None = None
) -> tuple[LabelTree, Growth]:
    """``base`` with the labels ``base.n_labels .. Z.shape[0] - 1`` placed (see the module
    doc) -> the grown tree and what was done. ``Z``: csr (n_labels, d), the warm start's label
    features (rows of known labels first). ``guests``: ids of labels that count toward no
    leaf's bound and take no part in a split (see :func:`build_with_placed`): a split leaf's
    guests join its closest piece."""
    Z = sp.csr_matrix(Z)
    if Z.shape[0] < base.n_labels:
        raise InputError(
            None, f"{Z.shape[0]} label feature rows for a base tree of {base.n_labels} labels",
            "give the features of every label, the base tree's first (LabelIndex.extended)",
        )  # fmt: skip
    is_guest = np.zeros(Z.shape[0], dtype=bool)
    if guests is not None:
        is_guest[guests] = True
    if base.depth == 1:  # labels straight under the root: a flat tree, or a cold one
        new = np.zeros(Z.shape[0] - base.n_labels, dtype=np.int64)
        if int((~is_guest).sum()) <= cfg.max_leaf_size:
            tree = LabelTree([_assign(np.zeros(Z.shape[0], np.int64), 1)], cfg)
            return tree, Growth(new, [], {} if len(new) else {0: 0})
        tree = build_with_placed(Z, np.flatnonzero(is_guest), cfg, split=False)
        return tree, Growth(tree.label_to_cluster(-2)[base.n_labels :], [0], {})
    leaf_of = np.concatenate([base.C[-1].indices.astype(np.int64), place_new_labels(base, Z)])
    n_leaves = base.C[-1].shape[1]
    parent_of = base.C[-2].indices.astype(np.int64)
    order = np.argsort(leaf_of, kind="stable")  # each leaf's labels, ascending
    members = np.split(order, np.cumsum(np.bincount(leaf_of, minlength=n_leaves))[:-1])
    grown_leaf = np.empty(len(leaf_of), dtype=np.int64)
    parents: list[int] = []
    split: list[int] = []
    kept: dict[int, int] = {}
    for k, labels in enumerate(members):
        hosts, guest = labels[~is_guest[labels]], labels[is_guest[labels]]
        too_big = len(hosts) > cfg.max_leaf_size
        pieces = _pieces(hosts, guest, Z, cfg) if too_big else [labels]
        if len(pieces) > 1:
            split.append(k)
        elif np.all(labels < base.n_labels):
            kept[len(parents)] = k
        for piece in pieces:
            grown_leaf[piece] = len(parents)
            parents.append(int(parent_of[k]))
    C = [*base.C[:-2], _assign(np.array(parents), base.C[-2].shape[1])]
    grown = LabelTree([*C, _assign(grown_leaf, len(parents))], cfg)
    return grown, Growth(grown_leaf[base.n_labels :], split, kept)


def _pieces(
    hosts: np.ndarray, guests: np.ndarray, Z: sp.csr_matrix, cfg: TreeConfig
) -> list[np.ndarray]:
    """``hosts`` cut into leaves of at most ``max_leaf_size`` by balanced spherical 2-means
    (:meth:`LabelTree.build` on their features), in the sub-tree's leaf order; each of the
    ``guests`` joins its closest piece (:func:`place_new_labels`)."""
    sub = LabelTree.build(sp.csr_matrix(Z[hosts]), cfg)
    labels = np.concatenate([hosts, guests])
    leaf = sub.C[-1].indices
    if guests.size:
        leaf = np.concatenate([leaf, place_new_labels(sub, sp.csr_matrix(Z[labels]))])
    return [labels[leaf == j] for j in range(sub.C[-1].shape[1])]


def build_with_placed(
    Z: sp.csr_matrix, placed: np.ndarray, cfg: TreeConfig, split: bool = True
) -> LabelTree:
    """A tree built on the labels not in ``placed`` (ids into the rows of ``Z``), the
    ``placed`` ones then joined to their closest leaves as a warm start's new labels are
    (:func:`grow_tree`): how zero-shot labels enter a cold tree, whose text features would
    otherwise cluster apart from the features the documents give the other labels.

    ``split``: a leaf they grow past ``max_leaf_size`` is split by 2-means, where their text
    rows part from the document rows, so the pieces made mostly of them are rarely reached and
    they seldom take the places of labels with documents (XR-Linear, XR-Transformer). False:
    they are :func:`grow_tree`'s guests and split no leaf (a leaf may then hold more than
    ``max_leaf_size`` labels), so the other labels' tree is the one built on them alone
    (X-Transformer, whose leaves are the matcher's clusters)."""
    Z = sp.csr_matrix(Z)
    n = Z.shape[0]
    is_placed = np.zeros(n, dtype=bool)
    is_placed[placed] = True
    if not is_placed.any() or is_placed.all():
        return LabelTree.build(Z, cfg)
    order = np.concatenate([np.flatnonzero(~is_placed), np.flatnonzero(is_placed)])
    n_base = n - int(is_placed.sum())
    base = LabelTree.build(sp.csr_matrix(Z[order[:n_base]]), cfg)
    guests = None if split else np.arange(n_base, n)
    grown = grow_tree(base, sp.csr_matrix(Z[order]), cfg, guests)[0]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)  # label id -> its row in the grown tree's order
    return LabelTree([*grown.C[:-1], sp.csr_matrix(grown.C[-1][position])], cfg)
