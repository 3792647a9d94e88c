"""The ``hierarchical_xc`` config section (pydantic only: imported by :mod:`xmc_core.config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from xmc_core.config_section import Section


class HierarchicalXcConfig(Section):
    """HierarchicalXC (Srinivasan, Rao, Agarwal): a binary label tree by complete-link
    agglomerative clustering of the labels on their training co-occurrence, one classifier per
    tree node on the documents that reach its parent, node probabilities multiplied down the
    tree (beam search), so every label gets a score.

    ``distance``: ``count``, d(i, j) = -|docs with both i and j| (shifted by the largest count
    so it is >= 0: the same merges), or ``iou``, d(i, j) = 1 - |i and j| / |i or j|. Complete
    link merges many pairs at one distance (most label pairs never co-occur); a run of merges
    at one distance joins clusters that are all at that distance from one another, so any
    binary tree over them is a complete-link outcome: the family picks the shallowest one.

    Large label sets: the distance matrix is O(L^2), so at most ``max_agglomerate`` labels are
    clustered at once; above that the labels are first split by balanced 2-means on their
    label features (the ``tree`` section's ``kmeans_iter``, ``kmeans_restarts`` and ``seed``)
    into groups of at most ``max_agglomerate``, each group is agglomerated, and the 2-means tree
    joins the groups above. A group's memory peak is two float64 condensed distance matrices
    (ours and scipy's working copy): 8 * n * (n - 1) bytes, 134 MB at 4,096 labels.

    ``max_depth``: tree levels at most (each is one training task and one beam-search step).
    A deeper dendrogram has its deepest merges under the root flattened (joined as ties) until
    the tree fits; it must be at least log2(labels per group) plus the 2-means levels.

    The node classifiers are the ``ranker`` section's linear models; this family always trains
    them with the logistic loss and multiplies their sigmoid probabilities (``ranker.loss`` and
    ``predict.post_processor`` are set to ``logistic`` and ``sigmoid``); ``ranker.negatives``
    ``tfn`` (the default) trains each node on exactly the documents that reach its parent.
    """

    distance: Literal["count", "iou"] = "count"
    max_agglomerate: int = Field(
        4096, ge=2, description="labels clustered at once; more are first split by 2-means"
    )
    max_depth: int = Field(32, ge=1, description="tree levels at most (deeper: flattened)")
