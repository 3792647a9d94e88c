"""The DevTools driver on a page that needs no server: a data: URL with a PNG and a table."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.ui.cdp import BrowserError, Chromium


def png(width: int, height: int) -> bytes:
    """A black 8-bit grayscale PNG of that size, written by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\0" + bytes(width) for _ in range(height)))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_page_renders_images_and_reports_their_size(tmp_path: Path) -> None:
    uri = "data:image/png;base64," + base64.b64encode(png(37, 21)).decode()
    html = (
        "<h1>report</h1><table><tr><td>P@1</td><td>66.67</td></tr></table>"
        f"<img alt='ok' src='{uri}'><img alt='broken' src='mlflow-artifacts:/1/x.png'>"
    )
    with Chromium(tmp_path / "profile") as page:
        page.navigate("data:text/html," + quote(html))
        page.wait_for("document.images.length === 2 && [...document.images].every(i => i.complete)")
        sizes = page.evaluate("[...document.images].map(i => [i.alt, i.naturalWidth])")
        assert sizes == [["ok", 37], ["broken", 0]]
        assert page.evaluate("document.querySelector('td + td').innerText") == "66.67"
        with pytest.raises(TimeoutError, match="not true within 0 s"):
            page.wait_for("document.title === 'never'", timeout=0.3)
        with pytest.raises(BrowserError, match="ReferenceError"):
            page.evaluate("undefinedName + 1")
        shot = page.screenshot(tmp_path / "page.png")
    assert png_size(shot.read_bytes())[0] == 1400  # the window width
    assert page.proc is None  # Chromium was stopped on exit
