"""X-Transformer (Chang et al. 2020), a preset on XR-Transformer's parts: the tree cut at its
finest cluster level, the matcher fine-tuned once there (stages in :mod:`.graph`, parts in
:mod:`.single_resolution`, section in :mod:`.config`)."""

from __future__ import annotations

from xmc_core.families.x_transformer.config import XTransformerConfig
from xmc_core.families.xr_transformer import CONTRACT_SETTINGS, REQUIREMENTS, SECTIONS
from xmc_core.model.contract import Family, Lazy

NAME = "x_transformer"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.x_transformer.graph:graph"),
    description="X-Transformer: semantic label clusters, a transformer matcher fine-tuned once "
    "at that resolution, per-label linear rankers on TF-IDF + embedding inside its top clusters",
    section=XTransformerConfig,
    contract_settings=(*CONTRACT_SETTINGS, "ranker.negatives=tfn+man"),
    config_position=2,
    sections=(*SECTIONS[:-1], "x_transformer", "eval"),
    needs_text=True,
    requirements=REQUIREMENTS,
    zero_shot=True,
)
