"""Byte-level corruptions of encoded input files: truncation, foreign encodings, invalid UTF-8.

What an importer makes of them is not predicted (a truncated line may still be a valid
document); only the property is checked, plus the line of a splice no UTF-8 decoder accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class ByteCorruption:
    """A change to the bytes of one encoded file (``target`` indexes the sorted file names)."""

    target: int
    kind: str  # truncate | splice | reencode | flip | empty | delete
    at: float  # position as a fraction of the file length
    payload: bytes = b""
    encoding: str = ""

    def apply(self, files: dict[str, bytes]) -> str:
        """Change ``files`` in place; returns the name of the changed file."""
        name = sorted(files)[self.target % len(files)]
        data = files[name]
        pos = min(int(self.at * len(data)), len(data))
        if self.kind == "delete":
            del files[name]
        elif self.kind == "empty":
            files[name] = b""
        elif self.kind == "truncate":
            files[name] = data[:pos]
        elif self.kind == "splice":
            files[name] = data[:pos] + self.payload + data[pos:]
        elif self.kind == "flip" and data:
            pos = min(pos, len(data) - 1)
            files[name] = data[:pos] + bytes([data[pos] ^ self.payload[0]]) + data[pos + 1 :]
        elif self.kind == "reencode":
            files[name] = data.decode("utf-8", "replace").encode(self.encoding, "replace")
        return name

    def splice_line(self, files: dict[str, bytes], name: str) -> int:
        """The 1-based line (``\\n``-separated) a splice lands in, in the original file."""
        data = files[name]
        return data[: min(int(self.at * len(data)), len(data))].count(b"\n") + 1


INVALID_UTF8 = [
    b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80",
    b"\x80", "café".encode("latin-1"), "€uro".encode("cp1252"), "日本".encode("shift_jis"),
    "Ωmega".encode("utf-16-le") + b"\xd8",
]  # fmt: skip
OTHER_SPLICES = [
    b"\x00", b"\n", b"\r", b"\r\n", b",", b'"', b"\t", b" ", b"\xef\xbb\xbf", b"{", b"]",
    "x".encode("utf-16"), b":", b"-1",
]  # fmt: skip

byte_corruptions = st.one_of(
    st.builds(
        ByteCorruption,
        st.integers(0, 7),
        st.sampled_from(["truncate", "flip", "empty", "delete"]),
        st.floats(0, 1),
        st.sampled_from([b"\x01", b"\x80", b"\xff", b"\x10"]),
    ),
    st.builds(
        ByteCorruption,
        st.integers(0, 7),
        st.just("splice"),
        st.floats(0, 1),
        st.sampled_from(INVALID_UTF8 + OTHER_SPLICES),
    ),
    st.builds(
        ByteCorruption,
        st.integers(0, 7),
        st.just("reencode"),
        st.floats(0, 1),
        encoding=st.sampled_from(["utf-16", "utf-16-be", "latin-1", "cp1252", "utf-32"]),
    ),
)


NEVER_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])
"""Bytes that appear in no UTF-8 text (others may pair up with the bytes around a splice)."""


def is_invalid_splice(c: ByteCorruption | None) -> bool:
    """A splice of bytes that no UTF-8 decoder accepts, whatever surrounds them."""
    return c is not None and c.kind == "splice" and any(b in NEVER_UTF8 for b in c.payload)
