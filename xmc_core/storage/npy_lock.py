"""numpy's ``.npy`` header parser under one lock: a workaround for a CPython 3.11 bug.

CPython before 3.11.8 (gh-106905) tracks the recursion depth of ``ast`` conversions in a global,
so two threads inside ``ast.parse`` at the same time can fail with ``SystemError: AST
constructor recursion depth mismatch``. numpy parses every ``.npy`` header with
``ast.literal_eval``, and a flow's tasks load arrays on several threads (Prefect's thread pool):
seen once in the contract suite, a ``featurize`` task loading the vectorizer. :func:`install`
wraps numpy's header reader in a lock (a header is a few hundred bytes: the lock is held for
microseconds; the arrays themselves are read outside it). Installed when ``xmc_core.storage``'s
readers are imported; installing twice wraps once.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

HEADER_LOCK = threading.Lock()
_MODULES = ("numpy.lib._format_impl", "numpy.lib.format")
"""Where numpy 2 (then 1) keeps ``_read_array_header``, the one function that parses headers."""


def install() -> bool:
    """Wrap numpy's ``_read_array_header`` in :data:`HEADER_LOCK` -> whether it is wrapped."""
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        real = getattr(module, "_read_array_header", None)
        if real is None:
            continue
        if not getattr(real, "xmc_locked", False):
            module._read_array_header = _locked(real)  # type: ignore[attr-defined]
        return True
    return False


def _locked(real: Callable[..., Any]) -> Callable[..., Any]:
    def read_header(*args: Any, **kwargs: Any) -> Any:
        with HEADER_LOCK:
            return real(*args, **kwargs)

    read_header.xmc_locked = True  # type: ignore[attr-defined]
    return read_header
