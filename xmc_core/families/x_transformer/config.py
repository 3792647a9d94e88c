"""The ``x_transformer`` config section (:class:`XTransformerConfig`). Defaults are declared
here and nowhere else."""

from __future__ import annotations

from typing import Literal

from xmc_core.config_section import Section


class XTransformerConfig(Section):
    """X-Transformer (Chang et al. 2020), a preset on XR-Transformer's parts.

    ``indexing``: the label features of the semantic label index, ``pifa_tfidf`` (PIFA over
    TF-IDF), ``pifa_neural`` (PIFA over the pretrained encoder's document embeddings) or
    ``label_text`` (TF-IDF of the label names); the tree (``tree`` section) is cut at its
    finest cluster level (clusters of at most ``tree.max_leaf_size`` labels). The matcher
    (``encoder`` and ``matcher`` sections: steps, batch, learning rates) is fine-tuned once at
    that resolution, from the pretrained encoder, without head bootstrapping or importance
    weights (``matcher.min_clusters``/``max_clusters``, ``bootstrap`` and
    ``importance_weights`` are not read). The ranker (``ranker`` section) is linear on
    ``[TF-IDF, embedding]``, trained on the labels of the true clusters (``negatives`` tfn),
    of the matcher's top ``matcher.beam_size`` clusters (man) or both; it scores only the
    labels of the matcher's top ``predict.beam_size`` clusters (``predict.post_processor``
    noop: the ranker's score alone, as the reference).
    """

    indexing: Literal["pifa_tfidf", "pifa_neural", "label_text"] = "pifa_tfidf"
