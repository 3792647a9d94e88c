"""Digests of a run of ``benchmarks/same_results.py`` (predictions, model files) and the
comparison of two of its records: identical metrics and predictions."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

STEPS = ("ingest", "train", "predict", "evaluate")


# ---------------------------------------------------------------- digests
def sha256_file(path: Path) -> str:
    """sha256 of the bytes of ``path``."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def npz_contents_digest(path: Path) -> str:
    """sha256 over (member name, member bytes) of a ``.npz`` zip, members sorted by name.

    Independent of zip timestamps and compression: two files holding the same arrays agree.
    """
    h = hashlib.sha256()
    with zipfile.ZipFile(path) as z:
        for name in sorted(z.namelist()):
            data = z.read(name)
            h.update(f"{name}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def canonical_predictions_digest(path: Path) -> str:
    """sha256 of the prediction records re-serialized with sorted keys, lines sorted."""
    with open(path, encoding="utf-8") as fh:
        lines = sorted(
            json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False) for line in fh
        )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def model_files(model: Path) -> dict[str, Any]:
    """sha256 of every file under ``model`` (relative path -> hex), the contents digest of each
    ``.npz``, and the ranker weight files (names ``W*.npz``) on their own."""
    files = sorted(p for p in model.rglob("*") if p.is_file())
    raw = {str(p.relative_to(model)): sha256_file(p) for p in files}
    npz = {str(p.relative_to(model)): npz_contents_digest(p) for p in files if p.suffix == ".npz"}
    weights = {k: v for k, v in npz.items() if Path(k).name.startswith("W")}
    metrics_json = model / "metrics.json"
    return {
        "file_sha256": raw,
        "npz_contents_sha256": npz,
        "ranker_weights_contents_sha256": weights,
        "metrics_json": json.loads(metrics_json.read_text()) if metrics_json.is_file() else None,
    }


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (so NaN equals NaN and a missing value equals only a missing value)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def compare_dataset(this: dict[str, Any], other: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether the results of one dataset are identical (metrics and predictions), and lines."""
    if this.get("status") != "ok" or other.get("status") != "ok":
        return False, [f"  status: this {this.get('status')}, other {other.get('status')}"]
    checks = {
        "evaluate metrics (as printed)": ("metrics_pct",),
        "train metrics (as printed)": ("train_printed_metrics_pct",),
        "P@k, nDCG@k recomputed from predictions": ("metrics_recomputed",),
        "predictions sha256 (raw bytes)": ("predictions_sha256",),
        "predictions sha256 (canonical)": ("predictions_canonical_sha256",),
    }
    info = {
        "dataset fingerprint (ingest)": ("dataset_fingerprint",),
        "ranker weights contents (informational)": ("model", "ranker_weights_contents_sha256"),
    }
    lines, ok = [], True
    for group, required in ((checks, True), (info, False)):
        for label, keys in group.items():
            a, b = this, other
            for key in keys:
                a, b = (a or {}).get(key), (b or {}).get(key)
            same = _same(a, b)
            ok = ok and (same or not required or label.endswith("(raw bytes)"))
            lines.append(f"  {label}: {'identical' if same else 'DIFFERENT'}")
    p1 = (this["metrics_pct"].get("P@1"), other["metrics_pct"].get("P@1"))
    lines.append(f"  P@1 (%): this {p1[0]}, other {p1[1]}")
    for step in STEPS:
        t, o = this["times_s"].get(step), other["times_s"].get(step)
        tc, oc = this["cpu_s"].get(step), other["cpu_s"].get(step)
        lines.append(
            f"  {step} wall this/other {t:.1f}/{o:.1f} s = {_ratio(t, o)}"
            f" (cpu {tc:.1f}/{oc:.1f} s = {_ratio(tc, oc)})"
        )
    return ok, lines


def compare(this_path: Path, other_path: Path) -> int:
    """Print the comparison of two result files; 0 if every dataset is identical, else 1."""
    this = json.loads(this_path.read_text(encoding="utf-8"))
    other = json.loads(other_path.read_text(encoding="utf-8"))
    print(f"this:  {this_path} at {this['git']['commit']} ({this['git']['describe']})")
    print(f"other: {other_path} at {other['git']['commit']} ({other['git']['describe']})")
    if not _same(
        this["provenance"]["default_config_sha256"], other["provenance"]["default_config_sha256"]
    ):
        print("note: the default configurations (xmc dump-config) differ")
    all_ok = True
    for name in dict.fromkeys([*other["datasets"], *this["datasets"]]):
        a, b = this["datasets"].get(name), other["datasets"].get(name)
        if a is None or b is None:
            print(f"{name}: only in {'other' if a is None else 'this'} file")
            all_ok = False
            continue
        ok, lines = compare_dataset(a, b)
        all_ok = all_ok and ok
        print(f"{name}: {'SAME RESULTS' if ok else 'RESULTS DIFFER'}", *lines, sep="\n")
    print("all identical" if all_ok else "NOT all identical")
    return 0 if all_ok else 1
