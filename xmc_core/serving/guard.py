"""What keeps ``xmc serve`` safe on a hostile network: the bearer token, the bind policy, and
an HTTP/1.1 protocol with read deadlines and a connection limit.

- **Token**: ``--token-file FILE`` or else ``$XMC_SERVE_TOKEN``; at least 16 characters; a
  token file must be a regular file (a FIFO or a device is refused), not readable by every
  user. Requests must carry ``Authorization: Bearer <token>`` (compared in constant time),
  except ``GET /health``, which stays open for load balancers and says nothing secret, and the
  API's documentation (``GET /docs``, ``GET /openapi.json``).
- **Bind**: a host other than loopback (127.0.0.0/8, ::1, localhost) needs a token, unless
  ``--insecure-public`` says the exposure is wanted (behind a trusted proxy, say).
- **Deadlines**: the request head must be complete within ``header_timeout_s`` of the moment
  the server is ready for it (connection opened, or previous answer sent), the body within
  ``body_timeout_s`` of the head. A late head gets ``408`` and the connection is closed; a late
  body is cut by closing the connection. Time spent predicting is not limited.
- **Connections**: past ``max_connections`` open connections, a new connection's requests get
  ``503`` and it is closed; connections already open are not affected.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from xmc_core.errors import InputError, XmcError
from xmc_core.storage.paths import file_kind

TOKEN_ENV = "XMC_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
OPEN_PATHS = frozenset({"/health", "/docs", "/openapi.json"})
"""Paths open without the token: nothing secret there (the model's identity, the API)."""
_MAKE_TOKEN = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


# ---------------------------------------------------------------- token and bind policy
def read_token(token_file: Path | None, env: dict[str, str] | None = None) -> str | None:
    """The bearer token from ``token_file`` (if given) or ``$XMC_SERVE_TOKEN``; None if neither."""
    env = os.environ if env is None else env
    if token_file is not None:
        mode, token = _read_token_file(token_file)
        if mode & stat.S_IROTH:
            raise InputError(
                token_file, "token file is readable by every user", f"chmod 600 {token_file}"
            )
        where: str | Path = token_file
    elif env.get(TOKEN_ENV) is not None:
        token, where = env[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if not token:
        raise InputError(where, "the token is empty", _MAKE_TOKEN)
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise InputError(
            where, f"the token must be at least {MIN_TOKEN_CHARS} printable characters "
            "without spaces", _MAKE_TOKEN,
        )  # fmt: skip
    return token


def _read_token_file(path: Path) -> tuple[int, str]:
    """The mode and the stripped text of ``path``, which must be a regular file: a FIFO would
    hang start-up, a device never end (opened without blocking, checked before reading)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                problem = f"the token file is {file_kind(path, mode)}, not a regular file"
                raise InputError(
                    path, problem, f"write the token into a regular file; {_MAKE_TOKEN}"
                )
            return mode, fh.read().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(path, f"cannot read the token file ({err})", _MAKE_TOKEN) from err


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another name: it may resolve to any interface


def check_exposure(host: str, token: str | None, insecure_public: bool) -> None:
    """Refuse a non-loopback bind without a token unless ``insecure_public``; warn otherwise."""
    if is_loopback(host):
        return
    if token is None and not insecure_public:
        raise XmcError(
            f"refusing to serve on {host} without a token: anyone who can reach it could use "
            f"it.\n  fix: set ${TOKEN_ENV} or pass --token-file FILE (clients then send "
            "'Authorization: Bearer <token>'), bind --host 127.0.0.1, or pass "
            "--insecure-public if the exposure is intended"
        )
    if token is None:
        log.warning("warning: serving on %s with no authentication (--insecure-public)", host)
    else:
        log.warning(
            "warning: serving on %s over plain HTTP: the token is sent in clear; put a TLS "
            "proxy in front for untrusted networks", host,
        )  # fmt: skip


# ---------------------------------------------------------------- bearer token middleware
class BearerAuth:
    """ASGI middleware: every path but ``OPEN_PATHS`` needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str) -> None:
        self.app, self.token = app, token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": "missing or wrong token: send 'Authorization: Bearer "
                           "<token>'"}).encode()  # fmt: skip
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="xmc"'),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def allowed(self, scope: Scope) -> bool:
        values = [v for k, v in scope["headers"] if k == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, given = values[0].strip().partition(b" ")
        # compare_digest takes as long for any wrong token of the same length as for the right one
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)


# ---------------------------------------------------------------- protocol with deadlines
class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus read deadlines and a per-connection admission check.

    Subclassed per server by :func:`guarded_protocol`, which sets the three class attributes
    (their defaults live in ``xmc_core.config.ServeConfig``).
    """

    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline: Any = None  # asyncio.TimerHandle
        self.phase: str | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self.limit_concurrency = 0  # uvicorn then answers every request here 503 + close
            log.warning("connection over the limit of %d: answering 503", self.max_connections)
        self.update_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self.update_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.update_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self.set_deadline(None)
        super().connection_lost(exc)

    def update_deadline(self) -> None:
        """Head deadline while waiting for a request, body deadline while reading one."""
        state = self.conn.their_state
        if state is h11.IDLE:
            self.set_deadline("head")
        elif state is h11.SEND_BODY:
            self.set_deadline("body")
        else:  # whole request read (now answering), or closed
            self.set_deadline(None)

    def set_deadline(self, phase: str | None) -> None:
        if phase == self.phase:
            return
        if self.deadline is not None:
            self.deadline.cancel()
        self.phase, self.deadline = phase, None
        if phase is not None and not self.transport.is_closing():
            seconds = self.header_timeout_s if phase == "head" else self.body_timeout_s
            self.deadline = self.loop.call_later(seconds, self.timed_out, phase, seconds)

    def timed_out(self, phase: str, seconds: float) -> None:
        """Close a connection too slow to send its request (408 first if a head had begun)."""
        self.deadline = None
        if self.transport.is_closing():
            return
        started = bool(self.conn.trailing_data[0])
        if phase == "head" and not started:
            self.transport.close()  # an idle connection: nothing to answer
            return
        what = "request head" if phase == "head" else "request body"
        where = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning("closing the connection of %s: %s not in %g s", where, what, seconds)
        if phase == "head":
            self.send_timeout(f"{what} not received within {seconds:g} s")
        self.transport.close()

    def send_timeout(self, message: str) -> None:
        body = json.dumps({"detail": message}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            out = self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Timeout"))
            out += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return
        self.transport.write(out)


def guarded_protocol(
    header_timeout_s: float, body_timeout_s: float, max_connections: int
) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` subclass with these settings (uvicorn takes a class)."""
    settings = {
        "header_timeout_s": header_timeout_s,
        "body_timeout_s": body_timeout_s,
        "max_connections": max_connections,
    }
    return type("ServerH11Protocol", (GuardedH11Protocol,), settings)
