"""The lineage of a corpus: the dataset it started as, and how many landing drops grew it since.

A model may replace a champion only when both were trained on corpora of one lineage (one label
space). The rules, applied when a dataset folder is written (:class:`DatasetWriter`):

- a dataset as imported (``xmc ingest``) starts a lineage named after its folder, rooted at its
  own fingerprint; the embedded synthetic corpus starts the lineage ``synthetic``;
- a dataset folder written over another (``xmc ingest ... --overwrite``, a nightly export kept
  current in place) keeps the lineage of the folder it replaces: it is the same dataset;
- a corpus the retrain flow builds from landing drops (``xmc_core.intake``), merged into the
  current corpus or replacing it, keeps the lineage of the corpus it follows (``drops`` + the
  drops taken in); with no corpus before it, it starts a lineage named after its first drop.

A manifest written before lineages were recorded gets one derived from what it does record:
a merged corpus follows its ``source.base`` (while that folder still holds the recorded
fingerprint), anything else starts a lineage named after its folder, rooted at its fingerprint.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from xmc_core.corpus.reader import read_manifest
from xmc_core.corpus.schema import Lineage, Manifest
from xmc_core.errors import InputError

SYNTHETIC = "synthetic"
"""Lineage name of the embedded synthetic corpus."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_CHAIN = 1000  # merges followed back through ``source.base`` in an old manifest


def lineage_name(text: str) -> str:
    """``text`` as a lineage name: runs of other characters than ``A-Za-z0-9._-`` become ``-``,
    leading punctuation is dropped, at most 64 characters (``dataset`` when nothing is left)."""
    name = _UNSAFE.sub("-", text).lstrip("-._")[:64].rstrip("-.")
    return name or "dataset"


def started_at(name: str, fingerprint: str) -> Lineage:
    """A new lineage named ``name`` (made safe), rooted at the corpus of ``fingerprint``."""
    return Lineage(name=lineage_name(name), root=fingerprint)


def grown(parent: Lineage, n_drops: int) -> Lineage:
    """``parent`` after ``n_drops`` more landing drops."""
    return parent.model_copy(update={"drops": parent.drops + n_drops})


def lineage_of(folder: str | Path) -> Lineage:
    """The lineage of the dataset folder ``folder`` (its manifest alone is read): recorded, or
    derived for a manifest written before lineages were (see the module docstring)."""
    path = Path(folder)
    manifest = read_manifest(path)
    if manifest.lineage is not None:
        return manifest.lineage
    drops = 0
    for _ in range(_MAX_CHAIN):
        base = _recorded_base(manifest)
        if base is None:
            break
        drops += _recorded_drops(manifest)
        path, manifest = base
        if manifest.lineage is not None:
            return grown(manifest.lineage, drops)
    try:
        return grown(started_at(_own_name(path, manifest), manifest.fingerprint), drops)
    except ValidationError as err:  # a fingerprint that is no hex digest: not written by xmc
        raise InputError(
            path / "manifest.json", f"no lineage can be derived ({err})", "re-ingest the dataset"
        ) from err


def one_lineage(a: Lineage, b: Lineage) -> bool:
    """Whether ``a`` and ``b`` are one lineage (same name and root; drops may differ)."""
    return (a.name, a.root) == (b.name, b.root)


def describe(lineage: Lineage) -> str:
    """``reuters (from 3f2a9c1b0d4e, +2 drops)``: the lineage in words."""
    drops = "" if not lineage.drops else f", +{lineage.drops} drop{'s' * (lineage.drops > 1)}"
    return f"{lineage.name} (from {lineage.root[:12]}{drops})"


def _own_name(path: Path, manifest: Manifest) -> str:
    return SYNTHETIC if manifest.source.get("format") == SYNTHETIC else path.resolve().name


def _recorded_base(manifest: Manifest) -> tuple[Path, Manifest] | None:
    """The base corpus an old merged manifest names, when its folder still holds the recorded
    fingerprint (None otherwise: not a merge, a ``replace``, moved or changed since)."""
    base = manifest.source.get("base") if manifest.source.get("format") == "merge" else None
    if not isinstance(base, dict) or not isinstance(base.get("path"), str):
        return None
    path = Path(base["path"])
    try:
        found = read_manifest(path)
    except (InputError, OSError):
        return None
    return (path, found) if found.fingerprint == base.get("fingerprint") else None


def _recorded_drops(manifest: Manifest) -> int:
    drops = manifest.source.get("drops")
    return len(drops) if isinstance(drops, list) else 0
