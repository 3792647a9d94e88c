"""HierarchicalXC: a binary label tree by complete-link agglomerative clustering on label
co-occurrence, one logistic classifier per tree node, node probabilities multiplied down the
tree by beam search (``xmc_core.families.hierarchical_xc``)."""
