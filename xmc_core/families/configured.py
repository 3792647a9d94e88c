"""What a config trains, in the registry's terms: the families it trains (each member of an
ensemble) and the packages a served model of it imports. Above the config, so that the registry
below it never names the config."""

from __future__ import annotations

from xmc_core.config import XmcConfig
from xmc_core.model import registry
from xmc_core.model.contract import Family, Member


def trained_families(cfg: XmcConfig) -> list[tuple[Member, Family]]:
    """Every family ``cfg`` trains, each with where it is configured: ``model`` and the
    configured family, or each member of a family made of others (an ensemble)."""
    top = registry.family(cfg.model.kind)
    if top.members is None:
        return [(Member("model", top.name, cfg), top)]
    return [(member, registry.family(member.cfg.model.kind)) for member in top.members(cfg)]


def family_requirements(name: str, cfg: XmcConfig | None = None) -> list[str]:
    """Packages a served model of family ``name`` imports beyond the core ones: the family's
    own and, when ``cfg`` trains ``name``, those of every family it is made of, with those
    their config asks for (``Family.config_requirements``)."""
    found = list(registry.family(name).requirements)
    if cfg is not None and cfg.model.kind == registry.canonical(name):
        for member, f in trained_families(cfg):
            found += f.requirements
            found += f.config_requirements(member.cfg) if f.config_requirements else ()
    return list(dict.fromkeys(found))
