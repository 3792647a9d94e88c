"""Slow clients for ``benchmarks/reliability.py``: connections that send a valid request's head
(``slow_head``) or body (``slow_body``) one byte every ``PACE_S``, so that the whole request
would take over twice the server's read timeout, one connection after the other until the load
ends. The server must cut each one off (a 408, or the connection closed) about ``timeout``
seconds after it opened, and never answer one 2xx; the valid clients must not notice.

Outcomes of a connection: ``cut`` (within ``timeout + SLACK_S``), ``cut_late`` (later: reported,
not an error), ``not_cut`` (the server took the whole request: an error), ``answered_2xx`` (an
error), ``unfinished`` (the load ended first: not counted).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PACE_S = 0.25
SLACK_S = 3.0
KINDS = ("slow_head", "slow_body")


@dataclass
class SlowStats:
    """What the slow clients saw (one per thread, merged by :func:`merge`)."""

    outcomes: Counter = field(default_factory=Counter)  # "kind outcome" -> count
    cut_after_s: list[float] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)


def slow_request(kind: str, host: str, port: int, text: str, timeout: float) -> tuple[bytes, bytes]:
    """(bytes sent at once, bytes sent one at a time) of a valid request lasting > 2 x timeout."""
    need = int(2 * timeout / PACE_S) + 1
    body = json.dumps({"texts": [text]}).encode()
    if kind == "slow_body":
        body += b" " * max(0, need - len(body))  # JSON allows trailing whitespace
    head = (
        f"POST /predict HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
    )
    if kind == "slow_head":
        head += "X-Pad: " + "a" * max(0, need - len(head)) + "\r\n"
    head_bytes = head.encode() + b"\r\n"
    return (b"", head_bytes + body) if kind == "slow_head" else (head_bytes, body)


def one_connection(
    host: str, port: int, fast: bytes, slow: bytes, stop_at: float
) -> tuple[str, float, bytes]:
    """Send ``fast``, then ``slow`` byte by byte; (outcome, seconds open, any answer)."""
    t0 = time.monotonic()
    with socket.create_connection((host, port), timeout=PACE_S) as sock:
        try:
            sock.sendall(fast)
            for i in range(len(slow)):
                sock.sendall(slow[i : i + 1])
                try:
                    answer = sock.recv(65536)  # waiting PACE_S for it is the pace
                except TimeoutError:
                    if time.monotonic() > stop_at:
                        return "unfinished", time.monotonic() - t0, b""
                    continue
                return "cut", time.monotonic() - t0, answer
        except OSError:  # reset, broken pipe: cut
            return "cut", time.monotonic() - t0, b""
    return "not_cut", time.monotonic() - t0, b""


def slow_client(
    host: str, port: int, text: str, timeout: float, first: int, stop_at: float, stats: SlowStats
) -> None:
    """One thread: connections of alternating kinds until ``stop_at``."""
    n = first
    while time.monotonic() < stop_at:
        kind = KINDS[n % len(KINDS)]
        n += 1
        fast, slow = slow_request(kind, host, port, text, timeout)
        try:
            outcome, seconds, answer = one_connection(host, port, fast, slow, stop_at)
        except OSError as err:
            stats.outcomes[f"{kind} connect_failed"] += 1
            stats.samples.append(f"{kind}: {type(err).__name__}: {err}"[:300])
            time.sleep(PACE_S)
            continue
        if outcome == "cut" and answer.startswith(b"HTTP/1.1 2"):
            outcome = "answered_2xx"
        elif outcome == "cut" and seconds > timeout + SLACK_S:
            outcome = "cut_late"
        if outcome in ("cut", "cut_late"):
            stats.cut_after_s.append(seconds)
        stats.outcomes[f"{kind} {outcome}"] += 1
        if outcome in ("answered_2xx", "not_cut") and len(stats.samples) < 10:
            stats.samples.append(f"{kind} {outcome} after {seconds:.1f} s: {answer[:200]!r}")


def start(
    host: str, port: int, text: str, clients: int, timeout: float, seconds: float
) -> tuple[list[threading.Thread], list[SlowStats]]:
    """Start ``clients`` slow-client threads running for ``seconds``."""
    stop_at = time.monotonic() + seconds
    stats = [SlowStats() for _ in range(clients)]
    threads = [
        threading.Thread(
            target=slow_client,
            args=(host, port, text, timeout, i, stop_at, s),
            name=f"slow-{i}",
            daemon=True,
        )
        for i, s in enumerate(stats)
    ]
    for t in threads:
        t.start()
    return threads, stats


def merge(threads: list[threading.Thread], stats: list[SlowStats], timeout: float) -> dict:
    """Wait for the threads; totals: connections, cut off, errors, seconds until cut."""
    for t in threads:
        t.join(timeout + SLACK_S + 30)
    outcomes: Counter = sum((s.outcomes for s in stats), Counter())
    by_outcome: Counter = Counter()
    for key, n in outcomes.items():
        by_outcome[key.split(" ", 1)[1]] += n
    cut = sorted(x for s in stats for x in s.cut_after_s)
    out: dict[str, Any] = {
        "clients": len(stats),
        "read_timeout_s": timeout,
        "connections": sum(n for k, n in by_outcome.items() if k != "unfinished"),
        "cut_off": by_outcome["cut"] + by_outcome["cut_late"],
        "cut_late": by_outcome["cut_late"],
        "errors": by_outcome["not_cut"]
        + by_outcome["answered_2xx"]
        + by_outcome["connect_failed"]
        + sum(t.is_alive() for t in threads),
        "by_kind_and_outcome": dict(sorted(outcomes.items())),
        "cut_after_s": {
            "min": cut[0] if cut else None,
            "median": cut[len(cut) // 2] if cut else None,
            "max": cut[-1] if cut else None,
        },
        "samples": [x for s in stats for x in s.samples][:10],
    }
    return out


def summary_line(slow: dict[str, Any]) -> str:
    """The slow clients in one line."""
    cut = slow["cut_after_s"]
    when = (
        f", cut after {cut['min']:.1f}-{cut['max']:.1f} s (median {cut['median']:.1f})"
        if cut["median"] is not None
        else ""
    )
    return (
        f"- slow clients: {slow['clients']} threads, {slow['connections']} connections at one "
        f"byte per {PACE_S} s against a {slow['read_timeout_s']:g} s read timeout: "
        f"{slow['cut_off']} cut off ({slow['cut_late']} late){when}, {slow['errors']} errors; "
        f"{slow['by_kind_and_outcome']}"
    )
