"""What a stage's cache key is made of: its code (module closure) and its settings."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from xmc_core.config import Section
from xmc_core.corpus.reader import PartitionRef, partition_fingerprint
from xmc_core.storage.fingerprint import closure_fingerprint


def stage_code(fn: Callable[..., Any]) -> str:
    """Fingerprint of the code a stage runs: the source of the module defining ``fn`` and of
    every ``xmc_core`` module it imports, transitively (not all of ``xmc_core``: a docstring
    edit in ``serving/http.py`` re-runs no stage)."""
    return closure_fingerprint(fn.__module__)


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


@key_part.register(dict)
def _mapping(value: dict[Any, Any]) -> list[list[Any]]:
    """A mapping (stage times, MLflow tags, the retrain flow's intake) by sorted key."""
    return [[str(k), key_part(v)] for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]


@key_part.register(Section)
def _section(value: Section) -> str:
    return value.fingerprint()


@key_part.register(PartitionRef)
def _partition(value: PartitionRef) -> list[str]:
    """A partition's split and its rows' content (not where the row group sits, nor the rest
    of the corpus): unchanged partitions of a grown corpus reuse their cached results."""
    return [value.split, partition_fingerprint(value)]
