"""One method of the growing-corpus benchmark, in its own process: each drop in turn arrives
in the landing folder and the ``retrain`` flow runs (project venv).

Usage (started by ``benchmarks/retrain.py``)::

    python benchmarks/retrain_runner.py DROPS OUTDIR --config FILE [--set K=V ...]

``DROPS`` holds the drops, one folder each (``reuters-1``, ``reuters-2``, ...), in arrival
order (their names' order).
For each, the drop is moved (one rename) into ``OUTDIR/work/landing`` and the retrain flow runs
in this process, with one temporary Prefect server for all steps (``flows.runtime.prefect_api``)
and MLflow tracking and the registry in ``OUTDIR/work`` (so each retrain starts from the
champion the previous step promoted, when warm). A step's ``train_s`` is the wall time of the
whole retrain flow run: intake, featurization, the model, its evaluation, tracking, registration
and the promotion gate. Writes ``OUTDIR/result.json``: per step the wall time, the stages' wall
seconds (Prefect task runs; Cached ones count 0), the test metrics, the labels the model knows
and what the run says it reused.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from flows.retrain import retrain
from flows.runtime import prefect_api
from tasks.timings import stage_timings
from xmc_core.model.xmc_model import XmcModel

METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5", "R@5", "R@10")


def run_step(drop: Path, work: Path, sets: list[str], config: str | None) -> dict[str, Any]:
    """Move ``drop`` into the landing folder, run the retrain flow; one step's record."""
    landing = work / "landing"
    landing.mkdir(parents=True, exist_ok=True)
    drop.rename(landing / drop.name)
    t0 = time.perf_counter()
    state = retrain(config, sets, return_state=True)
    wall = time.perf_counter() - t0
    result = state.result()
    if not result.get("trained"):
        raise RuntimeError(f"step {drop.name} did not train: {state.message}")
    outputs = result["outputs"]
    metrics = json.loads((Path(outputs["evaluation"]) / "metrics.json").read_text())
    model = XmcModel.load(outputs["model"])
    return {
        "step": drop.name,
        "train_s": wall,
        "message": state.message,
        "stages_s": stage_timings(state.state_details.flow_run_id),
        "metrics": {m: metrics[m] for m in METRICS if m in metrics},
        "labels_known": len(model.labels),
        "start": outputs.get("start", "cold"),
        "reused": (model.start or {}).get("reused"),
        "model": outputs["model"],
        "train_split": outputs.get("train", ""),
        "test_split": outputs.get("test", ""),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("drops", type=Path)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--config", default=None)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = (args.outdir / "work").resolve()
    sets = [f"work_dir={work}", *args.sets]
    steps: list[dict[str, Any]] = []
    with prefect_api():
        for drop in sorted(args.drops.iterdir()):
            steps.append(run_step(drop, work, sets, args.config))
            s = steps[-1]
            print(
                f"{drop.name}: {s['train_s']:.1f} s, P@1 {100 * s['metrics']['P@1']:.2f}, "
                f"{s['labels_known']} labels",
                file=sys.stderr,
                flush=True,
            )
    out = {"steps": steps, "config": args.config, "sets": args.sets}
    (args.outdir / "result.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
