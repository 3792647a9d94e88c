"""A model folder as a person gets it, the same whichever runner built it.

It holds the ``XmcModel`` (its ``meta.json`` and the files and parts that lists), the config it
was trained with (``config.yaml``), its metrics (``metrics.json``: ``{split: {name: value}}``)
and, when it was trained on a dataset folder, that dataset (``training.json``: path,
fingerprint, time). ``xmc train`` saves its model object with them
(:func:`~xmc_core.model.xmc_model.save_model_folder`); the flows publish the model stage's
artifact folder with them (:func:`publish_model_folder`) under ``<work_dir>/models/<key>/``,
leaving out what is not the model's (the Prefect cache record the artifact folder holds). Either
is logged to MLflow as it is, so ``xmc inspect models:/NAME@ALIAS`` reads the same records.
"""

from __future__ import annotations

import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xmc_core.stages.store import ArtifactStore
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.atomic import write_json
from xmc_core.storage.fingerprint import closure_fingerprint, combine, path_fingerprint
from xmc_core.storage.work_dir import WorkDir

if TYPE_CHECKING:
    from xmc_core.config import XmcConfig
    from xmc_core.corpus import Corpus

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.json"
TRAINING_FILE = "training.json"
"""The dataset a model was trained on (path, fingerprint) and when."""
log = logging.getLogger(__name__)


def training_record(dataset: Path, fingerprint: str) -> dict[str, str]:
    """What :data:`TRAINING_FILE` holds: the dataset and when."""
    return {
        "dataset": str(Path(dataset).resolve()),
        "dataset_fingerprint": fingerprint,
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def write_records(
    folder: Path,
    cfg: XmcConfig,
    metrics: dict[str, dict[str, float]],
    records: dict[str, Any] | None = None,
) -> None:
    """``config.yaml`` (``cfg``), ``metrics.json`` (``metrics``; ``{}`` when none) and
    ``records`` (more JSON files: file name -> content, e.g. ``training.json``) in ``folder``."""
    (folder / CONFIG_FILE).write_text(cfg.to_yaml(), encoding="utf-8")
    write_json(folder / METRICS_FILE, metrics)
    for name, content in (records or {}).items():
        write_json(folder / name, content)


def publish_model_folder(
    artifact: Path,
    work_dir: str | Path,
    cfg: XmcConfig,
    metrics: dict[str, dict[str, float]],
    corpus: Corpus,
) -> Path:
    """The model folder of the ``XmcModel`` artifact folder ``artifact`` (checksums verified):
    its own entries, hard-linked where the file system allows (artifacts never change), and the
    records of :func:`write_records` (``corpus``: the dataset it was trained on), published once
    under ``<work_dir>/models/<key>`` (a rerun with the same model, config, metrics and dataset
    reuses it). Returns the folder."""
    meta = read_meta(artifact, "XmcModel")
    own = {"meta.json", *meta.get("files", {}), *meta.get("parts", {})}
    key = combine(
        path_fingerprint(artifact), cfg.fingerprint(), metrics, corpus.fingerprint,
        closure_fingerprint(__name__),
    )[:32]  # fmt: skip
    out = WorkDir.of(work_dir).model(key)
    with ArtifactStore(work_dir).produce_at(out, log, "model-folder", "reusing") as tmp:
        if tmp is not None:
            for entry in sorted(Path(artifact).iterdir()):  # its entries, not names it lists
                if entry.name not in own:
                    continue
                if entry.is_dir():
                    shutil.copytree(entry, tmp / entry.name, copy_function=_link_or_copy)
                else:
                    _link_or_copy(entry, tmp / entry.name)
            record = training_record(corpus.path, corpus.fingerprint)
            write_records(tmp, cfg, metrics, {TRAINING_FILE: record})
    return out


def _link_or_copy(src: str | Path, dest: str | Path) -> None:
    """A hard link to ``src`` at ``dest``, or a copy where links are refused."""
    try:
        os.link(src, dest, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dest, follow_symlinks=False)
