"""Counts in what people read: ``1 document``, ``2 documents``, ``1,204 documents``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` (thousands separated) and ``noun``, in the plural unless ``n`` is 1 (``plural``:
    the plural when it is not ``noun + "s"``)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
