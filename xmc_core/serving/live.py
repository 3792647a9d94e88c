"""The model a server answers with, and how it picks up a new one without a restart.

A :class:`LiveModel` holds the :class:`Served` model (an ``XmcModel`` and what it is) and the
reference it came from: a model folder or an MLflow URI such as ``models:/xmc-synthetic@champion``.
:meth:`LiveModel.reload` looks the reference up again. When it now names other content (the
alias moved to another version; the folder's ``meta.json``, which holds the checksum of every
file, changed), the new model is downloaded, verified and loaded *beside* the old one, then
swapped in by one assignment. A request takes the ``Served`` current when it starts and uses
only that one, so requests in flight finish on the old model. A reload that fails (registry
unreachable, download error, checksum mismatch) changes nothing: the old model keeps serving
and one line is logged. A model refused while loading (e.g. arrays over the memory budget) is
remembered: asked again for the same version, the server refuses it at once, without reading it
(:meth:`LiveModel._load_new`). :func:`watch` reloads every ``serve.reload_interval_s`` seconds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import anyio
from pydantic import Field

from xmc_core.config import XmcConfig
from xmc_core.errors import InputError, XmcError
from xmc_core.model.xmc_model import XmcModel
from xmc_core.serving.resolve import (
    RegisteredVersion,
    find_model_folder,
    is_uri,
    local_copy,
    resolve_uri,
    verify_model_tree,
)
from xmc_core.storage.fingerprint import path_fingerprint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelInfo:
    """What ``GET /health`` says about the served model (registry fields are null for a
    model that is not a registered version, e.g. a folder)."""

    uri: Annotated[str | None, Field(description="the MLflow URI served (null: a folder)")]
    path: Annotated[str, Field(description="the local folder the model was loaded from")]
    name: Annotated[str | None, Field(description="registered model name")]
    version: Annotated[str | None, Field(description='registered version, e.g. "3"')]
    alias: Annotated[str | None, Field(description="the alias the URI names, e.g. champion")]
    run_id: Annotated[str | None, Field(description="the MLflow run that logged the version")]
    family: Annotated[str, Field(description="model family, e.g. xr_linear")]
    n_labels: Annotated[int, Field(description="labels the model knows")]
    fingerprint: Annotated[
        str, Field(description="sha256 of the model's meta.json, which holds every file's")
    ]
    loaded_at: Annotated[str, Field(description="when this server loaded it (ISO 8601, UTC)")]

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)

    def describe(self) -> str:
        """``version 3`` for a registered model, else ``the model loaded at <time>``."""
        if self.version is not None:
            return f"version {self.version}"
        return f"the model loaded at {self.loaded_at}"


@dataclass(frozen=True)
class Served:
    """One loaded model, what it is, and ``key``: what identifies its content (the serving-cache
    key of the resolved URI, or the folder's fingerprint)."""

    model: XmcModel
    info: ModelInfo
    key: str


@dataclass(frozen=True)
class ReloadOutcome:
    """What a reload did: ``reloaded`` False when the reference still names the served model."""

    reloaded: bool
    old: ModelInfo
    new: ModelInfo


class ReloadError(XmcError):
    """A reload that failed; the old model keeps serving (``status``: the HTTP answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class LiveModel:
    """The served model, swapped atomically by :meth:`reload` (see the module docstring)."""

    def __init__(self, served: Served, reference: str | None, cfg: XmcConfig | None) -> None:
        self._served = served
        self.reference, self.cfg = reference, cfg
        self._reload_lock = threading.Lock()
        self._last_failure: str | None = None
        self._refused: tuple[str, str] | None = None  # (key, why) of a model refused at load

    @classmethod
    def open(cls, reference: str | Path, cfg: XmcConfig) -> LiveModel:
        """Resolve ``reference`` (folder or MLflow URI), verify and load it."""
        reference = str(reference)
        key, fetch, registered = _locate(reference, cfg)
        return cls(_load(reference, key, fetch(), registered), reference, cfg)

    @classmethod
    def fixed(cls, model: XmcModel) -> LiveModel:
        """An already loaded model with no reference to reload from."""
        info = ModelInfo(
            None, "", None, None, None, None, model.family, len(model.labels), "", _now()
        )
        return cls(Served(model, info, ""), None, None)

    @property
    def current(self) -> Served:
        """The model to answer a request with (take it once per request)."""
        return self._served

    @property
    def watchable(self) -> bool:
        """Whether the reference is an MLflow URI (what :func:`watch` checks)."""
        return self.reference is not None and is_uri(self.reference)

    def reload(self, trigger: str = "POST /reload") -> ReloadOutcome:
        """Look the reference up again and swap in the model it names now, if that changed.

        ``ReloadError`` (409) without a reference, (502) when the look-up, download,
        verification or load fails: then the old model stays, and one line is logged (by
        ``trigger``; the background check logs a failure again only for another model or,
        when the reference cannot be looked up, another message).
        """
        if self.reference is None or self.cfg is None:
            raise ReloadError(409, "this server was given a loaded model, not a reference")
        with self._reload_lock:
            old, key = self._served, None
            try:
                key, fetch, registered = _locate(self.reference, self.cfg)
                if key != old.key:
                    self._served = self._load_new(key, fetch, registered)
            except Exception as err:  # any failure: keep serving the old model
                message = _one_line(err)
                failure = key or message  # the same model failing again is not news
                if trigger == "POST /reload" or failure != self._last_failure:
                    log.warning(
                        "%s of %s failed, still serving %s: %s",
                        trigger, self.reference, old.info.describe(), message,
                    )  # fmt: skip
                self._last_failure = failure
                raise ReloadError(
                    502, f"reload of {self.reference} failed: {message}; still serving "
                    f"{old.info.describe()}",
                ) from err  # fmt: skip
            self._last_failure = None
            new = self._served
        if new is not old:
            log.info(
                "%s: now serving %s of %s (was %s)",
                trigger, new.info.describe(), self.reference, old.info.describe(),
            )  # fmt: skip
        return ReloadOutcome(new is not old, old.info, new.info)

    def _load_new(
        self, key: str, fetch: Callable[[], Path], registered: RegisteredVersion | None
    ) -> Served:
        """Load the model ``key`` names. A model refused while loading (an ``XmcError``: too
        large, not written by xmc, no vectorizer) is remembered and refused again without being
        fetched or read, until the reference names another: ``key`` names immutable content
        (a registered version, or a folder's ``meta.json``, which holds every checksum)."""
        assert self.reference is not None
        if self._refused is not None and self._refused[0] == key:
            raise RefusedModel(f"{self._refused[1]} (refused when first loaded, not read again)")
        folder = fetch()
        try:
            return _load(self.reference, key, folder, registered)
        except XmcError as err:
            self._refused = (key, _one_line(err))
            raise


class RefusedModel(XmcError):
    """The reference still names a model that was refused when it was loaded."""


async def watch(live: LiveModel, interval_s: float) -> None:
    """Reload ``live`` every ``interval_s`` seconds until cancelled (failures are logged by
    :meth:`LiveModel.reload` and otherwise ignored)."""
    while True:
        await anyio.sleep(interval_s)
        with contextlib.suppress(ReloadError):  # logged by reload
            await anyio.to_thread.run_sync(live.reload, "background check")


def _locate(
    reference: str, cfg: XmcConfig
) -> tuple[str, Callable[[], Path], RegisteredVersion | None]:
    """(content key, a function returning the verified local folder, registered version) of
    ``reference``; only the function downloads."""
    if is_uri(reference):
        resolved = resolve_uri(reference, cfg.tracking_uri())
        return (
            resolved.cache_key(),
            lambda: local_copy(resolved, cfg, reference),
            resolved.registered,
        )
    folder = find_model_folder(Path(reference))

    def verified() -> Path:
        verify_model_tree(folder)
        return folder

    return path_fingerprint(folder), verified, None


def _load(reference: str, key: str, folder: Path, registered: RegisteredVersion | None) -> Served:
    model = XmcModel.load(folder)
    if not model.takes_text:
        raise InputError(
            folder,
            "trained on feature matrices (xmc train --x): it has no vectorizer, and the server "
            "answers raw texts",
            "serve a model trained on a text dataset; predict from features with "
            "`xmc predict MODEL --x X.npz OUT.npz`",
        )
    unregistered = dict.fromkeys(("name", "version", "alias", "run_id"))
    info = ModelInfo(
        uri=reference if is_uri(reference) else None,
        path=str(folder),
        **(asdict(registered) if registered is not None else unregistered),
        family=model.family,
        n_labels=len(model.labels),
        fingerprint=path_fingerprint(folder),
        loaded_at=_now(),
    )
    return Served(model, info, key)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _one_line(err: BaseException) -> str:
    """The first line of an error (its type when it has no message), at most 500 characters."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    if not isinstance(err, XmcError):
        line = f"{type(err).__name__}: {line}"
    return line[:500]
