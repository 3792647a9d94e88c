"""Names -> classes: the saved parts and the families xmc knows.

A saved part's ``meta.json`` names its class; :func:`part_class` maps that name to the class to
load it with, and :func:`family` maps ``model.kind`` / a saved model's ``family`` to its
:class:`~xmc_core.model.contract.Family`. Built-ins are listed here by import path, so loading
an XR-Linear model never imports torch. Families defined elsewhere register themselves from a
module named in ``$XMC_PLUGINS`` (comma-separated module names, imported on the first look-up):
a model folder never chooses what code is imported.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xmc_core.errors import ArtifactError, InputError
from xmc_core.model.contract import Family, Member

if TYPE_CHECKING:
    from xmc_core.config import Section, XmcConfig

PLUGINS_ENV = "XMC_PLUGINS"
"""Comma-separated modules that register more families and parts when imported."""

_BUILTIN_PARTS = {
    "XRLinearModel": "xmc_core.linear.model:XRLinearModel",
    "TfidfEncoder": "xmc_core.model.xmc_model:TfidfEncoder",
    "EmbeddingFeatures": "xmc_core.transformer.ranker:EmbeddingFeatures",
    "TfidfVectorizer": "xmc_core.features.tfidf:TfidfVectorizer",
    "GivenFeatures": "xmc_core.features.matrices:GivenFeatures",
    "CnnFeatures": "xmc_core.cnn.parts:CnnFeatures",
    "CnnOutputRanker": "xmc_core.cnn.parts:CnnOutputRanker",
    "EnsembleEncoder": "xmc_core.model.ensemble:EnsembleEncoder",
    "EnsembleRanker": "xmc_core.model.ensemble:EnsembleRanker",
    "HierarchicalXcRanker": "xmc_core.hxc.ranker:HierarchicalXcRanker",
    "AstecEncoder": "xmc_core.astec.parts:AstecEncoder",
    "AstecRanker": "xmc_core.astec.parts:AstecRanker",
    "NeuralXcRanker": "xmc_core.neuralxc.ranker:NeuralXcRanker",
}
_BUILTIN_FAMILIES = {
    "xr-linear": "xmc_core.families.xr_linear:FAMILY",
    "xr-transformer": "xmc_core.families.xr_transformer:FAMILY",
    "x-transformer": "xmc_core.families.x_transformer:FAMILY",
    "xml-cnn": "xmc_core.families.xml_cnn:FAMILY",
    "ensemble": "xmc_core.families.ensemble:FAMILY",
    "hierarchical-xc": "xmc_core.families.hierarchical_xc:FAMILY",
    "astec": "xmc_core.families.astec:FAMILY",
    "neural-xc": "xmc_core.families.neural_xc:FAMILY",
}
_parts: dict[str, type] = {}
_families: dict[str, Family] = {}
_plugins_loaded: set[str] = set()
_lock = threading.RLock()


def register_part(cls: type, name: str | None = None) -> type:
    """Make ``cls`` loadable by the name its ``meta.json`` records (default: its own name)."""
    with _lock:
        _parts[name or cls.__name__] = cls
    return cls


def register_family(family: Family) -> Family:
    """Make ``family`` trainable (``model.kind``) and its saved models loadable."""
    with _lock:
        _families[family.name] = family
    return family


def family_names() -> list[str]:
    """Every known family name: the built-ins and the registered plug-ins."""
    _load_plugins()
    return sorted({*_BUILTIN_FAMILIES, *_families})


def family(name: str) -> Family:
    """The family called ``name``; InputError listing the known ones otherwise."""
    found = _lookup(_families, _BUILTIN_FAMILIES, name)
    if found is None:
        raise InputError(
            None,
            f"unknown model family {name!r} (known: {', '.join(family_names())})",
            f"set model.kind to one of them, or name the module defining it in ${PLUGINS_ENV}",
        )
    return found


def trained_families(cfg: XmcConfig) -> list[tuple[Member, Family]]:
    """Every family ``cfg`` trains, each with where it is configured: ``model`` and the
    configured family, or each member of a family made of others (an ensemble)."""
    top = family(cfg.model.kind)
    if top.members is None:
        return [(Member("model", top.name, cfg), top)]
    return [(member, family(member.cfg.model.kind)) for member in top.members(cfg)]


def requirements(name: str, cfg: XmcConfig | None = None) -> list[str]:
    """Packages a served model of family ``name`` imports beyond the core ones: the family's
    own and, when ``cfg`` trains ``name``, those of every family it is made of, with those
    their config asks for (``Family.config_requirements``)."""
    found = list(family(name).requirements)
    if cfg is not None and cfg.model.kind == name:
        for member, f in trained_families(cfg):
            found += f.requirements
            found += f.config_requirements(member.cfg) if f.config_requirements else ()
    return list(dict.fromkeys(found))


def plugin_section(name: str) -> type[Section] | None:
    """The config section class of plug-in family ``name`` (None: no such plug-in, or one
    without settings)."""
    _load_plugins()
    with _lock:
        found = _families.get(name)
    return None if found is None else found.plugin_section


def part_class(name: str, where: Path) -> type:
    """The class of a saved part named ``name`` in ``where``'s meta.json."""
    found = _lookup(_parts, _BUILTIN_PARTS, name)
    if found is None:
        raise ArtifactError(
            where,
            f"holds a part of class {name!r}, which this xmc does not know",
            f"load it where the module defining it is named in ${PLUGINS_ENV}",
        )
    return found


def _lookup(table: dict[str, Any], builtins: dict[str, str], name: str) -> Any:
    """``table[name]``, importing a built-in on first use (None: unknown)."""
    _load_plugins()
    with _lock:
        if name not in table and name in builtins:
            table[name] = _import(builtins[name])
        return table.get(name)


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _load_plugins() -> None:
    """Import every module named in ``$XMC_PLUGINS`` not imported yet."""
    names = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    for name in names:
        if name in _plugins_loaded:
            continue
        with _lock:
            _plugins_loaded.add(name)
            try:
                importlib.import_module(name)
            except ImportError as err:
                _plugins_loaded.discard(name)
                raise InputError(
                    None,
                    f"${PLUGINS_ENV} names {name!r}, which cannot be imported ({err})",
                    "fix the module name or the PYTHONPATH",
                ) from err
