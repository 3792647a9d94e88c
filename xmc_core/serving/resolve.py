"""A model reference -> a local ``XmcModel`` folder.

A reference is a model folder (as written by ``xmc train`` or the train flow, or any folder that
holds one, e.g. a downloaded MLflow model) or an MLflow URI::

    models:/NAME@ALIAS      the version the alias points at now
    models:/NAME/VERSION    one registered version (``models:/NAME/latest``: the newest)
    models:/m-MODEL_ID      a logged model
    runs:/RUN_ID/model      the model ``model`` logged by a run (else the run's artifact)
    any other URI that ``mlflow.artifacts.download_artifacts`` accepts

``models:/`` and ``runs:/`` URIs are parsed with MLflow's own parsers and may name a path inside
the model (``models:/NAME/3/artifacts``); a path that leaves it (``..``, also percent-encoded,
an absolute path, a backslash) is refused, and names are quoted in MLflow search filters.

Every lookup uses ``cfg.tracking_uri()`` for both tracking and registry, never MLflow's
process-wide default (which would create ``./mlflow.db`` in the working directory).

URIs are downloaded once into ``<mlflow_dir>/serving-cache/<key>/`` (temporary folder, then a
rename), where ``key`` hashes the tracking URI and the *resolved* version (name, number,
source, run, creation time): an alias that moves to another version resolves to another key,
so a stale copy is never served, and a registry that was recreated never matches an old copy.
A cached copy is verified before use; a corrupt or incomplete one is moved to
``serving-cache/quarantine/<key>-<time>-<pid>`` (with a ``.REASON.txt``, logged, never deleted)
and downloaded again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from xmc_core.config import XmcConfig
from xmc_core.errors import ArtifactError, InputError, XmcError
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.atomic import write_text
from xmc_core.storage.paths import meta_class, require_model_folder
from xmc_core.storage.work_dir import WorkDir

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities.model_registry import ModelVersion

MODEL_CLASS = "XmcModel"
QUARANTINE_DIR_NAME = "quarantine"
log = logging.getLogger(__name__)
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_LOGGED_MODEL_URI = re.compile(r"^models:/(?P<id>m-[0-9a-f]{32})(?P<path>/.*)?$")
_FIX_URI = "write models:/NAME@ALIAS, models:/NAME/VERSION or runs:/RUN_ID/model"
_FIX_TRACKING = "check the URI, and tracking.uri / $MLFLOW_TRACKING_URI (the store searched)"


@dataclass(frozen=True)
class RegisteredVersion:
    """The registered model version a ``models:/`` URI resolved to (``alias``: the alias it
    was named by, None for ``models:/NAME/VERSION``)."""

    name: str
    version: str
    alias: str | None
    run_id: str | None


@dataclass(frozen=True)
class ResolvedUri:
    """Where to download a model from, what identifies its content (the cache key) and, for a
    registered model, the version it is."""

    download_uri: str
    identity: tuple[str, ...]
    registered: RegisteredVersion | None = None

    def cache_key(self) -> str:
        """sha256 (hex, 32 characters) of the identity."""
        blob = json.dumps(self.identity, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


def is_uri(model: str | Path) -> bool:
    """Whether ``model`` is a URI (``scheme:...``) rather than a local path."""
    return isinstance(model, str) and bool(_URI_SCHEME.match(model))


def local_model_dir(model: str | Path, cfg: XmcConfig) -> Path:
    """The local ``XmcModel`` folder of ``model`` (a folder, or an MLflow URI downloaded into
    the serving cache with tracking URI ``cfg.tracking_uri()``).

    A cached copy is verified (every checksum of the model and its parts) before it is used;
    a corrupt or incomplete one is moved to ``serving-cache/quarantine/`` (logged, never
    deleted) and the model is downloaded again."""
    if not is_uri(model):
        return find_model_folder(Path(model))
    return local_copy(resolve_uri(str(model), cfg.tracking_uri()), cfg, str(model))


def local_copy(resolved: ResolvedUri, cfg: XmcConfig, shown: str) -> Path:
    """The verified serving-cache copy of ``resolved`` (see :func:`local_model_dir`)."""
    target = WorkDir.of(cfg.work_dir).serving_cache / resolved.cache_key()
    if target.is_dir():
        try:
            folder = find_model_folder(target, shown=shown)
            verify_model_tree(folder)
            return folder
        except XmcError as err:
            _quarantine(target, shown, _first_line(err))
    _download(resolved.download_uri, target, cfg.tracking_uri(), shown)
    return find_model_folder(target, shown=shown)


def verify_model_tree(folder: Path) -> None:
    """Check every checksum of the ``XmcModel`` folder and of its parts, recursively
    (``ArtifactError`` naming the first missing or corrupt file)."""
    pending = [(folder, MODEL_CLASS)]
    while pending:
        path, cls = pending.pop()
        meta = read_meta(path, cls)
        for name in meta.get("parts", {}):
            pending.append((path / name, meta_class(path / name / "meta.json") or "?"))


def _quarantine(target: Path, shown: str, problem: str) -> None:
    """Move the damaged cached copy ``target`` to ``<cache>/quarantine/<key>-<UTC time>-<pid>``
    (kept for inspection, never deleted), with the reason in ``REASON.txt`` beside it."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    dest = target.parent / QUARANTINE_DIR_NAME / f"{target.name}-{stamp}-{os.getpid()}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(target, dest)
    except FileNotFoundError:
        return  # another process moved it aside first
    reason = f"{shown}: cached copy {target} set aside: {problem}\n"
    write_text(dest.parent / f"{dest.name}.REASON.txt", reason)
    log.warning(
        "the serving-cache copy of %s is damaged (%s): moved to quarantine %s; downloading again",
        shown, problem, dest,
    )  # fmt: skip


def resolve_uri(uri: str, tracking_uri: str) -> ResolvedUri:
    """Pin ``uri`` to immutable content (an alias or ``latest`` becomes a version number) and
    find the artifact location behind it (the registry is asked with ``tracking_uri``, never
    with MLflow's process-wide default). ``models:/`` and ``runs:/`` URIs are parsed with
    MLflow's own parsers; a sub-path after the model must stay inside its artifacts."""
    from xmc_core.serving.registry.store import tracking_client

    scheme = urllib.parse.urlparse(uri).scheme
    if scheme not in ("models", "runs"):
        return ResolvedUri(uri, (tracking_uri, uri))  # a plain artifact location
    client = tracking_client(tracking_uri)
    if scheme == "runs":
        run_id, sub = _split_runs_uri(uri)
        return ResolvedUri(_run_location(client, run_id, sub, uri), (tracking_uri, uri))
    if logged := _LOGGED_MODEL_URI.match(uri):
        location = _logged_model_location(client, logged["id"], uri)
        sub = safe_sub_path(logged["path"] or "", uri)
        return ResolvedUri(_join(location, sub), (tracking_uri, uri))
    return _resolve_registered(client, uri, tracking_uri)


def _resolve_registered(client: MlflowClient, uri: str, tracking_uri: str) -> ResolvedUri:
    """``models:/NAME@ALIAS[/PATH]``, ``models:/NAME/VERSION[/PATH]`` (or ``latest``)."""
    from mlflow.exceptions import MlflowException
    from mlflow.store.artifact.models_artifact_repo import ModelsArtifactRepository
    from mlflow.store.artifact.utils.models import _parse_model_uri

    base, sub = ModelsArtifactRepository.split_models_uri(uri)
    sub = safe_sub_path(sub, uri)
    try:
        parsed = _parse_model_uri(base)
    except MlflowException as err:
        raise InputError(uri, f"not a model URI ({_first_line(err)})", _FIX_URI) from err
    if parsed.model_id is not None:
        location = _logged_model_location(client, parsed.model_id, uri)
        return ResolvedUri(_join(location, sub), (tracking_uri, uri))
    name = str(parsed.name)
    _registered_model(client, name, uri)
    if parsed.alias is not None:
        version = _version_by_alias(client, name, parsed.alias, uri)
    else:
        version = _version_by_ref(client, name, parsed.version or parsed.stage or "latest", uri)
    identity = (
        tracking_uri, name, str(version.version), str(version.source),
        str(version.run_id), str(version.creation_timestamp), sub,
    )  # fmt: skip
    location = client.get_model_version_download_uri(name, str(version.version))
    registered = RegisteredVersion(name, str(version.version), parsed.alias, version.run_id or None)
    return ResolvedUri(_join(location, sub), identity, registered)


def safe_sub_path(path: str, uri: str) -> str:
    """``path`` (the part of ``uri`` after the model or run, leading ``/`` dropped) when it
    stays inside the artifacts: no ``..`` (also percent-encoded), no absolute path, no
    backslash, no ``#`` (MLflow's ``validate_path_is_safe``). ``InputError`` otherwise."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.uri import validate_path_is_safe

    path = path.strip("/")
    if not path:
        return ""
    try:
        validate_path_is_safe(path)
    except MlflowException as err:
        raise InputError(
            uri,
            f"the path {path!r} after the model leaves the artifacts it names "
            "('..', an absolute path, a backslash or '#')",
            "name a file or folder inside the model, or the model alone "
            "(models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN_ID/model)",
        ) from err
    return path


def _split_runs_uri(uri: str) -> tuple[str, str]:
    """(run id, safe sub-path) of ``runs:/RUN_ID[/PATH]``, parsed by MLflow."""
    from mlflow.exceptions import MlflowException
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    try:
        run_id, path = RunsArtifactRepository.parse_runs_uri(uri)
    except MlflowException as err:
        raise InputError(uri, f"not a runs URI ({_first_line(err)})", _FIX_URI) from err
    return run_id, safe_sub_path(path or "", uri)


def _join(location: str, sub: str) -> str:
    return f"{location.rstrip('/')}/{sub}" if sub else location


def _logged_model_location(client: MlflowClient, model_id: str, uri: str) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_logged_model(model_id).artifact_location
    except MlflowException as err:
        raise InputError(
            uri, f"no logged model {model_id} ({_first_line(err)})", _FIX_TRACKING
        ) from err


def _run_location(client: MlflowClient, run_id: str, path: str, uri: str) -> str:
    """``runs:/RUN_ID/NAME/...``: the model ``NAME`` logged by the run, else its artifacts
    (``path``: a safe sub-path, see :func:`safe_sub_path`)."""
    from mlflow.exceptions import MlflowException

    from xmc_core.serving.registry.store import filter_value

    try:
        run = client.get_run(run_id)
    except MlflowException as err:
        raise InputError(uri, f"no run {run_id} ({_first_line(err)})", _FIX_TRACKING) from err
    name, _, rest = path.partition("/")
    quoted = filter_value(name) if name else None
    if quoted is not None:
        models = client.search_logged_models(
            experiment_ids=[run.info.experiment_id], filter_string=f"name = {quoted}"
        )
        for model in models:
            if model.source_run_id == run_id and model.name == name:
                return _join(model.artifact_location, rest)
    return _join(run.info.artifact_uri, path)


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

    from xmc_core.serving.registry.store import filter_value

    if ref.lower() == "latest":
        quoted = filter_value(name)
        versions = client.search_model_versions(f"name = {quoted}") if quoted else []
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
        try:
            verify_model_tree(find_model_folder(tmp, shown=shown))
        except ArtifactError as err:
            raise InputError(
                shown,
                "the downloaded model is damaged in the store itself "
                f"({_first_line(err).replace(str(tmp) + os.sep, '')})",  # the name in the store
                "re-register the model from its training run's model folder",
            ) from err
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
        require_model_folder(folder, shown)  # says what is there instead
    if meta_class(folder / "meta.json") == MODEL_CLASS:
        return folder
    found = sorted(
        (len(p.relative_to(folder).parts), p.parent)
        for p in folder.rglob("meta.json")
        if meta_class(p) == MODEL_CLASS
    )
    if not found:
        require_model_folder(folder, shown)  # raises, saying what is there instead
        raise InputError(shown, "holds no xmc model", "give a model folder")
    if len(found) > 1 and found[0][0] == found[1][0]:
        raise InputError(
            shown,
            f"holds several xmc models: {', '.join(str(p) for _, p in found[:3])}",
            "point at one model folder",
        )
    return found[0][1]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
