"""Names -> classes: the saved parts and the families xmc knows.

Every family, built-in or plug-in, is found through the ``xmc.families`` entry points (the
``[project.entry-points."xmc.families"]`` table of a distribution's ``pyproject.toml``: ``name =
"package:FAMILY"``), read once with :mod:`importlib.metadata`. :func:`family` maps
``model.kind`` / a saved model's ``family`` to its :class:`~xmc_core.model.contract.Family`;
:func:`part_class` maps the class a saved part's ``meta.json`` names to the class to load it
with: the shared parts listed here, or one a family declares in ``Family.parts``. A family's
package holds only its ``FAMILY`` and its config section; graph and parts are imported when
used, so loading an XR-Linear model never imports torch. A model folder never chooses what code
is imported. This module imports no config: :mod:`xmc_core.config` asks it for the sections.

Names have one spelling, with underscores (``xr_linear``); the spellings of earlier releases
(``xr-linear``) are accepted wherever a name is read (``model.kind``, a saved model's
``family``, a registry tag) and :func:`canonical` turns them into it.
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xmc_core.errors import ArtifactError, InputError
from xmc_core.model.contract import Family

if TYPE_CHECKING:
    from xmc_core.config_section import Section

ENTRY_POINTS = "xmc.families"
"""The entry-point group every family is declared in."""

BUILTIN_PACKAGE = "xmc_core."
"""A family whose ``FAMILY`` lives under this package is a built-in: its section is a key of
the config itself (a plug-in's is ``plugins.<name>``)."""

_SHARED_PARTS = {
    "XRLinearModel": "xmc_core.linear.model:XRLinearModel",
    "TfidfEncoder": "xmc_core.model.xmc_model:TfidfEncoder",
    "EmbeddingFeatures": "xmc_core.transformer.ranker:EmbeddingFeatures",
    "TfidfVectorizer": "xmc_core.features.tfidf:TfidfVectorizer",
    "GivenFeatures": "xmc_core.features.matrices:GivenFeatures",
}
"""Saved parts of the parts layer, shared by several families."""

_parts: dict[str, type] = {}
_families: dict[str, Family] = {}
_builtin: list[str] = []
_loaded: set[str] = set()
_discovering = False
_lock = threading.RLock()


def register_part(cls: type, name: str | None = None) -> type:
    """Make ``cls`` loadable by the name its ``meta.json`` records (default: its own name), in
    this process only (a test's or a notebook's part; a family declares its own in
    ``Family.parts``)."""
    with _lock:
        _parts[name or cls.__name__] = cls
    return cls


def discover(refresh: bool = False, plugins: bool = True) -> None:
    """Read the ``xmc.families`` entry points: the built-ins (once), then, unless ``plugins``
    is False, the plug-ins (once); all again with ``refresh``, after a plug-in was installed in
    this process. The config asks for the built-ins alone while it is being imported, so a
    plug-in's module may import the config. A family whose entry point cannot be loaded is an
    InputError naming it."""
    global _discovering
    with _lock:
        if refresh:
            _loaded.clear()
            _families.clear()
            _builtin.clear()
        wanted = ("built-in", "plug-in") if plugins else ("built-in",)
        if _discovering or all(w in _loaded for w in wanted):
            return
        _discovering = True
        try:
            points = {p.name: p for p in reversed(list(entry_points(group=ENTRY_POINTS)))}
            for which in (w for w in wanted if w not in _loaded):
                for point in points.values():
                    builtin = _is_builtin(point.value)
                    if builtin == (which == "built-in"):
                        _families[point.name] = _load(point)
                        if builtin:
                            _builtin.append(point.name)
                _loaded.add(which)
        finally:
            _discovering = False


def _is_builtin(value: str) -> bool:
    return value.startswith(BUILTIN_PACKAGE)


def _load(point: EntryPoint) -> Family:
    """The ``Family`` entry point ``point`` names."""
    try:
        loaded = point.load()
    except ImportError as err:
        raise InputError(
            None,
            f"the xmc family {point.name!r} ({point.value}) cannot be imported ({err})",
            "reinstall the distribution that declares it, or uninstall it",
        ) from err
    if not isinstance(loaded, Family) or loaded.name != point.name:
        raise InputError(
            None,
            f"entry point {point.name} = {point.value} is not a Family named {point.name!r}",
            "declare it as NAME = 'package:FAMILY' with FAMILY.name == NAME",
        )
    return loaded


def family_names() -> list[str]:
    """Every known family name, sorted."""
    discover()
    return sorted(_families)


def canonical(name: str) -> str:
    """``name`` in its one spelling: an earlier release's ``xr-linear`` is ``xr_linear``
    (a name no family has is returned as given). The plug-ins are read only for a name no
    built-in has."""
    underscored = name.replace("-", "_")
    for plugins in (False, True):
        discover(plugins=plugins)
        for spelled in (name, underscored):
            if spelled in _families:
                return spelled
    return name


def family(name: str) -> Family:
    """The family called ``name`` (or an earlier spelling of it); InputError listing the known
    ones otherwise."""
    found = _families.get(canonical(name))
    if found is None and not _builtin:  # xmc's own entry points are missing, not the name
        raise InputError(
            None,
            f"unknown model family {name!r}: no built-in family is installed (xmc's "
            f"{ENTRY_POINTS!r} entry points were not found)",
            "run `make install` (an xmc.egg-info in the checkout, or an install, older than "
            "the entry points hides them)",
        )
    if found is None:
        raise InputError(
            None,
            f"unknown model family {name!r} (known: {', '.join(family_names())})",
            "set model.kind to one of them, or install the distribution declaring it under "
            f"the {ENTRY_POINTS!r} entry points",
        )
    return found


def builtin_sections() -> list[tuple[str, type[Section]]]:
    """The config sections of the built-in families that have one, as (key = family name,
    section class), by ``Family.config_position`` then name: the config's own keys."""
    discover(plugins=False)
    ordered = sorted(_builtin, key=lambda n: (_families[n].config_position, n))
    return [(n, s) for n in ordered if (s := _families[n].section) is not None]


def plugin_section(name: str) -> type[Section] | None:
    """The config section class of plug-in family ``name`` (None: no such plug-in, or one
    without settings); its values live under ``plugins.<name>``."""
    discover()
    found = _families.get(canonical(name))
    return None if found is None or found.name in _builtin else found.section


def part_class(name: str, where: Path) -> type:
    """The class of a saved part named ``name`` in ``where``'s meta.json."""
    discover()
    with _lock:
        if name not in _parts:
            paths = dict(_SHARED_PARTS)
            for f in _families.values():
                paths.update(f.parts)
            if name in paths:
                _parts[name] = _import(paths[name])
        found = _parts.get(name)
    if found is None:
        raise ArtifactError(
            where,
            f"holds a part of class {name!r}, which this xmc does not know",
            f"load it where the family defining it is installed (entry points {ENTRY_POINTS!r})",
        )
    return found


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)
