"""Streaming, strict UTF-8 reading of line-oriented input files.

Files are read in binary and split on ``\\n`` only, so a stray ``\\r``, form feed or Unicode line
separator inside a document never splits it. Each line is decoded strictly as UTF-8; a UTF-8 BOM
on line 1 is dropped. Only one line per file is held in memory at a time; documents to predict
(:func:`iter_doc_lines`) hold at most the per-document cap of a longer line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from xmc_core.errors import InputError

BOM = b"\xef\xbb\xbf"


def reencode_fix(path: str | Path) -> str:
    """The fix for a file that is not UTF-8."""
    name = Path(path).name
    return f"re-encode the file as UTF-8, e.g. iconv -f LATIN1 -t UTF-8 {name} > {name}.utf8"


def strip_newline(raw: bytes) -> bytes:
    """``raw`` without its line ending (``\\n`` or ``\\r\\n``)."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
    return raw


def decode_line(path: str | Path, lineno: int, raw: bytes) -> str:
    """Decode one raw line strictly as UTF-8; line 1 loses a leading BOM.

    Raises InputError naming the file, the line, the byte offset within the line and the bytes.
    """
    shift = 0
    if lineno == 1 and raw.startswith(BOM):
        raw, shift = raw[len(BOM) :], len(BOM)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start : err.end]
        context = raw[max(0, err.start - 20) : err.end + 20]
        raise InputError(
            path,
            f"line {lineno} is not valid UTF-8: bytes {bad!r} at byte offset {err.start + shift} "
            f"of the line (near {context!r})",
            reencode_fix(path),
            lineno,
        ) from None


def iter_lines(path: str | Path, keep_ends: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line number from 1, decoded line)``; the line ending is dropped unless keep_ends."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            yield lineno, decode_line(path, lineno, raw if keep_ends else strip_newline(raw))


_PIECE = 1 << 20
"""Bytes read at a time from the rest of a line past the per-document cap."""


def _whole_chars(raw: bytes) -> bytes:
    """``raw`` without a UTF-8 character cut off at its end."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte & 0xC0 != 0x80:  # the first byte of the last character
            size = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return raw if size <= back else raw[:-back]
    return raw


def capped_line(fh: BinaryIO, max_chars: int | None) -> bytes | None:
    """The next line of ``fh`` (None at the end), its ending dropped.

    With ``max_chars``, a line is kept to its first ``4 * max_chars + 4`` bytes (whole
    characters: still more than ``max_chars`` characters, so the model's cap notices the cut);
    the rest is read in pieces and dropped, so one huge line is never held in memory.
    """
    limit = -1 if max_chars is None else 4 * max_chars + 4
    raw = fh.readline(limit)
    if not raw:
        return None
    if limit < 0 or len(raw) < limit or raw.endswith(b"\n"):
        return strip_newline(raw)
    while (rest := fh.readline(_PIECE)) and not rest.endswith(b"\n"):
        pass
    return _whole_chars(raw)


def iter_doc_lines(
    fh: BinaryIO, name: str | Path, max_chars: int | None
) -> Iterator[tuple[int, str]]:
    """``(line number from 1, text)`` of a binary stream of documents, one a line, strictly
    UTF-8 (errors name ``name``), each cut as :func:`capped_line` does."""
    lineno = 0
    while (raw := capped_line(fh, max_chars)) is not None:
        lineno += 1
        yield lineno, decode_line(name, lineno, raw)


def iter_parallel(paths: Sequence[str | Path]) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line number, [line of each file])`` for files that must have the same lines.

    Line endings are dropped. If one file ends before the others, raises InputError naming the
    files and their line counts (the rest of the longer files is counted, not decoded).
    """
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(p, "rb")) for p in paths]
        lineno = 0
        while True:
            raws = [fh.readline() for fh in handles]
            ended = [raw == b"" for raw in raws]
            if all(ended):
                return
            lineno += 1
            if any(ended):
                raise _count_mismatch(paths, handles, ended, lineno)
            yield (
                lineno,
                [
                    decode_line(p, lineno, strip_newline(r))
                    for p, r in zip(paths, raws, strict=True)
                ],
            )


def _count_mismatch(
    paths: Sequence[str | Path], handles: list[BinaryIO], ended: list[bool], lineno: int
) -> InputError:
    counts = [
        lineno - 1 if done else lineno + sum(1 for _ in fh)
        for fh, done in zip(handles, ended, strict=True)
    ]
    longer = paths[ended.index(False)]
    listing = ", ".join(f"{Path(p).name} has {n} lines" for p, n in zip(paths, counts, strict=True))
    return InputError(
        longer,
        f"line counts differ: {listing} (line {lineno} has no counterpart in "
        f"{', '.join(Path(p).name for p, d in zip(paths, ended, strict=True) if d)})",
        "line i of every file must describe the same document: add or remove lines so that the "
        "files have the same number of lines (look for extra blank lines at the end)",
        lineno,
    )
