"""What ``xmc registry`` shows: the versions of ``registry.model_name``, the data each was
trained on (dataset and lineage), their promotion decisions and figures, which one holds the
alias, and the alias history.

Read only: nothing is written to the registry, and a SQLite store that does not exist is not
created (:func:`list_versions` says so instead).
"""

from __future__ import annotations

import math
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict

from xmc_core.config import XmcConfig
from xmc_core.evaluation.metrics import percent
from xmc_core.model.registry import canonical
from xmc_core.serving.registry.lineage import NOT_RECORDED, lineage_text, recorded_dataset
from xmc_core.serving.registry.store import (
    FAMILY_TAG,
    PROMOTION_TAG,
    ROLLBACK_TAG,
    RegistryStore,
    quiet_downloads,
    sqlite_path,
)
from xmc_core.wording import counted

if TYPE_CHECKING:
    from mlflow.entities.model_registry import ModelVersion


class VersionEntry(BaseModel):
    """One registered version: ``promotion``: its ``xmc.promotion.*`` tags without the prefix
    (``decision``, ``kind``, ``metric``, ``new``, ``champion``, ``champion_version``,
    ``margin``, ``reason``, ``at``, ``fix``); ``rollback``: its ``xmc.rollback.*`` tags;
    ``family``: its ``xmc.model_kind`` tag, else from the logged model's metadata (None: not
    recorded); ``dataset``, ``lineage``: the training data (``serving.registry.lineage``,
    ``not recorded`` for a version registered before xmc recorded them)."""

    model_config = ConfigDict(frozen=True)

    version: str
    created: str
    run_id: str | None
    family: str | None
    dataset: str = NOT_RECORDED
    lineage: str = NOT_RECORDED
    aliases: list[str]
    promotion: dict[str, str]
    rollback: dict[str, str]


class RegistryListing(BaseModel):
    """The versions of ``model_name`` in the store at ``tracking_uri`` (empty: no such model,
    ``message`` says why), the ``alias`` holder and its recorded history (oldest first)."""

    model_config = ConfigDict(frozen=True)

    tracking_uri: str
    model_name: str
    alias: str
    holder: str | None
    history: list[str]
    versions: list[VersionEntry]
    message: str | None = None


def list_versions(cfg: XmcConfig) -> RegistryListing:
    """Every version of ``cfg.registry.model_name`` with its decision tags (read only)."""
    uri, name, alias = cfg.tracking_uri(), cfg.registry.model_name, cfg.registry.alias
    empty = RegistryListing(
        tracking_uri=uri, model_name=name, alias=alias, holder=None, history=[], versions=[]
    )
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        return empty.model_copy(update={"message": f"no MLflow store at {db}: nothing registered"})
    from mlflow.exceptions import MlflowException

    store = RegistryStore(cfg)
    try:
        model = store.client.get_registered_model(name)
    except MlflowException:
        return empty.model_copy(update={"message": _no_such_model(store)})
    aliases: dict[str, list[str]] = {}  # version searches leave ``aliases`` empty: from the model
    for held, version in sorted(model.aliases.items()):
        aliases.setdefault(str(version), []).append(held)
    versions = [_entry(store, v, aliases.get(str(v.version), [])) for v in store.model_versions()]
    return empty.model_copy(
        update={"holder": store.holder(), "history": store.history(), "versions": versions}
    )


def _no_such_model(store: RegistryStore) -> str:
    """There is no model ``store.name``: which ones there are, and how to pick one."""
    message = f"no registered model named {store.name!r} in {store.uri}"
    names = sorted(m.name for m in store.client.search_registered_models())
    if not names:
        return message
    return (
        f"{message}; registered: {', '.join(names)}\n"
        "  fix: pick one with --set registry.model_name=NAME (or data.dataset=DATASET)"
    )


def _entry(store: RegistryStore, v: ModelVersion, aliases: list[str]) -> VersionEntry:
    created = datetime.fromtimestamp(int(v.creation_timestamp) / 1000, UTC)
    return VersionEntry(
        version=str(v.version),
        created=created.isoformat(timespec="seconds"),
        run_id=v.run_id,
        family=_spelled(v.tags.get(FAMILY_TAG) or _family(store, str(v.version))),
        dataset=recorded_dataset(v.tags),
        lineage=lineage_text(v.tags),
        aliases=aliases,
        promotion=_tags(v.tags, PROMOTION_TAG),
        rollback=_tags(v.tags, ROLLBACK_TAG),
    )


def _spelled(family: str | None) -> str | None:
    """A recorded family in its one spelling (an earlier release's ``xr-linear``: ``xr_linear``)."""
    return None if family is None else canonical(family)


def _tags(tags: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in sorted(tags.items()) if k.startswith(prefix)}


def _family(store: RegistryStore, version: str) -> str | None:
    """``xmc_kind`` of the logged model's metadata: its ``MLmodel`` file alone is downloaded
    (None when it cannot be read)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        location = store.client.get_model_version_download_uri(store.name, version)
        with tempfile.TemporaryDirectory(prefix="xmc-mlmodel-") as tmp, quiet_downloads():
            path = mlflow.artifacts.download_artifacts(
                artifact_uri=f"{location.rstrip('/')}/MLmodel",
                dst_path=tmp,
                tracking_uri=store.uri,
                registry_uri=store.uri,
            )
            meta = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (MlflowException, OSError, yaml.YAMLError):
        return None
    found = (meta.get("metadata") or {}).get("xmc_kind") if isinstance(meta, dict) else None
    return None if found is None else str(found)


def format_listing(listing: RegistryListing) -> str:
    """One line per version (decision, its figure vs the champion's at the time, reason), the
    alias holder and the alias history."""
    target = f"{listing.model_name}@{listing.alias}"
    if listing.message:
        return listing.message
    versions = counted(len(listing.versions), "version")
    head = f"{listing.model_name}: {versions} ({listing.tracking_uri})"
    held = f"version {listing.holder}" if listing.holder else "nobody"
    rows = [["version", "created", "run", "family", "dataset", "lineage", "decision", "figure"]]
    rows[0] += ["vs champion", "reason"]
    rows += [_row(v, listing.alias) for v in listing.versions]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    table = [
        "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]
    history = " -> ".join(listing.history) if listing.history else "not recorded"
    return "\n".join(
        [head, *table, f"{target}: {held}", f"alias history (oldest first): {history}"]
    )


def _row(v: VersionEntry, alias: str) -> list[str]:
    p = v.promotion
    decision = f"{p['decision']} ({p['kind']})" if "kind" in p else p.get("decision", "-")
    metric = p.get("metric", "")
    figure = f"{metric} {_percent(p.get('new'))}" if metric else "-"
    champion = p.get("champion_version", "none")
    versus = "-"
    if champion not in ("none", v.version):
        versus = f"{_percent(p.get('champion'))} (v{champion})"
    reason = p.get("reason", "") + (f"; fix: {p['fix']}" if p.get("fix") else "")
    if v.rollback:
        reason += f"; alias rolled back to it from version {v.rollback.get('from')}"
    if alias in v.aliases:
        reason = f"[@{alias}] {reason}"
    created = v.created.replace("T", " ").replace("+00:00", " UTC")
    run = (v.run_id or "-")[:8]
    data = [v.dataset, v.lineage]
    return [v.version, created, run, v.family or "?", *data, decision, figure, versus, reason]


def _percent(text: str | None) -> str:
    """A tag's fraction as a percentage with 2 decimals ("n/a": none or not a number)."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    return percent(value)
