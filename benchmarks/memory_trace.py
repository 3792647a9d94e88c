"""Where our XR-Linear fit reaches its peak memory: a trace of one run, stage by stage.

Usage, from the repository root, with the project venv::

    python benchmarks/memory_trace.py WORKDIR [--interval 0.2]
        [--out benchmarks/results/memory-trace-<date>.json]

``WORKDIR`` holds the shared features as ``benchmarks/scaling_prep.py featurize`` (or
``bench_common.prepare``) writes them: ``X_train.npz``, ``Y_train.npz``, ``X_test.npz``. A child
process runs ``peer_runner.py ours`` itself (warm-up, PIFA, tree, ``XRLinearModel.fit``,
prediction of the test split twice, save), marking each stage and each line of the library's log;
this process samples the child's RSS every ``--interval`` seconds (as ``benchmarks/scaling.py``
does, so the peaks compare with its figures), and a thread in the child records the main
thread's stack at each new maximum of its own RSS. The results file holds the peak of every
stage, the log lines with the RSS when each was written, the stack at the peak, and the RSS
curve (one sample a second).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STACK_DEPTH = 8
"""Innermost frames kept of the stack at each new maximum."""


# ---------------------------------------------------------------- the child (the traced run)
def _child(workdir: Path, marks_path: Path) -> int:
    """Run ``peer_runner.py ours`` (:func:`peer_runner.run_ours`) on ``workdir``'s features,
    writing one JSON line per stage mark, log line and new RSS maximum (with the main thread's
    stack) to ``marks_path``."""
    import scipy.sparse as sp
    from peer_runner import rss_mb, run_ours

    out = open(marks_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (open for the run)
    lock = threading.Lock()

    def write(kind: str, text: str, **more: Any) -> None:
        with lock:
            out.write(json.dumps({"t": time.time(), "kind": kind, "text": text, **more}) + "\n")

    class Marks(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            write("log", record.getMessage(), rss_mb=rss_mb())

    logging.getLogger("xmc_core").addHandler(Marks(logging.INFO))
    logging.getLogger("xmc_core").setLevel(logging.INFO)
    main = threading.main_thread().ident
    threading.Thread(target=_watch_stack, args=(main, write, rss_mb), daemon=True).start()
    write("stage", "load")
    names = ("X_train", "Y_train", "X_test")
    X, Y, X_test = (sp.load_npz(workdir / f"{n}.npz").tocsr() for n in names)
    with tempfile.TemporaryDirectory(prefix="xmc-trace-") as tmp:
        _, result = run_ours(X, Y, X_test, Path(tmp) / "model", lambda s: write("stage", s))
    write("stage", "done", stages_s=result["stages_s"])
    return 0


def _watch_stack(main: int, write: Any, rss_mb: Any, every_s: float = 0.05) -> None:
    """Record the main thread's innermost frames each time this process's RSS passes its
    maximum so far by 1%."""
    best = 0.0
    while True:
        rss = rss_mb()
        if rss > best * 1.01:
            best = rss
            frame = sys._current_frames().get(main)
            if frame is not None:
                stack = traceback.extract_stack(frame)[-STACK_DEPTH:]
                where = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack]
                write("max", f"{rss:.0f} MB", rss_mb=rss, stack=where)
        time.sleep(every_s)


# ---------------------------------------------------------------- the parent (the sampler)
def trace(workdir: Path, interval: float) -> dict[str, Any]:
    """Run the child on ``workdir`` and sample its RSS; returns the samples and its lines."""
    import psutil

    with tempfile.TemporaryDirectory(prefix="xmc-trace-") as tmp:
        marks_path = Path(tmp) / "marks.jsonl"
        cmd = [sys.executable, __file__, "--child", str(workdir), str(marks_path)]
        samples: list[tuple[float, float]] = []
        with subprocess.Popen(cmd, cwd=REPO) as child:
            proc = psutil.Process(child.pid)
            while child.poll() is None:
                try:
                    samples.append((time.time(), proc.memory_info().rss / 2**20))
                except psutil.Error:
                    break
                time.sleep(interval)
        if child.returncode != 0:
            raise SystemExit(f"the traced run failed (exit code {child.returncode})")
        lines = [json.loads(x) for x in marks_path.read_text(encoding="utf-8").splitlines()]
    return {"samples": samples, "lines": lines}


def summarize(samples: list[tuple[float, float]], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-stage peaks, the overall peak with the stack nearest before it, and the log lines."""
    t0 = samples[0][0]
    stages = [x for x in lines if x["kind"] == "stage"]
    table = []
    for i, st in enumerate(stages[:-1]):
        end = stages[i + 1]["t"]
        inside = [mb for t, mb in samples if st["t"] <= t < end]
        table.append({
            "stage": st["text"], "start_s": round(st["t"] - t0, 1),
            "seconds": round(end - st["t"], 1),
            "peak_mb": round(max(inside), 1) if inside else None,  # None: shorter than a sample
        })  # fmt: skip
    t_peak, peak = max(samples, key=lambda s: s[1])  # the first sample at the maximum
    maxima = [x for x in lines if x["kind"] == "max" and x["t"] <= t_peak + 1.0]
    at_peak = maxima[-1] if maxima else None
    stage_at_peak = next((st["text"] for st in reversed(stages) if st["t"] <= t_peak), "")
    return {
        "peak_mb": round(peak, 1),
        "peak_at_s": round(t_peak - t0, 1),
        "peak_stage": stage_at_peak,
        "stack_at_peak": _stack_at(at_peak, t0),
        "stages": table,
        "stage_seconds": stages[-1].get("stages_s", {}),
        "log": [
            {"at_s": round(x["t"] - t0, 1), "rss_mb": round(x["rss_mb"], 1), "text": x["text"]}
            for x in lines
            if x["kind"] == "log"
        ],
        "rss_curve": _per_second(samples, t0),
    }


def _stack_at(line: dict[str, Any] | None, t0: float) -> dict[str, Any]:
    """The child's last new maximum (in steps of 1%) up to the peak: when, RSS, stack."""
    if line is None:
        return {}
    return {"at_s": round(line["t"] - t0, 1), "rss_mb": round(line["rss_mb"], 1),
            "stack": line["stack"]}  # fmt: skip


def _per_second(samples: list[tuple[float, float]], t0: float) -> list[tuple[int, float]]:
    """The highest sample of each second: (second, MB)."""
    curve: dict[int, float] = {}
    for t, mb in samples:
        s = int(t - t0)
        curve[s] = max(curve.get(s, 0.0), mb)
    return [(s, round(mb, 1)) for s, mb in sorted(curve.items())]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        return _child(Path(args[1]), Path(args[2]))
    from bench_common import git_state, machine_basics, write_json

    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("workdir", type=Path, help="the features (X_train.npz, Y_train.npz, X_test.npz)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    default_out = REPO / f"benchmarks/results/memory-trace-{today}.json"
    p.add_argument("--out", type=Path, default=default_out)
    a = p.parse_args(args)
    for name in ("X_train.npz", "Y_train.npz", "X_test.npz"):
        if not (a.workdir / name).is_file():
            p.error(f"{a.workdir / name} is missing: write it with scaling_prep.py featurize")
    raw = trace(a.workdir.resolve(), a.interval)
    report = {
        "command": "python benchmarks/memory_trace.py " + " ".join(args),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_basics(),
        "git": git_state(),
        "workdir": str(a.workdir),
        "interval_s": a.interval,
        **summarize(raw["samples"], raw["lines"]),
    }
    write_json(a.out, report)
    print(f"peak {report['peak_mb']:,.0f} MB at {report['peak_at_s']} s ({report['peak_stage']})")
    for row in report["stages"]:
        peak = "-" if row["peak_mb"] is None else f"{row['peak_mb']:,.0f} MB"
        print(f"  {row['stage']:<8} {row['seconds']:>8.1f} s  peak {peak:>9}")
    if at := report["stack_at_peak"]:
        where = " <- ".join(reversed(at["stack"][-4:]))
        print(f"  last new maximum ({at['rss_mb']:,.0f} MB at {at['at_s']} s): {where}")
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
