"""XR-Transformer's warm start: the matcher fine-tuned from its champion's encoder.

A cold XR-Transformer fine-tunes the pretrained encoder coarse to fine, ``matcher.steps_per_level``
steps at every matcher level. Started warm (:mod:`xmc_core.families.warm`), the encoder is the
champion's, already fine-tuned on the corpus it grew from, so only the finest matcher level is
trained, for a step budget that follows the new data: ``steps_per_level`` times the share of
documents the champion was not trained on, rounded up (no new document: no step). The rest is
XR-Linear's warm start: the ranker tree is the champion's, grown by the new labels, and its leaf
cost scale is kept.
"""

from __future__ import annotations

import math
from typing import Any

from xmc_core.config import MatcherConfig
from xmc_core.linear.tree import LabelTree
from xmc_core.transformer.shortlist import matcher_levels


def warm_steps(cfg: MatcherConfig, n_docs: int, base_docs: int) -> int:
    """The warm matcher's step budget: ``cfg.steps_per_level`` times the share of the
    ``n_docs`` training documents beyond the champion's ``base_docs``, rounded up."""
    new = max(0, n_docs - base_docs)
    return math.ceil(cfg.steps_per_level * new / n_docs) if n_docs > 0 else 0


def warm_matcher_cfg(cfg: MatcherConfig, n_docs: int, base_docs: int) -> MatcherConfig:
    """``cfg`` with the warm budget (:func:`warm_steps`) as its steps, validated as often."""
    steps = warm_steps(cfg, n_docs, base_docs)
    return cfg.model_copy(
        update={"steps_per_level": steps, "eval_every": max(1, min(cfg.eval_every, steps))}
    )


def matcher_start(
    tree: LabelTree, cfg: MatcherConfig, n_docs: int, base_docs: int
) -> dict[str, Any]:
    """What the warm matcher reuses and trains, as the model's start record says it: the
    level trained, its steps and the steps a cold start would take (every matcher level)."""
    levels = matcher_levels(tree, cfg)
    return {
        "matcher_level": levels[-1],
        "matcher_steps": warm_steps(cfg, n_docs, base_docs),
        "cold_matcher_steps": cfg.steps_per_level * len(levels),
        "cold_matcher_levels": len(levels),
    }
