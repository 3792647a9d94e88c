"""XR-Transformer's warm start: the matcher fine-tuned from its champion's encoder.

A cold XR-Transformer fine-tunes the pretrained encoder coarse to fine, ``matcher.steps_per_level``
steps at every matcher level. Started warm (:mod:`xmc_core.families.warm`), the encoder is the
champion's, already fine-tuned on the corpus it grew from, so only the finest matcher level is
trained, for a step budget that follows the new data: ``steps_per_level`` times the share of
documents the champion was not trained on, rounded up (no new document: no step). The rest is
XR-Linear's warm start: the ranker tree is the champion's, grown by the new labels, and the
leaf cost search starts from its scale.

With ``matcher.warm_trainable_layers``, only the encoder's top layers are fine-tuned: the
hidden states below them are the champion's, cached across retrains
(:mod:`xmc_core.transformer.states`, under :func:`states_root`), so an old document costs
only the top layers, in training and in every embedding pass.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from xmc_core.config import MatcherConfig
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.work_dir import WorkDir
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
    level trained, its steps, the encoder's top layers trained (None: all) and the steps a
    cold start would take (every matcher level)."""
    levels = matcher_levels(tree, cfg)
    return {
        "matcher_level": levels[-1],
        "matcher_steps": warm_steps(cfg, n_docs, base_docs),
        "matcher_top_layers": cfg.warm_trainable_layers,
        "cold_matcher_steps": cfg.steps_per_level * len(levels),
        "cold_matcher_levels": len(levels),
    }


def states_root(matcher: MatcherConfig, work_dir: str | Path) -> str | None:
    """The encoder-state cache's folder (``<work_dir>/encoder-states``) when warm starts keep
    the encoder's lower layers (``matcher.warm_trainable_layers``), else None."""
    if matcher.warm_trainable_layers is None:
        return None
    return str(WorkDir.of(work_dir).encoder_states)
