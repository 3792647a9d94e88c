"""Peak memory of ``xmc predict`` on one huge line, with and without ``predict.max_doc_chars``.

Usage, from the repository root, with the project venv::

    python benchmarks/long_line.py [--mb 100] [--work data/benchmarks/long-line]
        [--out benchmarks/results/long-line-<date>.json]

Writes the embedded synthetic corpus (``xmc synth --scale 0.1``) and trains two models on it
with ``xmc train``: one with the default ``predict.max_doc_chars`` and one with
``--set predict.max_doc_chars=null`` (no cap). Writes a text file of three lines: a short
document, one line of ``--mb`` MB of corpus words, another short document. Runs ``xmc predict``
on it with each model and with a file of just the two short lines, each in its own process,
and reports the peak RSS (``ru_maxrss`` of that process) and wall time of each. The short
documents' predictions must not depend on the cap.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

from xmc_core.storage.atomic import write_json

REPO = Path(__file__).resolve().parents[1]
SHORT = ["crude oil prices rose after the meeting", "the bank cut its interest rate"]
MEASURE = (  # a fresh process per run, so ru_maxrss of its children is this run's peak
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter(); rc = subprocess.run(sys.argv[1:]).returncode\n"
    "print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def xmc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "xmc_core.app.cli", *args], check=True, cwd=REPO)


def huge_line(dataset: Path, mb: int) -> str:
    """``mb`` MB of the corpus' own training words, so every token is in the vocabulary."""
    from xmc_core.corpus import Corpus

    texts = Corpus(dataset).read_split("train", ["text"]).column("text").to_pylist()
    words = " ".join(texts[:200]).split()
    line, size = [], 0
    while size < mb * 1_000_000:
        w = words[len(line) % len(words)]
        line.append(w)
        size += len(w) + 1
    return " ".join(line)


def measure(model: Path, source: Path, out: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "xmc_core.app.cli", "predict", str(model), str(source), str(out)]
    res = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True)
    rc, wall, kb = res.stdout.strip().splitlines()[-1].split()  # after the child's own lines
    if int(rc) != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {rc}: {res.stderr[-2000:]}")
    return {"peak_rss_mb": int(kb) / 1024, "wall_s": float(wall)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=100, help="size of the huge line, MB")
    p.add_argument("--work", type=Path, default=REPO / "data/benchmarks/long-line")
    today = dt.date.today().isoformat()
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/long-line-{today}.json")
    args = p.parse_args()
    work, ds = args.work, args.work / "synthetic"
    if not ds.is_dir():
        xmc("synth", str(ds), "--scale", "0.1")
    models = {"capped": work / "model-capped", "uncapped": work / "model-uncapped"}
    for name, model in models.items():
        if not model.is_dir():
            sets = [] if name == "capped" else ["--set", "predict.max_doc_chars=null"]
            xmc("train", str(ds), str(model), *sets)
    short, huge = work / "short.txt", work / f"huge-{args.mb}mb.txt"
    short.write_text("\n".join(SHORT) + "\n")
    if not huge.exists():
        huge.write_text(f"{SHORT[0]}\n{huge_line(ds, args.mb)}\n{SHORT[1]}\n")
    runs = {"short lines only": measure(models["capped"], short, work / "p-short.jsonl")}
    for name, model in models.items():
        runs[f"{args.mb} MB line, {name}"] = measure(model, huge, work / f"p-{name}.jsonl")
    same = _short_predictions(work / "p-capped.jsonl") == _short_predictions(
        work / "p-uncapped.jsonl"
    )
    for name, r in runs.items():
        print(f"{name}: peak RSS {r['peak_rss_mb']:.0f} MB, {r['wall_s']:.1f} s")
    print(f"short documents predicted the same with and without the cap: {same}")
    write_json(args.out, {
        "command": "python benchmarks/long_line.py " + " ".join(sys.argv[1:]),
        "date": today, "mb": args.mb, "runs": runs, "short_predictions_equal": same,
        "huge_line_bytes": huge.stat().st_size,
    })  # fmt: skip
    print(f"wrote {args.out}")
    return 0 if same else 1


def _short_predictions(path: Path) -> list[str]:
    rows = path.read_text().splitlines()
    return [rows[0], rows[-1]]


if __name__ == "__main__":
    started = time.perf_counter()
    status = main()
    print(f"done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    sys.exit(status)
