"""What a stage's cache key is made of: its code (module closure) and its settings."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xmc_core.config import EncoderConfig, Section
from xmc_core.corpus.reader import PartitionRef, partition_fingerprint
from xmc_core.storage.artifacts import sha256_file
from xmc_core.storage.fingerprint import combine


def stage_code(fn: Callable[..., Any]) -> str:
    """Fingerprint of the code a stage runs: the closure of the module defining ``fn``."""
    from xmc_core.storage import fingerprint

    closure = getattr(fingerprint, "closure_fingerprint", None)
    if closure is None:  # pragma: no cover - until the per-module closure lands
        return fingerprint.code_fingerprint()
    return closure(fn.__module__)


@functools.singledispatch
def key_part(value: Any) -> Any:
    """A JSON-ready stand-in of a setting for a cache key; unknown types are refused (a key
    must never silently depend on a ``repr``)."""
    raise TypeError(f"no cache-key part for a {type(value).__name__}: register one in keys.py")


@key_part.register(type(None))
@key_part.register(bool)
@key_part.register(int)
@key_part.register(float)
@key_part.register(str)
def _plain(value: Any) -> Any:
    return value


@key_part.register(list)
@key_part.register(tuple)
def _sequence(value: list[Any] | tuple[Any, ...]) -> list[Any]:
    return [key_part(v) for v in value]


@key_part.register(Section)
def _section(value: Section) -> str:
    return value.fingerprint()


@key_part.register(EncoderConfig)
def _encoder(value: EncoderConfig) -> str:
    return encoder_fingerprint(value)


@key_part.register(PartitionRef)
def _partition(value: PartitionRef) -> list[str]:
    """A partition's split and its rows' content (not where the row group sits, nor the rest
    of the corpus): unchanged partitions of a grown corpus reuse their cached results."""
    return [value.split, partition_fingerprint(value)]


def encoder_fingerprint(cfg: EncoderConfig) -> str:
    """The encoder's files (weights, tokenizer) and settings, not its path."""
    folder = Path(cfg.path) if cfg.path is not None else _default_encoder_path()
    files = tuple(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    )
    return combine(
        _files_digest(str(folder.resolve()), files), cfg.model_dump(mode="json", exclude={"path"})
    )


def _default_encoder_path() -> Path:
    from xmc_core.transformer.encoder import default_encoder_path

    return default_encoder_path()


@functools.cache
def _files_digest(folder: str, files: tuple[tuple[str, int, int], ...]) -> str:
    """sha256 of every file (memoized on name, size and mtime: big weights hash once)."""
    return combine([(name, sha256_file(Path(folder) / name)) for name, _, _ in files])
