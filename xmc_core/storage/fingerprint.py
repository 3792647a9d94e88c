"""Content fingerprints for cache keys: of the library's own code, of inputs, of artifacts."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from xmc_core.storage.artifacts import sha256_file
from xmc_core.storage.code_closure import (
    DEFAULT_ROOTS,
    clear_caches,
    module_closure,
    module_source,
)
from xmc_core.version import __version__


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the library version and every ``xmc_core`` source file.

    Any change inside ``xmc_core`` changes it, so cached results of an older library are never
    reused.
    """
    root = Path(__file__).parent.parent
    h = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def closure_fingerprint(*module_names: str, roots: tuple[str, ...] = DEFAULT_ROOTS) -> str:
    """sha256 over the library version and every source file in the union of the modules'
    closures under ``roots`` (see :func:`xmc_core.storage.code_closure.module_closure`), each
    file as its path relative to its ``sys.path`` entry (``xmc_core/config.py``), its length
    and its bytes, sorted by path.

    So a stage's key changes with the code its module runs, and only with that: a docstring
    edit in ``xmc_core/serving/http.py`` leaves the featurization keys alone. Cached per
    process, like :func:`code_fingerprint`.
    """
    if not module_names:
        raise ValueError("closure_fingerprint needs at least one module name")
    files: dict[str, Path] = {}
    for name in module_names:
        for module in module_closure(name, roots):
            path = module_source(module)
            if path is not None:
                files[_relative_path(module, path)] = path
    h = hashlib.sha256(__version__.encode())
    for rel in sorted(files):
        data = files[rel].read_bytes()
        h.update(f"\0{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def forget_code() -> None:
    """Clear the code fingerprints and closures cached by this process (after editing sources)."""
    code_fingerprint.cache_clear()
    closure_fingerprint.cache_clear()
    clear_caches()


def _relative_path(module_name: str, path: Path) -> str:
    """``xmc_core.features.tokenizer`` -> ``xmc_core/features/tokenizer.py`` (posix)."""
    depth = module_name.count(".") + (path.name == "__init__.py")
    return "/".join(path.parts[-depth - 1 :])


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
