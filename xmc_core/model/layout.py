"""The layout of an ``XmcModel`` folder, read from its ``meta.json`` alone: the family, the
parts' classes and folders, the training size and the records (how it started, whether it is
calibrated), for both model formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xmc_core.errors import ArtifactError
from xmc_core.model import registry
from xmc_core.storage.artifacts import meta_fields, read_meta
from xmc_core.storage.paths import require_model_folder

CALIBRATION_DIR = "calibration"
"""The folder of a calibrated model's :class:`~xmc_core.calibration.calibrator.Calibrator`."""
MODEL_FORMAT = 2
"""Layout of an ``XmcModel`` folder: 2 = parts named in meta.json (``encoder/``, ``ranker/``);
1 (no ``model_format`` field) = ``kind`` xr-linear / xr-transformer (``embedding/``)."""


def vectorizer_class(folder: Path, name: str) -> type:
    """The class of ``folder``'s vectorizer, which its meta.json names ``name`` (TF-IDF when it
    names none); a ``vectorizer/`` of another class is an error naming both files."""
    part_meta = folder / "vectorizer" / "meta.json"
    try:
        found = json.loads(part_meta.read_text(encoding="utf-8")).get("class", name)
    except (OSError, ValueError, AttributeError):
        found = name  # unreadable: the vectorizer's own load names the problem
    if found != name:
        raise ArtifactError(
            folder / "meta.json",
            f"names vectorizer {name!r}, but {part_meta} holds a {found!r}",
            "re-create the model folder",
        )
    return registry.part_class(name, folder / "meta.json")


def _start_record(value: Any) -> dict[str, Any] | None:
    """A model's ``start`` record (meta.json): a JSON object or absent."""
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"start is {type(value).__name__}, not an object")
    return value


def _calibration_record(value: Any) -> str | None:
    """A model's ``calibration`` record (meta.json): its calibrator's folder, or absent."""
    if value is not None and value != CALIBRATION_DIR:
        raise ValueError(f"calibration is {value!r}, not {CALIBRATION_DIR!r}")
    return value


def model_layout(folder: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ``XmcModel`` folder's family, part classes, encoder folder and training size, from
    its meta.json (read here with checksums verified, or ``meta`` as the caller read it), for
    either model format."""
    if meta is None:
        require_model_folder(folder)  # a missing folder, a dataset, ...: said as such
        meta = read_meta(folder, "XmcModel")
    with meta_fields(folder):
        n_train_docs = int(meta["n_train_docs"])
        version = meta.get("model_format", 1)
        if version == MODEL_FORMAT:
            return {
                "family": registry.canonical(str(meta["family"])),  # xr-linear: xr_linear
                "encoder": str(meta["encoder"]),
                "ranker": str(meta["ranker"]), "encoder_dir": "encoder",
                "vectorizer": str(meta.get("vectorizer", "TfidfVectorizer")),
                "n_train_docs": n_train_docs, "start": _start_record(meta.get("start")),
                "calibration": _calibration_record(meta.get("calibration")),
            }  # fmt: skip
    if version == 1 and meta.get("kind", "xr-linear") in ("xr-linear", "xr-transformer"):
        text = meta.get("kind") == "xr-transformer"  # format 1's own spelling
        return {
            "family": "xr_transformer" if text else "xr_linear",
            "encoder": "EmbeddingFeatures" if text else "TfidfEncoder",
            "ranker": "XRLinearModel", "encoder_dir": "embedding" if text else None,
            "vectorizer": "TfidfVectorizer",
            "n_train_docs": n_train_docs, "format": 1,
        }  # fmt: skip
    raise ArtifactError(
        folder / "meta.json",
        f"model format {version!r} (kind {meta.get('kind')!r}) is not one this xmc reads "
        f"(format {MODEL_FORMAT})",
        f"retrain: format {MODEL_FORMAT}",
    )
