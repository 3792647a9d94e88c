"""What the promotion logic reads and writes in the MLflow model registry (its lock:
:mod:`~xmc_core.serving.registry.locking`).

One ``RegistryStore`` per (tracking URI, ``registry.model_name``, ``registry.alias``); it uses
``MlflowClient(tracking_uri=cfg.tracking_uri())`` and never the global tracking URI.

Tags written (all strings):

- version ``xmc.eval_file.<split>``: where the cached figures of the version on that split are:
  the path of a JSON artifact ``{"version", "split", "key": {dataset, eval, code}, "metrics"}``
  of the version's MLflow run (``xmc-eval/version-<v>/<split>-<content hash>.json``, a new file
  for new content, so a copied registry never sees another's figures); the JSON tag
  ``xmc.eval.<split>`` of older registries is still read (and dropped when the figures are
  cached again);
- version ``xmc.promotion.*``: the last gated or manual decision about the version
  (``decision`` promoted|rejected|refused, ``kind``, ``metric``, ``new``, ``champion``,
  ``champion_version``, ``margin``, ``reason``, ``at``; ``fix`` for a refusal);
  ``xmc.rollback.from`` / ``.at`` on a version the alias was rolled back to;
- version ``xmc.model_kind``, ``xmc.dataset*``, ``xmc.lineage.*`` at registration: the family
  and the training data (``serving.registry.lineage``);
- registered model ``xmc.alias_history.<alias>``: JSON list of the alias's holders, oldest
  first, at most ``HISTORY_LIMIT``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from xmc_core.config import XmcConfig
from xmc_core.config_lifecycle import DATASET_PLACEHOLDER
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities.model_registry import ModelVersion


EVAL_TAG = "xmc.eval."
"""Version tag of older registries: the cached figures as JSON (read, no longer written)."""
EVAL_FILE_TAG = "xmc.eval_file."
EVAL_DIR = "xmc-eval"
PROMOTION_TAG = "xmc.promotion."
ROLLBACK_TAG = "xmc.rollback."
HISTORY_TAG = "xmc.alias_history."
HISTORY_LIMIT = 50
FAMILY_TAG = "xmc.model_kind"
"""Run and version tag: the model's family."""
UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
"""Characters replaced by ``_`` where a model name, alias or split names a file."""
_PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
_SCHEMA_READY: set[str] = set()
_SCHEMA_GUARD = threading.Lock()


def filter_value(text: str) -> str | None:
    """``text`` as a string literal of an MLflow search filter: in single quotes, or in double
    quotes when it holds a single quote; None when it holds both (the filter grammar has no
    escape, so no filter can name it)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return None


def ensure_schema(uri: str) -> None:
    """Create the tables of a ``sqlite:///PATH`` tracking store once, under an exclusive
    ``flock`` of ``PATH.lock``, before any client uses it: processes opening a brand-new
    database at once otherwise race on MLflow's schema (``table ... already exists``).
    Other stores: nothing to do. Done once per process and URI."""
    db = sqlite_path(uri)
    if db is None or uri in _SCHEMA_READY:
        return
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    db.parent.mkdir(parents=True, exist_ok=True)
    with _SCHEMA_GUARD, open(db.with_name(db.name + ".lock"), "a+", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            tracking_utils._get_store(uri)  # creates and migrates the tables
            registry_utils._get_store(uri)
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        _SCHEMA_READY.add(uri)


@contextmanager
def quiet_downloads() -> Iterator[None]:
    """No MLflow download progress bars during the block (unless the user set
    ``$MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR``): the registry downloads small files (a version's
    ``MLmodel``, cached figures) whose bars would only clutter ``xmc registry``'s output."""
    if _PROGRESS_BAR_ENV in os.environ:
        yield
        return
    os.environ[_PROGRESS_BAR_ENV] = "false"
    try:
        yield
    finally:
        os.environ.pop(_PROGRESS_BAR_ENV, None)


def tracking_client(uri: str) -> MlflowClient:
    """An ``MlflowClient`` for tracking and registry at ``uri``, once its schema exists
    (:func:`ensure_schema`)."""
    from mlflow import MlflowClient

    ensure_schema(uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URI (None for other stores)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].split("?")[0]
    return None if path in ("", ":memory:") else Path(path)


class Decision(BaseModel):
    """One promotion, rejection or rollback of ``model_name@alias``.

    ``version``: the version concerned (the candidate, or the rollback target); ``previous``: the
    alias holder before (None: no holder); ``new_value`` / ``champion_value``: ``metric`` of the
    version and of the previous holder on the same documents (None: not evaluated);
    ``refused``: not compared at all (another lineage, ``serving.registry.lineage``), ``fix``
    saying what to do; ``at``: UTC time, ISO 8601.
    """

    model_config = ConfigDict(frozen=True)

    model_name: str
    alias: str
    version: str
    previous: str | None
    metric: str
    new_value: float | None
    champion_value: float | None
    margin: float
    promoted: bool
    reason: str
    kind: Literal["gated", "manual", "rollback"]
    at: str
    refused: bool = False
    fix: str = ""


class RegistryStore:
    """Alias, versions, tags and alias history of ``cfg.registry.model_name``."""

    def __init__(self, cfg: XmcConfig) -> None:
        if DATASET_PLACEHOLDER in cfg.registry.model_name:
            raise ValueError(
                f"registry.model_name {cfg.registry.model_name!r} is a template: name the model "
                "first (serving.registry.lineage.for_corpus / for_command)"
            )
        self.uri = cfg.tracking_uri()
        self.name = cfg.registry.model_name
        self.alias = cfg.registry.alias
        self.client = tracking_client(self.uri)

    def require_version(self, version: str | int) -> str:
        """``version`` as a string, checked to exist; ``InputError`` naming the versions if not."""
        from mlflow.exceptions import MlflowException

        text = str(version).strip()
        if not text.isdigit():
            raise InputError(
                self.uri, f"{version!r} is not a version number", "give e.g. `xmc promote 3`"
            )
        try:
            self.client.get_registered_model(self.name)
        except MlflowException as err:
            raise InputError(
                self.uri,
                f"no registered model named {self.name!r}",
                "register a version first (train flow), or set registry.model_name / tracking.uri",
            ) from err
        if not self.version_exists(text):
            known = ", ".join(self.versions()) or "none"
            raise InputError(
                self.uri,
                f"model {self.name!r} has no version {text} (its versions: {known})",
                "give one of the listed versions",
            )
        return str(int(text))

    def versions(self) -> list[str]:
        """Every version number of the model, ascending."""
        return [str(v.version) for v in self.model_versions()]

    def model_versions(self) -> list[ModelVersion]:
        """Every version of the model, ascending by number."""
        quoted = filter_value(self.name)
        if quoted is None:
            raise InputError(self.uri, f"model name {self.name!r} has both quote kinds", "rename")
        found = self.client.search_model_versions(f"name = {quoted}")
        return sorted(found, key=lambda v: int(v.version))

    def version_exists(self, version: str) -> bool:
        """Whether the model has ``version``."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_model_version(self.name, version)
        except MlflowException:
            return False
        return True

    def holder(self) -> str | None:
        """The version the alias points at now (None: unset or no such model)."""
        from mlflow.exceptions import MlflowException

        try:
            aliases = self.client.get_registered_model(self.name).aliases
        except MlflowException:
            return None
        version = aliases.get(self.alias)
        return None if version is None else str(version)

    def history(self) -> list[str]:
        """The alias's recorded holders, oldest first."""
        tags = self.client.get_registered_model(self.name).tags
        raw = tags.get(HISTORY_TAG + self.alias)
        if not raw:
            return []
        try:
            return [str(v) for v in json.loads(raw)]
        except (ValueError, TypeError):
            return []

    def move_alias(
        self, version: str, expected: str | None, history: list[str] | None = None
    ) -> bool:
        """Compare-and-set: point the alias at ``version`` if it still points at ``expected``.

        The caller holds :func:`~xmc_core.serving.registry.locking.registry_lock`. Appends to
        the alias history, or writes ``history`` (which must end with ``version``) when given.
        False if the alias moved.
        """
        if self.holder() != expected:
            return False
        self.client.set_registered_model_alias(self.name, self.alias, version)
        if history is None:
            history = self.history()
            if expected is not None and (not history or history[-1] != expected):
                history.append(expected)
            history.append(version)
        self.write_history(history)
        return True

    def write_history(self, history: list[str]) -> None:
        """Record ``history`` (oldest first; the last ``HISTORY_LIMIT`` holders) as the alias's."""
        value = json.dumps(history[-HISTORY_LIMIT:])
        self.client.set_registered_model_tag(self.name, HISTORY_TAG + self.alias, value)

    def cached_metrics(self, version: str, split: str, key: dict[str, str]) -> dict | None:
        """The figures cached on ``version`` for ``split`` if computed under ``key``."""
        found = self.latest_metrics(version, split)
        return found[1] if found is not None and found[0] == key else None

    def latest_metrics(self, version: str, split: str) -> tuple[dict, dict] | None:
        """(key, metrics) cached on ``version`` for ``split``, whatever the key; or None (also
        when the cache cannot be read: the caller evaluates again)."""
        found = self.client.get_model_version(self.name, version)
        path = found.tags.get(EVAL_FILE_TAG + split)
        raw = self._read_artifact(found.run_id, path) if path else found.tags.get(EVAL_TAG + split)
        if not raw:
            return None
        try:
            entry = json.loads(raw)
            return dict(entry["key"]), {k: float(v) for k, v in entry["metrics"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def cache_metrics(
        self, version: str, split: str, key: dict[str, str], metrics: dict[str, float]
    ) -> None:
        """Store ``metrics`` of ``version`` on ``split`` computed under ``key``: a JSON artifact
        of the version's run named by the tag ``xmc.eval_file.<split>`` (a version without a
        run: the JSON in the tag ``xmc.eval.<split>``, as older registries did)."""
        entry = {"version": version, "split": split, "key": key, "metrics": metrics}
        value = json.dumps(entry, sort_keys=True)
        found = self.client.get_model_version(self.name, version)
        if not found.run_id:
            self.client.set_model_version_tag(self.name, version, EVAL_TAG + split, value)
            return
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        folder = f"{EVAL_DIR}/version-{version}"
        with tempfile.TemporaryDirectory(prefix="xmc-eval-") as tmp:
            file = Path(tmp) / f"{UNSAFE_CHARS.sub('_', split)}-{digest}.json"
            file.write_text(value, encoding="utf-8")
            self.client.log_artifact(found.run_id, str(file), folder)
        tag = EVAL_FILE_TAG + split
        self.client.set_model_version_tag(self.name, version, tag, f"{folder}/{file.name}")
        if EVAL_TAG + split in found.tags:
            self.client.delete_model_version_tag(self.name, version, EVAL_TAG + split)

    def _read_artifact(self, run_id: str | None, path: str) -> str | None:
        """Text of the artifact ``path`` of run ``run_id``; None when it cannot be read."""
        from mlflow.exceptions import MlflowException

        if not run_id:
            return None
        try:
            with tempfile.TemporaryDirectory(prefix="xmc-eval-") as tmp, quiet_downloads():
                local = self.client.download_artifacts(run_id, path, tmp)
                return Path(local).read_text(encoding="utf-8")
        except (MlflowException, OSError, UnicodeDecodeError):
            return None

    def record(self, decision: Decision) -> None:
        """Write ``decision`` as tags of the version it concerns."""
        if decision.kind == "rollback":
            tags: dict[str, Any] = {"from": decision.previous, "at": decision.at}
            prefix = ROLLBACK_TAG
        else:
            verdict = "refused" if decision.refused else "rejected"
            tags = {
                "decision": "promoted" if decision.promoted else verdict,
                "kind": decision.kind,
                "metric": decision.metric,
                "new": decision.new_value,
                "champion": decision.champion_value,
                "champion_version": decision.previous,
                "margin": decision.margin,
                "reason": decision.reason,
                "at": decision.at,
            }
            if decision.fix:
                tags["fix"] = decision.fix
            prefix = PROMOTION_TAG
        for key, value in tags.items():
            text = "none" if value is None else str(value)
            self.client.set_model_version_tag(self.name, decision.version, prefix + key, text)
