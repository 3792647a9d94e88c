"""Growing corpus: a training split arriving in slices through the landing folder and the
``retrain`` flow, each retrain cold (today's) or warm (from the champion), beside PECOS.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/retrain.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,debian-deps] [--methods ours-cold,ours-warm,pecos-cold]
        [--slices 4] [--seed 0] [--model xr_linear] [--config PRESET]
        [--peers-python .venv-peers/bin/python] [--out benchmarks/results/retrain-<date>.json]
    python benchmarks/retrain.py --report FILE   # print the tables of a results file, plot it

Per dataset the training split is cut by ``--seed`` into ``--slices`` drops
(``benchmarks/retrain_drops.py``). ``ours-cold`` and ``ours-warm`` each run
``benchmarks/retrain_runner.py`` in a fresh process and work folder: the drops arrive one after
the other and the retrain flow runs after each, with MLflow tracking, the registry and the
promotion gate (``ours-cold``: ``retrain.warm_start=false``; ``ours-warm``: the default, warm
from the champion). A step's train s is the wall time of the whole retrain flow run; model s is
the part of it spent in the model's own stages (featurization, tree, rankers, assembly), the
rest being intake, evaluation, diagnostics, tracking, registration and the gate. Metrics are the
flow's own test-split evaluation. ``pecos-cold`` trains PECOS XR-Linear (its defaults) after
each arrival on the features of ``ours-cold``'s retrain of that step (``peer_runner.py``); its
train s is its tree and rankers only (our featurization is not timed for it), scored with our
metrics module. The plot (``--plot``, default ``docs/assets/plots/retrain.png``): train s and
P@1 after each arrival.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from bench_common import REPO, git_state, machine_info, run_once, write_json
from retrain_drops import write_drops

from xmc_core.features.split_features import SplitFeatures

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "retrain_runner.py"
METHODS = ("ours-cold", "ours-warm", "pecos-cold")
LIFECYCLE = ("take-in-drops", "plan-start", "evaluate", "diagnose", "log-training-run",
             "register", "promote", "publish-report", "mark-trained")  # fmt: skip
"""Stage name prefixes that are not the model's training (model s leaves them out)."""
TIME_RATIOS = {"xr_linear": 0.6, "xr_transformer": 0.35}
"""The issue's targets: ours-warm train s <= this x ours-cold's, at every step, by model."""
P1_SLACK = 0.2
"""... at P@1 >= ours-cold's - this (percentage points)."""


def run_ours(
    method: str, drops: Path, out: Path, model: str, timeout: float, config: Path | None = None
) -> dict[str, Any]:
    """One ``retrain_runner.py`` process over every drop (a fresh copy of them); ``config``:
    a preset (e.g. ``configs/xr-transformer-cpu.yaml``)."""
    mine = out / "drops"
    shutil.copytree(drops, mine)
    sets = [f"model.kind={model}"] + (["retrain.warm_start=false"] if method == "ours-cold" else [])
    cmd = [sys.executable, str(RUNNER), str(mine), str(out)]
    if config is not None:
        cmd += ["--config", str(config.resolve())]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (out / "runner.log").open("w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                              env=env, check=False)  # fmt: skip
    if proc.returncode != 0:
        tail = (out / "runner.log").read_text(errors="replace")[-3000:]
        return {"status": f"failed (rc {proc.returncode})", "log_tail": tail}
    result = json.loads((out / "result.json").read_text())
    for step in result["steps"]:
        step["model_s"] = sum(
            s for name, s in step["stages_s"].items() if not name.startswith(LIFECYCLE)
        )
    return {"status": "ok", "command": shlex.join(cmd), **result}


def run_pecos(cold: dict[str, Any], work: Path, python: Path, timeout: float) -> dict[str, Any]:
    """PECOS after each arrival, on the features of ours-cold's retrain of that step."""
    steps = []
    for step in cold["steps"]:
        folder = work / f"pecos-{step['step']}"
        folder.mkdir()
        train, test = (
            SplitFeatures.load(step["train_split"]),
            SplitFeatures.load(step["test_split"]),
        )
        for name, m in {"X_train": train.X, "Y_train": train.Y, "X_test": test.X,
                        "Y_test": test.Y}.items():  # fmt: skip
            sp.save_npz(folder / f"{name}.npz", sp.csr_matrix(m, dtype=np.float32), False)
        run = run_once("pecos", str(python), folder, timeout)
        steps.append({
            "step": step["step"], "status": run["status"], "train_s": run.get("train_s"),
            "metrics": run.get("metrics", {}), "labels_known": train.Y.shape[1],
            "peak_rss_mb": run.get("peak_rss_mb"),
        })  # fmt: skip
        shutil.rmtree(folder)
    return {"status": "ok", "steps": steps}


def bench_dataset(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every method over the drops of one dataset."""
    result: dict[str, Any] = {"source": str(src), "methods": {}}
    with tempfile.TemporaryDirectory(prefix="xmc-retrain-") as tmp:
        root = Path(tmp)
        drops = root / "drops"
        drops.mkdir()
        write_drops(src, drops, args.slices, args.seed, prefix=src.name.split("-")[0])
        for method in [m for m in args.methods if m.startswith("ours")]:
            out = root / method
            out.mkdir()
            result["methods"][method] = run_ours(
                method, drops, out, args.model, args.timeout, args.config
            )
            print(f"  {src.name} {method}: {brief(result['methods'][method])}", flush=True)
        cold = result["methods"].get("ours-cold", {})
        if "pecos-cold" in args.methods and cold.get("status") == "ok":
            pecos = run_pecos(cold, root, args.peers_python, args.timeout)
            result["methods"]["pecos-cold"] = pecos
            print(f"  {src.name} pecos-cold: {brief(pecos)}", flush=True)
    result["targets"] = targets(result["methods"], args.model)
    return result


def brief(run: dict[str, Any]) -> str:
    """One progress line: train s and P@1 per step."""
    if run.get("status") != "ok":
        return str(run.get("status"))
    return ", ".join(
        f"{s['step']} {s['train_s']:.1f} s P@1 {100 * s['metrics'].get('P@1', 0):.2f}"
        for s in run["steps"]
    )


def targets(methods: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """Per step after the first: warm / cold train s (whole retrain, and the model's stages)
    and the P@1 difference, each against the issue's target for ``model``."""
    limit = TIME_RATIOS[model]
    cold, warm = methods.get("ours-cold", {}), methods.get("ours-warm", {})
    if cold.get("status") != "ok" or warm.get("status") != "ok":
        return []
    rows = []
    for c, w in list(zip(cold["steps"], warm["steps"], strict=True))[1:]:
        ratio, model_ratio = w["train_s"] / c["train_s"], w["model_s"] / c["model_s"]
        gap = 100 * (w["metrics"]["P@1"] - c["metrics"]["P@1"])
        rows.append({
            "step": c["step"], "train_s_ratio": ratio, "model_s_ratio": model_ratio,
            "p1_gap_pt": gap, "time_target": limit, "time_met": ratio <= limit,
            "model_time_met": model_ratio <= limit, "p1_met": gap >= -P1_SLACK,
        })  # fmt: skip
    return rows


def report_lines(report: dict[str, Any]) -> list[str]:
    """Markdown tables of a results file: one per dataset, a row per method and step."""
    lines = []
    head = ("| method | step | labels | new | train s | model s | P@1 | P@5 | PSP@5 | reused |\n"
            "|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for name, ds in report["datasets"].items():
        lines += [f"#### {name}", "", head]
        for method, run in ds["methods"].items():
            if run.get("status") != "ok":
                lines.append(f"| {method} | {run.get('status')} |" + " |" * 8)
                continue
            known = 0
            for s in run["steps"]:
                lines.append(_row(method, s, known))
                known = s["labels_known"]
        for t in ds["targets"]:
            lines.append(
                f"\n{t['step']}: warm/cold train s {t['train_s_ratio']:.2f}, model s "
                f"{t['model_s_ratio']:.2f} (target <= {t.get('time_target', 0.6)}), "
                f"P@1 {t['p1_gap_pt']:+.2f} pt (target >= -{P1_SLACK})"
            )
        lines.append("")
    return lines


def _row(method: str, s: dict[str, Any], known_before: int) -> str:
    m = s["metrics"]
    model_s = f"{s['model_s']:.1f}" if s.get("model_s") is not None else "-"
    reused = s.get("reused") or {}
    said = (f"{reused.get('tree_leaves_kept')}/{reused.get('tree_leaves')} leaves, "
            f"{reused.get('vocabulary_columns')} columns") if reused else "-"  # fmt: skip
    return (
        f"| {method} | {s['step']} | {s['labels_known']} | {s['labels_known'] - known_before} | "
        f"{s['train_s']:.1f} | {model_s} | {100 * m.get('P@1', 0):.2f} | "
        f"{100 * m.get('P@5', 0):.2f} | {100 * m.get('PSP@5', 0):.2f} | {said} |"
    )


def plot(report: dict[str, Any], out: Path) -> None:
    """Per dataset, train seconds and test P@1 after each arrival, a line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["datasets"])
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.2 * len(names)), squeeze=False)
    for (left, right), name in zip(axes, names, strict=True):
        for method, run in report["datasets"][name]["methods"].items():
            if run.get("status") != "ok":
                continue
            steps = [s for s in run["steps"] if s.get("train_s") is not None]
            x = list(range(1, len(steps) + 1))
            left.plot(x, [s["train_s"] for s in steps], marker="o", label=method)
            right.plot(x, [100 * s["metrics"]["P@1"] for s in steps], marker="o", label=method)
        left.set_title(f"{name}: train s (ours: the whole retrain)", fontsize=9)
        right.set_title(f"{name}: test P@1 (%)", fontsize=9)
        for ax in (left, right):
            ax.set_xlabel("arrival")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    ap.add_argument("--datasets", default="reuters21578-modapte,debian-deps")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="xr_linear")
    ap.add_argument("--config", type=Path, default=None, help="a preset for ours-cold/-warm")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers" / "bin" / "python")
    today = dt.date.today().isoformat()
    ap.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/retrain-{today}.json")
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--plot", type=Path, default=REPO / "docs/assets/plots/retrain.png")
    args = ap.parse_args(argv)
    if args.report is not None:
        report = json.loads(args.report.read_text())
        print("\n".join(report_lines(report)))
        plot(report, args.plot)
        return
    args.methods = args.methods.split(",")
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/retrain.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(args.peers_python if "pecos-cold" in args.methods else None),
        "git": git_state(), "slices": args.slices, "seed": args.seed, "model": args.model,
        "config": None if args.config is None else str(args.config),
        "datasets": {},
    }  # fmt: skip
    for name in args.datasets.split(","):
        report["datasets"][name] = bench_dataset(args.datasets_root / name, args)
        write_json(args.out, report)
    print("\n".join(report_lines(report)))
    plot(report, args.plot)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
