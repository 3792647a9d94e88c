"""Reliability: serving under load with malformed requests, plus the reliability test suites.

Usage, from the repository root, with the project venv::

    python benchmarks/reliability.py [--dataset ../shared/datasets/reuters21578-modapte]
        [--model MODEL_DIR] [--clients 50] [--seconds 60] [--batch 1] [--malformed-share 0.05]
        [--pool 128] [--topk N] [--beam-size N] [--timeout 60] [--slow-clients 4]
        [--read-timeout 5] [--skip-suites]
        [--work data/benchmarks/reliability] [--out benchmarks/results/reliability-<date>.json]

1. **Serving under load.** Without ``--model``, ``--dataset`` (a ``lines`` source folder, or an
   ingested dataset folder holding ``manifest.json``) is ingested with ``xmc ingest lines
   --on-unlabeled keep`` and a model trained with ``xmc train`` (default config) into
   ``--work``; both are reused by later runs (the model folder is keyed by the digest of the
   ``xmc_core`` sources). ``xmc serve MODEL --port <free port>`` then runs in its own process on
   127.0.0.1. Once ``/health`` answers, the first ``--pool`` test texts are sent, ``--batch`` at
   a time, one request after the other: these answers are the references (and the warm-up).
   Then ``--clients`` threads of this process (``benchmarks/load_client.py``) hold one
   persistent connection each for ``--seconds``, sending ``POST /predict`` with ``--batch``
   texts; ``--malformed-share`` of the requests are malformed, in rotation (missing texts, texts
   not a list, topk a string, a body over 4 MiB with Content-Length and chunked, an empty and a
   whitespace-only text, invalid JSON, 1001 texts, and the hostile ones: JSON nested 3000 deep,
   a 5000-digit integer, a lone surrogate, ``dataframe_split`` columns a number or an object,
   params overriding the texts). Malformed requests must get a 4xx; valid
   ones a 200 whose predictions equal the references. Meanwhile ``--slow-clients`` threads
   (``benchmarks/slow_clients.py``) open connection after connection sending a valid request's
   head or body one byte every 0.25 s, slower than the server's ``--read-timeout`` (its
   ``--header-timeout`` and ``--body-timeout``): each must be cut off (408 or closed), never
   answered 2xx. Errors: any 5xx, connection error, timeout, 4xx to a valid request, 2xx to a
   malformed one, a slow connection not cut off, or traceback in the server's log.
   Data lost: a 200 with a missing or different prediction. After the load, ``/health`` must
   answer and the first reference request must get the same answer again. The server's RSS and
   CPU time are sampled every 0.25 s; this process's CPU time is reported too (the clients must
   not be the bottleneck).
2. **Reliability suites** (unless ``--skip-suites``; skipped when ``tests/reliability`` does not
   exist): ``pytest tests/reliability -q`` with ``XMC_RELIABILITY_STATS`` naming a file to which
   the suites append JSON lines ``{"suite", "inputs", "faults", "tracebacks",
   "partial_outputs", "data_lost", ...}`` (numbers, or lists counted by length); every case of
   the hostile suites (``tests/reliability/test_hostile_*.py``: concurrent writers, kills inside
   swaps, intake and registry moves, disk full on a small tmpfs, read-only and unreadable files,
   hostile serving payloads, slow clients, tampered cache records) is counted as tried and, if it
   passed, held.

Prints one summary table (bad inputs tried, faults injected, requests served, hostile cases
tried and held, errors, data lost) and writes the JSON report (machine, command, settings,
every figure) atomically. Exit status 1 if any error or lost datum was seen, the after-load
checks failed or pytest failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import load_client
import slow_clients
from served_model import (
    HOST,
    SAMPLE_S,
    Monitor,
    call,
    free_port,
    log_findings,
    prepare_dataset,
    prepare_model,
    start_server,
    stop_server,
    test_texts,
    wait_for_health,
)

from xmc_core.storage.atomic import write_text

REPO = Path(__file__).resolve().parents[1]
SUMMARY_COLUMNS = (
    "source", "bad inputs tried", "faults injected", "requests served", "hostile cases tried",
    "held", "errors", "data lost",
)  # fmt: skip
SUITE_KEYS = {
    "bad_inputs": ("inputs",),
    "faults": ("faults",),
    "requests": ("requests",),
    "tried": ("tried",),
    "held": ("held",),
    "errors": ("tracebacks",),
    "data_lost": ("partial_outputs", "data_lost", "lost"),
}


# ---------------------------------------------------------------- serving under load
def references(port: int, plan: load_client.Plan, timeout: float) -> list[dict[str, Any]]:
    """The server's answers for the pool, ``batch`` texts per request, one after the other."""
    refs: list[dict[str, Any]] = []
    conn = load_client.Connection(HOST, port, timeout)
    for i in range(0, len(plan.pool), plan.batch):
        status, payload = conn.request("POST", "/predict", plan.body(plan.pool[i : i + plan.batch]))
        if status != 200:
            raise RuntimeError(f"reference request {i}: status {status}: {payload[:300]!r}")
        refs.extend(json.loads(payload)["predictions"])
    conn.close()
    return refs


def serve_under_load(model: Path, texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, wait for ``/health``, run :func:`measure_load`; stop the server."""
    port, log = free_port(), args.work / "serve.log"
    proc = start_server(model, port, log, args.read_timeout)
    out: dict[str, Any] = {"model": str(model), "port": port, "server_log": str(log)}
    monitor: Monitor | None = None
    try:
        t0 = time.monotonic()
        out["health_before"] = wait_for_health(port, proc, log, args.startup_timeout)
        out["startup_s"] = time.monotonic() - t0
        monitor = Monitor(proc.pid)
        monitor.start()
        out |= measure_load(port, monitor, texts, args)
        out["server_log_findings"] = log_findings(log)
        out["server_alive_after"] = proc.poll() is None
    finally:
        if monitor is not None:
            monitor.stop.set()
        out["server_exit_code"] = stop_server(proc)
    return out


def measure_load(
    port: int, monitor: Monitor, texts: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """References, the load, the after-load checks; server and client resource use."""
    plan = load_client.Plan(
        pool=texts,
        refs=[],
        batch=args.batch,
        share=args.malformed_share,
        malformed=load_client.malformed_requests(texts[0]),
        topk=args.topk,
        beam_size=args.beam_size,
    )
    t0 = time.perf_counter()
    plan = dataclasses.replace(plan, refs=references(port, plan, args.timeout))
    out: dict[str, Any] = {
        "references": {"texts": len(texts), "s": time.perf_counter() - t0},
        "malformed_kinds": {m.kind: m.expected for m in plan.malformed},
    }
    print(
        f"references: {len(texts)} texts in {out['references']['s']:.1f} s; load: "
        f"{args.clients} clients for {args.seconds} s",
        flush=True,
    )
    usage0, t_load = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    slow = slow_clients.start(
        HOST, port, texts[0], args.slow_clients, args.read_timeout, args.seconds
    )
    out["load"] = load_client.run_load(HOST, port, plan, args.clients, args.seconds, args.timeout)
    t_end, usage1 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    out["slow_clients"] = slow_clients.merge(*slow, args.read_timeout)
    time.sleep(2 * SAMPLE_S)
    out["after"] = after_checks(port, plan, args.timeout)
    out["server"] = monitor.between(t_load, t_end + SAMPLE_S)
    out["server"]["rss_after_checks_mb"] = monitor.sample()[1]
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    out["client"] = {
        "cpu_s": cpu,
        "cpu_us_per_request": 1e6 * cpu / max(out["load"]["requests"], 1),
        "cpu_percent_of_one_core": 100 * cpu / max(t_end - t_load, 1e-9),
    }
    return out


def after_checks(port: int, plan: load_client.Plan, timeout: float) -> dict[str, Any]:
    """``/health`` answers and the first reference request gets the same answer again."""
    out: dict[str, Any] = {"health_ok": False, "same_answer": False}
    try:
        out["health_ok"] = call(port, "GET", "/health", timeout=timeout)["status"] == "ok"
        body = plan.body(plan.pool[: plan.batch])
        got = call(port, "POST", "/predict", body, timeout=timeout)["predictions"]
        out["same_answer"] = got == plan.refs[: plan.batch]
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        out["error"] = f"{type(err).__name__}: {err}"
    return out


# ---------------------------------------------------------------- the reliability suites
def figure(value: Any) -> int:
    """A suite's figure: a number, or a list / dict counted by its length."""
    if isinstance(value, list | dict | tuple):
        return len(value)
    return int(value or 0)


def run_suites(work: Path) -> dict[str, Any]:
    """``pytest tests/reliability -q`` with ``XMC_RELIABILITY_STATS``; figures per suite."""
    if not (REPO / "tests" / "reliability").is_dir():
        return {"status": "absent (no tests/reliability)"}
    with tempfile.TemporaryDirectory(prefix="reliability-suites-", dir=work) as tmp:
        stats_file, junit = Path(tmp) / "stats.jsonl", Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-q"]
        print("$", f"XMC_RELIABILITY_STATS={stats_file}", shlex.join(cmd), flush=True)
        t0 = time.perf_counter()
        env = {**os.environ, "XMC_RELIABILITY_STATS": str(stats_file)}
        proc = subprocess.run(
            [*cmd, f"--junitxml={junit}"], cwd=REPO, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        text = stats_file.read_text() if stats_file.exists() else ""
        records = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        tests = junit_counts(junit)
    suites: dict[str, dict[str, int]] = {}
    for rec in records:
        row = suites.setdefault(str(rec.get("suite", "?")), dict.fromkeys(SUITE_KEYS, 0))
        for column, keys in SUITE_KEYS.items():
            row[column] += sum(figure(rec.get(k)) for k in keys)
    output = proc.stdout + proc.stderr
    out = {
        "status": "ran",
        "command": f"XMC_RELIABILITY_STATS=<tmp> {shlex.join(cmd)}",
        "exit_code": proc.returncode,
        "passed": None if proc.returncode == 5 else proc.returncode == 0,  # 5: no tests
        "tests": tests,
        "pytest_summary": ", ".join(f"{n} {k}" for k, n in tests.items() if n)
        + f" in {wall:.0f} s (exit code {proc.returncode})",
        "not_passed": re.findall(r"^(?:FAILED|ERROR) .*$", output, flags=re.M),
        "wall_s": wall,
        "suites": suites,
        "records": records,
    }
    if proc.returncode != 0:
        out["output_tail"] = output[-5000:]
    return out


def junit_counts(path: Path) -> dict[str, int]:
    """Tests, failures, errors and skipped of a pytest JUnit XML report (zeros if absent)."""
    keys = ("tests", "failures", "errors", "skipped")
    if not path.exists():
        return dict.fromkeys(keys, 0)
    suites = list(ElementTree.parse(path).getroot().iter("testsuite"))
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


# ---------------------------------------------------------------- report
def summary_rows(serving: dict[str, Any] | None, suites: dict[str, Any]) -> list[list[Any]]:
    """One row per source in SUMMARY_COLUMNS' order, then a total row."""
    rows = [  # a hostile case that did not hold is an error
        [name, r["bad_inputs"], r["faults"], r["requests"], r["tried"], r["held"],
         r["errors"] + r["tried"] - r["held"], r["data_lost"]]
        for name, r in suites.get("suites", {}).items()
    ]  # fmt: skip
    if serving is not None:
        load, after, slow = serving["load"], serving["after"], serving["slow_clients"]
        errors = load["errors"] + serving["server_log_findings"]["tracebacks"] + slow["errors"]
        errors += (not after["health_ok"]) + (not serving["server_alive_after"])
        lost = load["data_lost"] + (not after["same_answer"])
        served = load["valid_ok"] + load["malformed_rejected_4xx"]
        faults = slow["connections"]  # slow clients
        row = ["serving under load", load["malformed_sent"], faults, served, 0, 0, errors, lost]
        rows.insert(0, row)
    total = ["total", *(sum(r[i] for r in rows) for i in range(1, len(SUMMARY_COLUMNS)))]
    return [*rows, total]


def markdown(report: dict[str, Any]) -> str:
    """The summary table, then the load figures."""
    head = "| " + " | ".join(SUMMARY_COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * (len(SUMMARY_COLUMNS) - 1)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in report["summary"]]
    suites = report["suites"]
    lines.append("")
    lines.append(f"- suites: {suites.get('pytest_summary') or suites['status']}")
    lines += [f"  - {line}" for line in suites.get("not_passed", [])]
    if (s := report.get("serving")) is not None:
        ld, lat, srv, cl = s["load"], s["load"]["latency_ms"], s["server"], s["client"]
        lines += [
            f"- load: {report['settings']['clients']} clients, {ld['wall_s']:.1f} s, "
            f"{ld['requests']} requests: {ld['valid_ok']} of {ld['valid_sent']} valid ok, "
            f"{ld['malformed_rejected_4xx']} of {ld['malformed_sent']} malformed rejected "
            f"with 4xx, {ld['errors']} errors, {ld['data_lost']} data lost",
            f"- throughput {ld['throughput_valid_rps']:.1f} valid req/s "
            f"({ld['throughput_valid_rps'] * report['settings']['batch']:.1f} texts/s); latency "
            f"of valid requests ms: p50 {lat['p50']:.1f}, p90 {lat['p90']:.1f}, "
            f"p99 {lat['p99']:.1f}, max {lat['max']:.1f}"
            if lat["p50"] is not None
            else "- no valid request succeeded",
            f"- server: peak RSS {srv['peak_rss_mb']:.0f} MB (first {srv['rss_first_mb']:.0f}, "
            f"last {srv['rss_last_mb']:.0f}), CPU {srv['cpu_s']:.1f} s "
            f"({srv['cpu_percent_of_one_core']:.0f}% of one core); clients' CPU "
            f"{cl['cpu_s']:.1f} s ({cl['cpu_us_per_request']:.0f} us/request)",
            f"- malformed, by kind and status: {ld['malformed_by_kind_and_status']}",
            slow_clients.summary_line(s["slow_clients"]),
            f"- after the load: health ok {s['after']['health_ok']}, same answer as before "
            f"{s['after']['same_answer']}; server log: {s['server_log_findings']}",
        ]
        if ld["malformed_unexpected_4xx"]:
            lines.append(f"- 4xx other than expected: {ld['malformed_unexpected_4xx']}")
        for sample in ld["error_samples"] + ld["data_lost_samples"]:
            lines.append(f"  - {sample}")
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    libs = [
        "numpy",
        "scipy",
        "numba",
        "pyarrow",
        "fastapi",
        "starlette",
        "uvicorn",
        "h11",
        "pydantic",
        "anyio",
        "psutil",
        "xmc",
    ]
    return bench_common.machine_basics() | {
        "python": platform.python_version(),
        "niceness": os.nice(0),
        **{lib: version(lib) for lib in libs},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    default_dataset = REPO.parent / "shared" / "datasets" / "reuters21578-modapte"
    p.add_argument(
        "--dataset",
        type=Path,
        default=default_dataset,
        help="lines source folder or ingested dataset (texts; model if no --model)",
    )
    p.add_argument("--model", type=Path, help="serve this model folder instead of training one")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--batch", type=int, default=1, help="texts per valid request")
    p.add_argument("--malformed-share", type=float, default=0.05)
    p.add_argument("--pool", type=int, default=128, help="distinct test texts sent")
    p.add_argument("--topk", type=int, help="sent in every valid request (default: server's)")
    p.add_argument("--beam-size", type=int, help="sent in every valid request")
    p.add_argument("--timeout", type=float, default=60.0, help="socket timeout, seconds")
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--slow-clients", type=int, default=4, help="byte-by-byte connections")
    p.add_argument(
        "--read-timeout", type=float, default=5.0,
        help="the server's --header-timeout and --body-timeout, seconds",
    )  # fmt: skip
    p.add_argument("--skip-suites", action="store_true")
    p.add_argument("--work", type=Path, default=REPO / "data" / "benchmarks" / "reliability")
    p.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / f"reliability-{today}.json"
    )
    args = p.parse_args(argv)
    if not 0 <= args.malformed_share < 1 or min(args.clients, args.batch, args.pool) < 1:
        p.error("need 0 <= --malformed-share < 1 and --clients, --batch, --pool >= 1")
    if args.slow_clients < 0 or not 0 < args.read_timeout <= 3600:
        p.error("need --slow-clients >= 0 and 0 < --read-timeout <= 3600")
    return args


def main() -> int:
    """Serving under load, then the suites; print the table, write the JSON."""
    args = parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "python_executable": sys.executable,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "git_start": bench_common.git_state(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load_average_start": os.getloadavg(),
    }
    dataset = prepare_dataset(args.dataset.resolve(), args.work)
    model = args.model.resolve() if args.model else prepare_model(dataset, args.work)
    texts = test_texts(dataset, args.pool)
    texts = (texts * args.batch)[: max(args.batch, len(texts) - len(texts) % args.batch)]
    report["dataset"] = str(dataset)
    report["serving"] = serve_under_load(model, texts, args)
    report["suites"] = {"status": "skipped"} if args.skip_suites else run_suites(args.work)
    report["load_average_end"] = os.getloadavg()
    report["git_end"] = bench_common.git_state()
    report["summary"] = summary_rows(report["serving"], report["suites"])
    report["summary_columns"] = list(SUMMARY_COLUMNS)
    suites_failed = report["suites"].get("passed") is False
    total = report["summary"][-1]
    report["ok"] = total[-2] == 0 and total[-1] == 0 and not suites_failed  # errors, data lost
    write_text(args.out, json.dumps(report, indent=2, default=str) + "\n")
    print(markdown(report))
    print(f"wrote {args.out}; {'OK' if report['ok'] else 'FAILED'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
