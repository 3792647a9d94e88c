"""Ensembles of any family: N members, each trained by its own family's graph on the shared
featurization, their scores combined (stages in :mod:`.graph`, section and members in
:mod:`.config`, the saved parts in :mod:`.parts`)."""

from __future__ import annotations

from xmc_core.families.ensemble.config import EnsembleConfig, members
from xmc_core.model.contract import Family, Lazy

NAME = "ensemble"

FAMILY = Family(
    name=NAME,
    graph=Lazy("xmc_core.families.ensemble.graph:graph"),
    description="an ensemble of members of any families, their scores combined",
    section=EnsembleConfig,
    parts={
        "EnsembleEncoder": "xmc_core.families.ensemble.parts:EnsembleEncoder",
        "EnsembleRanker": "xmc_core.families.ensemble.parts:EnsembleRanker",
    },
    members=members,
    contract_settings=("ensemble.members=[{set: [tree.seed=0]}, {set: [tree.seed=1]}]",),
    config_position=3,
    sections=("ensemble", "predict", "eval"),
)
