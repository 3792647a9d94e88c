"""What the registry records of the data a version was trained on, the model name that follows
from it, and when the gate refuses to compare two versions.

Version tags written at registration (:func:`version_tags`, in the call that creates the
version): ``xmc.dataset`` (the training corpus's folder name), ``xmc.dataset.fingerprint``, and
its lineage (``xmc_core.corpus.lineage``) as ``xmc.lineage.name``, ``xmc.lineage.root`` and
``xmc.lineage.drops``. A version registered before xmc recorded them has none: the gate never
compares it with a version that has (:func:`refusal`), it does not guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from xmc_core.config import XmcConfig
from xmc_core.config_lifecycle import DATASET_PLACEHOLDER
from xmc_core.corpus.lineage import SYNTHETIC, describe, lineage_of, one_lineage
from xmc_core.corpus.reader import read_manifest
from xmc_core.corpus.schema import Lineage
from xmc_core.serving.registry.store import RegistryStore

DATASET_TAG = "xmc.dataset"
DATASET_FINGERPRINT_TAG = "xmc.dataset.fingerprint"
LINEAGE_TAG = "xmc.lineage."
NOT_RECORDED = "not recorded"


def version_tags(corpus_dir: str | Path) -> dict[str, str]:
    """The tags naming the training corpus ``corpus_dir`` and its lineage (manifest only)."""
    folder = Path(corpus_dir)
    manifest = read_manifest(folder)
    lineage = manifest.lineage or lineage_of(folder)  # derived only for an older manifest
    return {
        DATASET_TAG: folder.resolve().name,
        DATASET_FINGERPRINT_TAG: manifest.fingerprint,
        **{LINEAGE_TAG + key: str(value) for key, value in lineage.model_dump().items()},
    }


def recorded_lineage(tags: Mapping[str, str]) -> Lineage | None:
    """The lineage a version's ``tags`` record (None: none, or not a valid one)."""
    values = {key[len(LINEAGE_TAG) :]: v for key, v in tags.items() if key.startswith(LINEAGE_TAG)}
    try:
        return Lineage.model_validate(values) if values else None
    except ValidationError:
        return None


def recorded_dataset(tags: Mapping[str, str]) -> str:
    """``reuters (3f2a9c1b0d4e)``: the training corpus a version's ``tags`` name."""
    name, fingerprint = tags.get(DATASET_TAG), tags.get(DATASET_FINGERPRINT_TAG, "")
    return f"{name} ({fingerprint[:12]})" if name else NOT_RECORDED


def lineage_text(tags: Mapping[str, str]) -> str:
    """The lineage a version's ``tags`` record, in words (``not recorded``)."""
    lineage = recorded_lineage(tags)
    return NOT_RECORDED if lineage is None else describe(lineage)


def for_corpus(cfg: XmcConfig, corpus_dir: str | Path) -> XmcConfig:
    """``cfg`` with ``registry.model_name`` for a model trained on ``corpus_dir``: ``{dataset}``
    replaced by its lineage name (a name without the placeholder is kept)."""
    if DATASET_PLACEHOLDER not in cfg.registry.model_name:
        return cfg
    registry = cfg.registry.for_dataset(lineage_of(corpus_dir).name)
    return cfg.model_copy(update={"registry": registry})


def for_command(cfg: XmcConfig) -> XmcConfig:
    """``cfg`` with the model name a training run with ``cfg`` registers under: that of
    ``data.dataset``, or of the embedded synthetic corpus (``xmc promote``, ``xmc registry``)."""
    if DATASET_PLACEHOLDER not in cfg.registry.model_name:
        return cfg
    if cfg.data.dataset is not None:
        return for_corpus(cfg, cfg.data.dataset)
    return cfg.model_copy(update={"registry": cfg.registry.for_dataset(SYNTHETIC)})


def refusal(store: RegistryStore, version: str, holder: str | None) -> tuple[str, str] | None:
    """(reason, fix), one line each, when the gate may not compare ``version`` with the alias
    holder ``holder``: another lineage, or either without one recorded. None when it may (or
    there is no other holder)."""
    if holder is None or holder == version:
        return None
    mine, theirs = (
        recorded_lineage(store.client.get_model_version(store.name, v).tags)
        for v in (version, holder)
    )
    if mine is not None and theirs is not None and one_lineage(mine, theirs):
        return None
    champion = f"the {store.alias} (version {holder})"
    if theirs is None:
        reason = f"{champion} has no lineage recorded (registered before xmc recorded one)"
    elif mine is None:
        reason = f"version {version} has no lineage recorded, {champion} is of {describe(theirs)}"
    else:
        reason = f"trained on {describe(mine)}, {champion} on {describe(theirs)}"
    fix = (
        "give each dataset its own model (registry.model_name's default "
        f"xmc-{DATASET_PLACEHOLDER}); to replace version {holder} anyway: "
        f"xmc promote {version} --set registry.model_name={store.name}"
    )
    return f"{reason}: other labels, not compared", fix
