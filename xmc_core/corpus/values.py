"""Input values in error messages and on disk: quoted briefly, encoded strictly."""

from __future__ import annotations

from pathlib import Path

from xmc_core.errors import InputError


def brief(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message, cut after about ``limit`` characters.

    Messages quote what they blame without pasting a 1 MB document or a 100,000-label list.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def utf8(value: str, what: str, source: str | Path, row: int | None) -> bytes:
    """``value`` encoded as UTF-8; an InputError if it holds a lone surrogate.

    Python strings can hold lone surrogates (U+D800..U+DFFF) that no UTF-8 file can: JSON
    escapes such as ``"\\ud800"`` without their pair decode to them.
    """
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(
            source,
            f"{what} holds the lone surrogate U+{ord(value[err.start]):04X} at character "
            f"{err.start} (near {value[max(0, err.start - 20) : err.start + 20]!r}), "
            "which is not Unicode text",
            "write the character itself, or both halves of a JSON surrogate pair "
            "(e.g. \\ud83d\\ude00), or remove the escape",
            row,
        ) from None
