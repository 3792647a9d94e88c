"""Load generator for ``xmc serve``: N client threads, one persistent HTTP/1.1 connection each.

Used by ``benchmarks/reliability.py``. Each thread sends ``POST /predict`` back to back until
the deadline (a closed loop: a client sends its next request when the previous one is answered).
Request number ``n`` (one counter shared by all clients) is malformed when
``floor((n + 1) * share) > floor(n * share)``, the malformed kinds taken in rotation; every
other request carries ``batch`` texts of the pool, at positions ``n * batch ...`` modulo its size.

The connections are raw sockets with a minimal HTTP/1.1 reader (status line, headers,
Content-Length or chunked body): threads blocked on sockets cost next to nothing, and this reader
took about 0.23 ms of client CPU per request against 0.6 ms for ``http.client`` (5 clients,
2-core machine). With the answers parsed and checked and the 4 MiB bodies sent, the clients
spent 0.8-1.6 ms of CPU per request in the runs made while writing this, against 40-55 ms of
server CPU per valid one-text request on the reuters model, so they are far from being the
bottleneck; ``reliability.py`` reports both figures for every run.

A valid request is ``ok`` when it gets 200 with exactly one prediction per text, each equal to
the answer given for the same texts before the load (``refs``); a 200 with a different answer
counts as data lost. A malformed request must get a 4xx. Any 5xx, connection error, timeout,
unparsable response, 4xx to a valid request or 2xx/3xx to a malformed one is an error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import numpy as np

MAX_BODY_BYTES = 4 << 20  # ServeConfig.max_body_bytes (this module stays import-free)
MAX_TEXTS = 1000  # ServeConfig.max_texts
CHUNK = 64 << 10
ERRORS_KEPT = 20


@dataclass(frozen=True)
class Malformed:
    """A bad request: its body, whether it is sent chunked, and the status the server should
    give (any 4xx passes; a different 4xx is only reported)."""

    kind: str
    body: bytes
    expected: int
    chunked: bool = False


def malformed_requests(text: str) -> list[Malformed]:
    """The rotation of bad requests; ``text`` is a valid document used inside some of them."""
    oversized = json.dumps({"texts": [text + " x" * (MAX_BODY_BYTES // 2)]}).encode()
    return [
        Malformed("missing_texts", json.dumps({"topk": 5}).encode(), 422),
        Malformed("texts_not_a_list", json.dumps({"texts": text}).encode(), 422),
        Malformed("topk_a_string", json.dumps({"texts": [text], "topk": "5"}).encode(), 422),
        Malformed("oversized_payload", oversized, 413),
        Malformed("empty_text", json.dumps({"texts": [text, ""]}).encode(), 422),
        Malformed("invalid_json", b'{"texts": ["' + text[:40].encode() + b'", ', 400),
        Malformed("oversized_chunked", oversized, 413, chunked=True),
        Malformed("too_many_texts", json.dumps({"texts": [text] * (MAX_TEXTS + 1)}).encode(), 413),
        Malformed("whitespace_text", json.dumps({"texts": [" \n\t "]}).encode(), 422),
        *hostile_requests(text),
    ]


def hostile_requests(text: str) -> list[Malformed]:
    """Bodies that once got a 500 and a traceback: deep nesting, a 5000-digit integer, a lone
    surrogate, ``dataframe_split`` columns that are not a list, params overriding the texts."""
    valid = json.dumps(text).encode()
    deep = b'{"texts": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    huge = b'{"texts": [' + valid + b'], "topk": ' + b"9" * 5000 + b"}"
    split_number = {"dataframe_split": {"columns": 5, "data": [[text]]}}
    split_object = {"dataframe_split": {"columns": {"text": 0}, "data": [[text]]}}
    override = {"inputs": [text], "params": {"texts": 3}}
    return [
        Malformed("nested_3000_deep", deep, 400),
        Malformed("integer_5000_digits", huge, 400),
        Malformed("lone_surrogate", b'{"texts": [' + valid + b', "x\\ud800y"]}', 422),
        Malformed("split_columns_a_number", json.dumps(split_number).encode(), 422),
        Malformed("split_columns_an_object", json.dumps(split_object).encode(), 422),
        Malformed("params_override_texts", json.dumps(override).encode(), 422),
    ]


class Connection:
    """One persistent HTTP/1.1 connection, opened on first use and again after a close."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self.reader: Any = None
        self.opened = 0

    def close(self) -> None:
        if self.sock is not None:
            self.reader.close()
            self.sock.close()
        self.sock = self.reader = None

    def request(
        self, method: str, path: str, body: bytes = b"", chunked: bool = False
    ) -> tuple[int, bytes]:
        """Send one request; return ``(status, body bytes)``. Raises OSError or ValueError."""
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.reader = self.sock.makefile("rb")
            self.opened += 1
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
        if method == "POST":
            head += "Content-Type: application/json\r\n"
            head += (
                "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(body)}\r\n"
            )
        head_bytes = head.encode() + b"\r\n"
        if chunked:
            self.sock.sendall(head_bytes)
            for i in range(0, len(body), CHUNK):
                piece = body[i : i + CHUNK]
                self.sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))
            self.sock.sendall(b"0\r\n\r\n")
        elif len(body) > CHUNK:
            self.sock.sendall(head_bytes)
            self.sock.sendall(body)
        else:
            self.sock.sendall(head_bytes + body)
        status, headers, payload = self._response()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, payload

    def _response(self) -> tuple[int, dict[str, str], bytes]:
        while True:  # skip 1xx interim responses
            line = self.reader.readline(65537)
            if not line:
                raise ConnectionError("server closed the connection before answering")
            status = int(line.split(None, 2)[1])
            headers = {}
            while (h := self.reader.readline(65537)) not in (b"\r\n", b"\n"):
                if not h:
                    raise ConnectionError("server closed the connection inside the headers")
                key, _, value = h.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            if status >= 200:
                break
        if "content-length" in headers:
            payload = self._read_exactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            payload = self._read_chunked()
        else:
            payload = self.reader.read()
            self.close()
        return status, headers, payload

    def _read_exactly(self, n: int) -> bytes:
        data = self.reader.read(n)
        if len(data) != n:
            raise ConnectionError(f"body cut short: {len(data)} of {n} bytes")
        return data

    def _read_chunked(self) -> bytes:
        parts = []
        while size := int(self.reader.readline(1024).split(b";")[0], 16):
            parts.append(self._read_exactly(size))
            self.reader.readline(1024)
        while self.reader.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)


@dataclass
class ClientStats:
    """What one client thread saw (merged by :func:`merge`)."""

    latencies_s: list[float] = field(default_factory=list)
    valid_ok: int = 0
    malformed_rejected: Counter = field(default_factory=Counter)  # "kind status" -> count
    unexpected_4xx: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)  # "what" -> count
    error_samples: list[str] = field(default_factory=list)
    data_lost: int = 0
    data_lost_samples: list[str] = field(default_factory=list)
    requests: int = 0
    malformed_sent: int = 0
    connections: int = 0
    last_done: float = 0.0

    def error(self, what: str, detail: str) -> None:
        self.errors[what] += 1
        if len(self.error_samples) < ERRORS_KEPT:
            self.error_samples.append(f"{what}: {detail[:300]}")

    def lost(self, detail: str) -> None:
        self.data_lost += 1
        if len(self.data_lost_samples) < ERRORS_KEPT:
            self.data_lost_samples.append(detail[:300])


@dataclass(frozen=True)
class Plan:
    """What request ``n`` is: the texts pool and its reference answers, the malformed rotation."""

    pool: list[str]
    refs: list[dict[str, Any]]  # refs[i]: the pre-load answer for pool[i]
    batch: int
    share: float
    malformed: list[Malformed]
    topk: int | None = None
    beam_size: int | None = None

    def request(self, n: int) -> tuple[Malformed | None, bytes, list[int]]:
        """(the malformed request or None, the body, the pool positions of a valid body)."""
        if int((n + 1) * self.share) > int(n * self.share):
            bad = self.malformed[int(n * self.share) % len(self.malformed)]
            return bad, bad.body, []
        idx = [(n * self.batch + j) % len(self.pool) for j in range(self.batch)]
        return None, self.body([self.pool[i] for i in idx]), idx

    def body(self, texts: list[str]) -> bytes:
        req: dict[str, Any] = {"texts": texts}
        if self.topk is not None:
            req["topk"] = self.topk
        if self.beam_size is not None:
            req["beam_size"] = self.beam_size
        return json.dumps(req).encode()


def check(
    plan: Plan,
    bad: Malformed | None,
    idx: list[int],
    status: int,
    payload: bytes,
    latency: float,
    stats: ClientStats,
) -> None:
    """Classify one answer into ``stats``."""
    if bad is not None:
        if 400 <= status < 500:
            stats.malformed_rejected[f"{bad.kind} {status}"] += 1
            if status != bad.expected:
                stats.unexpected_4xx[f"{bad.kind} {status} (expected {bad.expected})"] += 1
        else:
            stats.error(f"malformed {bad.kind} got {status}", payload.decode("utf-8", "replace"))
        return
    if status != 200:
        stats.error(f"valid request got {status}", payload.decode("utf-8", "replace"))
        return
    try:
        predictions = json.loads(payload)["predictions"]
    except (ValueError, KeyError, TypeError) as err:
        stats.error("valid request: unparsable 200 body", f"{err}: {payload[:200]!r}")
        return
    stats.latencies_s.append(latency)
    if not isinstance(predictions, list) or len(predictions) != len(idx):
        stats.lost(f"{len(idx)} texts, answer {payload[:200]!r}")
        return
    for i, got in zip(idx, predictions, strict=True):
        if got != plan.refs[i]:
            stats.lost(f"pool[{i}]: got {str(got)[:120]} expected {str(plan.refs[i])[:120]}")
            return
    stats.valid_ok += 1


def client(
    host: str,
    port: int,
    timeout: float,
    plan: Plan,
    counter: count,
    start: threading.Barrier,
    deadline: list[float],
    stats: ClientStats,
) -> None:
    """One client: wait for the start, then send requests until ``deadline[0]``."""
    conn = Connection(host, port, timeout)
    start.wait()
    while time.monotonic() < deadline[0]:
        bad, body, idx = plan.request(next(counter))
        stats.requests += 1
        stats.malformed_sent += bad is not None
        t0 = time.perf_counter()
        try:
            status, payload = conn.request(
                "POST", "/predict", body, bad is not None and bad.chunked
            )
        except (OSError, ValueError, IndexError) as err:
            kind = bad.kind if bad else "valid"
            stats.error(f"{kind}: {type(err).__name__}", str(err))
            conn.close()
            time.sleep(0.05)  # a server that went away is not hammered in a tight loop
            continue
        check(plan, bad, idx, status, payload, time.perf_counter() - t0, stats)
    stats.last_done = time.monotonic()
    stats.connections = conn.opened
    conn.close()


def run_load(
    host: str, port: int, plan: Plan, clients: int, seconds: float, timeout: float
) -> dict[str, Any]:
    """Run ``clients`` threads for ``seconds``; return merged figures (see :func:`merge`)."""
    counter, start = count(), threading.Barrier(clients + 1)
    deadline = [float("inf")]
    stats = [ClientStats() for _ in range(clients)]
    threads = [
        threading.Thread(
            target=client,
            args=(host, port, timeout, plan, counter, start, deadline, s),
            name=f"client-{i}",
            daemon=True,
        )
        for i, s in enumerate(stats)
    ]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    deadline[0] = t0 + seconds
    start.wait()
    for t in threads:
        t.join(seconds + 2 * timeout + 30)
    hung = sum(t.is_alive() for t in threads)
    wall = max([s.last_done for s in stats] + [deadline[0]]) - t0
    out = merge(stats, wall)
    out["clients_still_running_at_end"] = hung
    if hung:
        out["errors"] += hung
        out["errors_by_kind"]["client still waiting for an answer at the end"] = hung
    return out


def merge(stats: list[ClientStats], wall_s: float) -> dict[str, Any]:
    """Totals over all clients: counts, latency percentiles (valid 200s) and throughput."""
    lat = np.array([x for s in stats for x in s.latencies_s], dtype=np.float64) * 1e3
    rejected = sum((s.malformed_rejected for s in stats), Counter())
    errors = sum((s.errors for s in stats), Counter())
    pct = {f"p{q}": float(np.percentile(lat, q)) if lat.size else None for q in (50, 90, 99)}
    valid_ok = sum(s.valid_ok for s in stats)
    return {
        "wall_s": wall_s,
        "requests": sum(s.requests for s in stats),
        "valid_sent": sum(s.requests - s.malformed_sent for s in stats),
        "valid_ok": valid_ok,
        "malformed_sent": sum(s.malformed_sent for s in stats),
        "malformed_rejected_4xx": sum(rejected.values()),
        "malformed_by_kind_and_status": dict(sorted(rejected.items())),
        "malformed_unexpected_4xx": dict(sum((s.unexpected_4xx for s in stats), Counter())),
        "errors": sum(errors.values()),
        "errors_by_kind": dict(errors),
        "error_samples": [e for s in stats for e in s.error_samples][:ERRORS_KEPT],
        "data_lost": sum(s.data_lost for s in stats),
        "data_lost_samples": [e for s in stats for e in s.data_lost_samples][:ERRORS_KEPT],
        "throughput_valid_rps": valid_ok / wall_s if wall_s > 0 else 0.0,
        "throughput_all_rps": sum(s.requests for s in stats) / wall_s if wall_s > 0 else 0.0,
        "latency_ms": {
            **pct,
            "max": float(lat.max()) if lat.size else None,
            "mean": float(lat.mean()) if lat.size else None,
        },
        "connections_opened": sum(s.connections for s in stats),
    }
