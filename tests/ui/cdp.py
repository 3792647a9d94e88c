"""A headless Chromium driven through the DevTools protocol (CDP), for the browser tests.

No browser download and no new dependency: Chromium is Debian's package (``make browser``) and
the protocol runs over the ``websockets`` package that prefect already installs. Only what the
tests need: open a page, evaluate JavaScript, wait for a condition, take a screenshot.

    with Chromium(tmp_path / "chromium") as page:
        page.navigate("http://127.0.0.1:4200/")
        page.wait_for("document.querySelector('h1') !== null")
        page.screenshot(tmp_path / "page.png")
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

INSTALL_HINT = (
    "Chromium is not installed: run `make browser` (Debian: `sudo apt-get install -y "
    "--no-install-recommends chromium`), or set XMC_SKIP_BROWSER=1 to skip the browser tests"
)
BINARIES = ("chromium", "chromium-browser")
"""Debian's name first, then Ubuntu's."""


def find_chromium() -> str | None:
    """The Chromium executable on PATH, or None."""
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """Chromium did not start, or a DevTools command failed."""


class Chromium:
    """One headless Chromium with one page, started on enter and killed on exit.

    ``profile``: a fresh folder for its user data (``DevToolsActivePort`` and ``chromium.log``
    land there); ``size``: the window in CSS pixels.
    """

    def __init__(self, profile: Path, size: tuple[int, int] = (1400, 1800)) -> None:
        binary = find_chromium()
        if binary is None:
            raise BrowserError(INSTALL_HINT)
        self.binary = binary
        self.profile = profile
        self.size = size
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: ClientConnection | None = None
        self._ids = itertools.count(1)

    def __enter__(self) -> Chromium:
        self.profile.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}", f"--window-size={self.size[0]},{self.size[1]}",
            "about:blank",
        ]  # fmt: skip
        with open(self.profile / "chromium.log", "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            port = self._devtools_port(timeout=30.0)
            self.ws = connect(self._page_socket(port), max_size=None, open_timeout=10)
            self.call("Page.enable")
            self.call("Runtime.enable")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def _devtools_port(self, timeout: float) -> int:
        """The port Chromium chose, from the ``DevToolsActivePort`` file it writes."""
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                log = (self.profile / "chromium.log").read_text(errors="replace")[-2000:]
                raise BrowserError(f"Chromium exited with {self.proc.returncode}:\n{log}")
            lines = marker.read_text().splitlines() if marker.is_file() else []
            if len(lines) >= 2:
                return int(lines[0])
            time.sleep(0.1)
        raise BrowserError(f"Chromium wrote no {marker} within {timeout:.0f} s")

    @staticmethod
    def _page_socket(port: int) -> str:
        """The DevTools WebSocket URL of the first page target."""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise BrowserError(f"no page target in {targets}")
        return str(pages[0]["webSocketDebuggerUrl"])

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one CDP command and return its ``result`` (events in between are dropped)."""
        if self.ws is None:
            raise BrowserError("Chromium is not running")
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") != msg_id:
                continue
            if "error" in msg:
                raise BrowserError(f"{method}: {msg['error']}")
            return dict(msg.get("result", {}))

    def navigate(self, url: str) -> None:
        """Open ``url`` in the page (returns once navigation started; use :meth:`wait_for`)."""
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises are awaited)."""
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript error: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, interval: float = 0.25) -> Any:
        """Evaluate ``expression`` until it is truthy; return that value or raise TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true within {timeout:.0f} s: {expression}")
            time.sleep(interval)

    def screenshot(self, path: Path) -> Path:
        """Save the whole page as a PNG at ``path``."""
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
