"""Content fingerprints for cache keys: of the library's own code, of inputs, of artifacts."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import xmc_core
from xmc_core.storage.artifacts import sha256_file


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the library version and every ``xmc_core`` source file.

    Any change inside ``xmc_core`` changes it, so cached results of an older library are never
    reused.
    """
    root = Path(xmc_core.__file__).parent
    h = hashlib.sha256(xmc_core.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def path_fingerprint(path: str | Path) -> str:
    """Fingerprint of a dataset folder (its manifest's), an artifact folder (its ``meta.json``,
    which holds the checksum of every file) or a plain file (its bytes)."""
    path = Path(path)
    if (path / "manifest.json").is_file():
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))["fingerprint"]
    if (path / "meta.json").is_file():
        return sha256_file(path / "meta.json")
    if path.is_file():
        return sha256_file(path)
    raise FileNotFoundError(f"{path}: nothing to fingerprint (no such file or artifact folder)")


def combine(*parts: object) -> str:
    """Stable sha256 of JSON-serializable parts (paths and models must be converted first)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
