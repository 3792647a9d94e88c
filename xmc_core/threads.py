"""The one place where a run sets a native library's thread pool: :func:`scoped_threads` sets it
for a block and puts the previous count back after it. Torch (``neural.torch_threads``), faiss
(Astec's ``ann.faiss_threads``) and numba (the Dask ranker workers) each pass their own getter
and setter; this module imports none of them, so a run that never uses faiss never loads it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def scoped_threads(
    get: Callable[[], int], put: Callable[[int], object], threads: int | None
) -> Iterator[None]:
    """A pool's threads set to ``threads`` (through ``put``) for the block, then set back to
    what ``get`` gave before it; None: left as they are."""
    if threads is None:
        yield
        return
    before = get()
    put(threads)
    try:
        yield
    finally:
        put(before)
