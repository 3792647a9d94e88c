"""A model reference -> a local ``XmcModel`` folder.

A reference is a model folder (as written by ``xmc train`` or the train flow, or any folder that
holds one, e.g. a downloaded MLflow model) or an MLflow URI::

    models:/NAME@ALIAS      the version the alias points at now
    models:/NAME/VERSION    one registered version (``models:/NAME/latest``: the newest)
    models:/m-MODEL_ID      a logged model
    runs:/RUN_ID/model      the model ``model`` logged by a run (else the run's artifact)
    any other URI that ``mlflow.artifacts.download_artifacts`` accepts

Every lookup uses ``cfg.tracking_uri()`` for both tracking and registry, never MLflow's
process-wide default (which would create ``./mlflow.db`` in the working directory).

URIs are downloaded once into ``<mlflow_dir>/serving-cache/<key>/`` (temporary folder, then a
rename), where ``key`` hashes the tracking URI and the *resolved* version (name, number,
source, run, creation time): an alias that moves to another version resolves to another key,
so a stale copy is never served, and a registry that was recreated never matches an old copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xmc_core.config import XmcConfig
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities.model_registry import ModelVersion

MODEL_CLASS = "XmcModel"
CACHE_DIR_NAME = "serving-cache"
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_ALIAS_URI = re.compile(r"^models:/(?P<name>[^/@]+)@(?P<alias>[^/]+)(?P<path>/.*)?$")
_VERSION_URI = re.compile(r"^models:/(?P<name>[^/@]+)/(?P<ref>[^/]+)(?P<path>/.*)?$")
_LOGGED_MODEL_URI = re.compile(r"^models:/(?P<id>m-[0-9a-f]{32})(?P<path>/.*)?$")
_RUNS_URI = re.compile(r"^runs:/(?P<run>[^/]+)(?P<path>/.*)?$")
_FIX_URI = "write models:/NAME@ALIAS, models:/NAME/VERSION or runs:/RUN_ID/model"
_FIX_TRACKING = "check the URI, and tracking.uri / $MLFLOW_TRACKING_URI (the store searched)"


@dataclass(frozen=True)
class ResolvedUri:
    """Where to download a model from, and what identifies its content (the cache key)."""

    download_uri: str
    identity: tuple[str, ...]

    def cache_key(self) -> str:
        """sha256 (hex, 32 characters) of the identity."""
        blob = json.dumps(self.identity, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


def is_uri(model: str | Path) -> bool:
    """Whether ``model`` is a URI (``scheme:...``) rather than a local path."""
    return isinstance(model, str) and bool(_URI_SCHEME.match(model))


def local_model_dir(model: str | Path, cfg: XmcConfig) -> Path:
    """The local ``XmcModel`` folder of ``model`` (a folder, or an MLflow URI downloaded into
    the serving cache with tracking URI ``cfg.tracking_uri()``)."""
    if not is_uri(model):
        return find_model_folder(Path(model))
    tracking_uri = cfg.tracking_uri()
    resolved = resolve_uri(str(model), tracking_uri)
    target = cfg.mlflow_dir() / CACHE_DIR_NAME / resolved.cache_key()
    if not target.is_dir():
        _download(resolved.download_uri, target, tracking_uri, str(model))
    return find_model_folder(target, shown=str(model))


def resolve_uri(uri: str, tracking_uri: str) -> ResolvedUri:
    """Pin ``uri`` to immutable content (an alias or ``latest`` becomes a version number) and
    find the artifact location behind it (the registry is asked with ``tracking_uri``, never
    with MLflow's process-wide default)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    if logged := _LOGGED_MODEL_URI.match(uri):
        location = _logged_model_location(client, logged["id"], uri)
        return ResolvedUri(location + (logged["path"] or ""), (tracking_uri, uri))
    if run := _RUNS_URI.match(uri):
        return ResolvedUri(_run_location(client, run["run"], run["path"], uri), (tracking_uri, uri))
    match = _ALIAS_URI.match(uri) or _VERSION_URI.match(uri)
    if match is None:
        return ResolvedUri(uri, (tracking_uri, uri))  # a plain artifact location
    name, path = match["name"], match["path"] or ""
    _registered_model(client, name, uri)
    if "alias" in match.groupdict():
        version = _version_by_alias(client, name, match["alias"], uri)
    else:
        version = _version_by_ref(client, name, match["ref"], uri)
    identity = (
        tracking_uri, name, str(version.version), str(version.source),
        str(version.run_id), str(version.creation_timestamp), path,
    )  # fmt: skip
    location = client.get_model_version_download_uri(name, str(version.version))
    return ResolvedUri(location + path, identity)


def _logged_model_location(client: MlflowClient, model_id: str, uri: str) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_logged_model(model_id).artifact_location
    except MlflowException as err:
        raise InputError(
            uri, f"no logged model {model_id} ({_first_line(err)})", _FIX_TRACKING
        ) from err


def _run_location(client: MlflowClient, run_id: str, path: str, uri: str) -> str:
    """``runs:/RUN_ID/NAME/...``: the model ``NAME`` logged by the run, else its artifacts."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as err:
        raise InputError(uri, f"no run {run_id} ({_first_line(err)})", _FIX_TRACKING) from err
    name, _, rest = path.lstrip("/").partition("/")
    if name:
        models = client.search_logged_models(
            experiment_ids=[run.info.experiment_id], filter_string=f"name = '{name}'"
        )
        for model in models:
            if model.source_run_id == run_id:
                return model.artifact_location + (f"/{rest}" if rest else "")
    return run.info.artifact_uri + path


def _registered_model(client: MlflowClient, name: str, uri: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as err:
        raise InputError(
            uri,
            f"no registered model named {name!r} in the registry ({_first_line(err)})",
            "check the name, and tracking.uri / $MLFLOW_TRACKING_URI (the registry searched)",
        ) from err


def _version_by_alias(client: MlflowClient, name: str, alias: str, uri: str) -> ModelVersion:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException as err:
        aliases = sorted(client.get_registered_model(name).aliases)
        raise InputError(
            uri,
            f"model {name!r} has no alias {alias!r} (its aliases: {aliases or 'none'})",
            "promote a version to the alias first, or use models:/NAME/VERSION",
        ) from err


def _version_by_ref(client: MlflowClient, name: str, ref: str, uri: str) -> ModelVersion:
    from mlflow.exceptions import MlflowException

    if ref == "latest":
        versions = client.search_model_versions(f"name = '{name}'")
        if not versions:
            raise InputError(uri, f"model {name!r} has no versions", "register one first")
        return max(versions, key=lambda v: int(v.version))
    if not ref.isdigit():
        raise InputError(
            uri, f"{ref!r} is not a version number (model stages are deprecated)", _FIX_URI
        )
    try:
        return client.get_model_version(name, ref)
    except MlflowException as err:
        raise InputError(
            uri, f"model {name!r} has no version {ref}", "list the versions in the MLflow UI"
        ) from err


def _download(uri: str, target: Path, tracking_uri: str, shown: str) -> None:
    """Download ``uri`` into ``target`` atomically; a download without a model is not kept."""
    import mlflow
    from mlflow.exceptions import MlflowException

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        try:
            mlflow.artifacts.download_artifacts(
                artifact_uri=uri,
                dst_path=str(tmp),
                tracking_uri=tracking_uri,
                registry_uri=tracking_uri,
            )
        except (MlflowException, OSError) as err:
            raise InputError(
                shown,
                f"cannot download the model ({_first_line(err)})",
                _FIX_TRACKING,
            ) from err
        find_model_folder(tmp, shown=shown)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():  # not a concurrent download of the same model: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def find_model_folder(folder: Path, shown: str | None = None) -> Path:
    """``folder`` itself when it is an ``XmcModel`` folder, else the shallowest one inside it."""
    shown = shown or str(folder)
    if not folder.is_dir():
        raise InputError(
            shown,
            "no such model folder",
            "give the folder written by `xmc train` or the train flow, or an MLflow URI "
            "such as models:/NAME@champion",
        )
    if _meta_class(folder / "meta.json") == MODEL_CLASS:
        return folder
    found = sorted(
        (len(p.relative_to(folder).parts), p.parent)
        for p in folder.rglob("meta.json")
        if _meta_class(p) == MODEL_CLASS
    )
    if not found:
        raise InputError(
            shown,
            f"holds no xmc model (no meta.json of class {MODEL_CLASS!r})",
            "give a model folder written by `xmc train`, or an MLflow model logged by "
            "xmc_core.serving.package.log_model",
        )
    if len(found) > 1 and found[0][0] == found[1][0]:
        raise InputError(
            shown,
            f"holds several xmc models: {', '.join(str(p) for _, p in found[:3])}",
            "point at one model folder",
        )
    return found[0][1]


def _meta_class(path: Path) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("class")
    except (OSError, ValueError, AttributeError):
        return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
