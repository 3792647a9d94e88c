"""Log an ``XmcModel`` folder as an MLflow pyfunc model ("models from code", no pickle).

The logged model holds the model folder (artifact ``xmc_model``), the ``xmc_core`` package code
(``code/xmc_core``; never the working directory), the entry file
:mod:`xmc_core.serving.pyfunc_entry`, a signature (``text`` in; ``labels``/``scores``/
``probabilities`` out; params ``topk``, ``beam_size`` and ``threshold`` defaulting to the model's
own predict config) and pinned pip requirements taken from the running environment (no
dependency inference, no network).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.models.model import ModelInfo
from mlflow.types.schema import Array, ColSpec, DataType, ParamSchema, ParamSpec, Schema

from xmc_core.config import PredictConfig, XmcConfig
from xmc_core.families.configured import family_requirements
from xmc_core.model.layout import model_layout
from xmc_core.serving.pyfunc import ARTIFACT_KEY, TEXT_COLUMN
from xmc_core.serving.registry.locking import PROCESS_TAG, process_identity, registry_lock
from xmc_core.serving.registry.store import FAMILY_TAG, RegistryStore
from xmc_core.serving.resolve import MODEL_CLASS, find_model_folder
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.fingerprint import code_fingerprint, combine, path_fingerprint
from xmc_core.version import __version__

MODEL_NAME = "model"
"""Name of the logged model within its run (``runs:/RUN_ID/model``)."""
ENTRY_FILE = Path(__file__).with_name("pyfunc_entry.py")
CORE_REQUIREMENTS = ("mlflow", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "pyyaml", "numba")
_CODE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
FINGERPRINT_TAG = "xmc.model_fingerprint"
"""Version tag: :func:`model_fingerprint` of the model it holds."""
log = logging.getLogger(__name__)
INPUT_EXAMPLE = pd.DataFrame({TEXT_COLUMN: ["an example document to label"]})
SCAN_SITES = ("mlflow.utils.environment", "mlflow.pyfunc")
"""The modules whose ``warn_dependency_requirement_mismatches`` a pyfunc's logging calls."""
_SCAN_LOCK = threading.Lock()


def model_signature(defaults: PredictConfig) -> ModelSignature:
    """``text`` string in; ``labels`` list<string>, ``scores`` list<float> and
    ``probabilities`` list<float> (null for an uncalibrated model) out; params ``topk`` and
    ``beam_size`` (long) and ``threshold`` (double) defaulting to ``defaults``."""
    return ModelSignature(
        inputs=Schema([ColSpec(DataType.string, TEXT_COLUMN)]),
        outputs=Schema(
            [
                ColSpec(Array(DataType.string), "labels"),
                ColSpec(Array(DataType.double), "scores"),
                ColSpec(Array(DataType.double), "probabilities", required=False),
            ]
        ),
        params=ParamSchema(
            [
                ParamSpec("topk", DataType.long, defaults.topk),
                ParamSpec("beam_size", DataType.long, defaults.beam_size),
                ParamSpec("threshold", DataType.double, defaults.threshold),
            ]
        ),
    )


def pip_requirements(family: str, cfg: XmcConfig | None = None) -> list[str]:
    """``package==version`` of the running environment for what the pyfunc imports: the core
    packages and those the model's family declares (an ensemble's: its members' families, as
    ``cfg`` configures them). A package not installed here is listed by its name, with a
    warning."""
    names = CORE_REQUIREMENTS + tuple(family_requirements(family, cfg))
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            log.warning(
                "%s is not installed here: the logged model requires it without a version "
                "(install it where the model is served)", name,
            )  # fmt: skip
            pins.append(name)
    return pins


def model_predict_config(model_dir: Path) -> PredictConfig:
    """The predict config saved with the model's ranker (every ranker's ``meta.json`` holds
    it as ``predict``)."""
    ranker = model_layout(model_dir, read_meta(model_dir, MODEL_CLASS, verify=False))["ranker"]
    meta = read_meta(model_dir / "ranker", ranker, verify=False)
    return PredictConfig.model_validate(meta["predict"])


def log_model(
    model_dir: Path,
    cfg: XmcConfig,
    registered_model_name: str | None = None,
    reuse_identical: bool = False,
    version_tags: Mapping[str, str] | None = None,
) -> ModelInfo:
    """Log ``model_dir`` (an ``XmcModel`` folder) as pyfunc model ``model`` of the active run;
    when ``registered_model_name`` is given, register it as a version of that model, tagged
    with its fingerprint, family, this process and ``version_tags`` (e.g. the training data:
    ``serving.registry.lineage.version_tags``; :func:`register_version`). ``reuse_identical``:
    when a version holds an identical model already, take that version instead of a new one
    (what a training run does, so that an identical retrain adds no version).

    ``cfg`` is the run's configuration; its fingerprint is kept in the model's metadata.
    """
    folder = find_model_folder(Path(model_dir))
    meta = read_meta(folder, MODEL_CLASS)  # checks every checksum before anything is logged
    family = model_layout(folder, meta)["family"]  # meta: read once, checksums verified
    with tempfile.TemporaryDirectory(prefix="xmc-code-") as tmp:
        code = Path(tmp) / "xmc_core"
        shutil.copytree(Path(__file__).parent.parent, code, ignore=_CODE_IGNORE)
        with _no_requirement_scan():
            info = _log_pyfunc(folder, code, family, meta, cfg)
    if registered_model_name is not None:
        info.registered_model_version = register_logged(
            info.model_uri, folder, cfg, registered_model_name, reuse_identical, version_tags
        )
    return info


def _log_pyfunc(
    folder: Path, code: Path, family: str, meta: Mapping[str, Any], cfg: XmcConfig
) -> ModelInfo:
    """``mlflow.pyfunc.log_model`` of the model ``folder`` with the ``xmc_core`` copy ``code``."""
    return mlflow.pyfunc.log_model(
        name=MODEL_NAME,
        python_model=str(ENTRY_FILE),
        artifacts={ARTIFACT_KEY: str(folder)},
        code_paths=[str(code)],
        signature=model_signature(model_predict_config(folder)),
        input_example=INPUT_EXAMPLE,
        pip_requirements=pip_requirements(family, cfg),
        metadata={
            "xmc_kind": family,
            "xmc_version": __version__,
            "n_labels": int(meta["n_labels"]),
            "config_fingerprint": cfg.fingerprint(),
        },
    )


@contextlib.contextmanager
def _no_requirement_scan() -> Iterator[None]:
    """Skip MLflow's check of the logged pip requirements against the running environment.

    The check maps every installed distribution's files to the modules they hold (2.6 s, once
    per process, in this project's venv: torch's and transformers' file lists) only to warn when
    a requirement is not installed at its pinned version; ours are the running environment's own
    versions (:func:`pip_requirements`, which warns itself of a package not installed), so it
    has nothing to add. ``SCAN_SITES`` names where MLflow calls it (``tests/serving`` checks
    that they still do)."""
    modules = [importlib.import_module(name) for name in SCAN_SITES]
    name = "warn_dependency_requirement_mismatches"
    with _SCAN_LOCK:
        saved = [getattr(m, name) for m in modules]
        for m in modules:
            setattr(m, name, lambda _requirements: None)
        try:
            yield
        finally:
            for m, original in zip(modules, saved, strict=True):
                setattr(m, name, original)


def register_logged(
    model_uri: str,
    model_dir: Path,
    cfg: XmcConfig,
    name: str,
    reuse_identical: bool,
    version_tags: Mapping[str, str] | None = None,
) -> int:
    """A version of ``name`` for the model logged at ``model_uri`` from the ``XmcModel`` folder
    ``model_dir``, tagged with its family and ``version_tags`` (:func:`register_version`): what
    :func:`log_model` does when given a name, and the lifecycle's ``registration`` stage after
    the run that logged the model has ended."""
    folder = find_model_folder(Path(model_dir))
    family = model_layout(folder, read_meta(folder, MODEL_CLASS, verify=False))["family"]
    tags = {FAMILY_TAG: str(family), **(version_tags or {})}
    return register_version(model_uri, folder, cfg, name, reuse_identical, tags)


def model_fingerprint(folder: Path) -> str:
    """What makes two logged models identical: the ``XmcModel`` folder's ``meta.json`` (which
    holds the checksum of every file) and the ``xmc_core`` code shipped with it."""
    return combine(path_fingerprint(folder), code_fingerprint())


def register_version(
    model_uri: str,
    folder: Path,
    cfg: XmcConfig,
    name: str,
    reuse_identical: bool,
    tags: Mapping[str, str] | None = None,
) -> int:
    """A version of ``name`` for the model logged at ``model_uri`` (of the ``XmcModel`` folder
    ``folder``): with ``reuse_identical``, the newest version whose ``xmc.model_fingerprint``
    tag matches; else a new version, created with that tag, ``xmc.process`` (who registered
    it, see ``serving.reconcile``) and ``tags`` in the same call.

    Uses MLflow's current tracking and registry URIs (those of the active run); the look-up and
    the registration run under the registry lock of ``name``."""
    fingerprint = model_fingerprint(folder)
    registry = cfg.registry.model_copy(update={"model_name": name})
    named = cfg.model_copy(update={"registry": registry})
    with registry_lock(named):
        if reuse_identical and (same := _identical_version(named, fingerprint)) is not None:
            log.info("model %s is version %d of %s already: no new version", folder, same, name)
            return same
        own = {**(tags or {}), FINGERPRINT_TAG: fingerprint, PROCESS_TAG: process_identity()}
        with _without_registration_notices():
            version = int(mlflow.register_model(model_uri, name, tags=own).version)
        log.info("registered %s as version %d of %s", folder, version, name)
        return version


_NOTICES = ("Successfully registered model ", "Registered model ", "Created version ")


@contextlib.contextmanager
def _without_registration_notices() -> Iterator[None]:
    """MLflow prints ``Successfully registered model 'xmc'.`` (or ``Registered model 'xmc'
    already exists. Creating a new version ...``) and ``Created version '3' of model 'xmc'.``
    straight to stderr; they are dropped (the caller logs one line), anything
    else MLflow writes to stderr meanwhile (a warning) is passed on."""
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        yield
    kept = [line for line in buffer.getvalue().splitlines() if not line.startswith(_NOTICES)]
    if kept:
        print("\n".join(kept), file=sys.stderr)


def _identical_version(cfg: XmcConfig, fingerprint: str) -> int | None:
    """The newest version of ``cfg.registry.model_name`` tagged with ``fingerprint`` (None:
    none)."""
    found = RegistryStore(cfg).model_versions()
    same = [int(v.version) for v in found if v.tags.get(FINGERPRINT_TAG) == fingerprint]
    return max(same, default=None)
