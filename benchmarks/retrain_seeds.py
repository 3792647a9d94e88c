"""Growing corpus, P@1 of warm against cold retrains over several seeds, in this process.

``benchmarks/retrain.py`` times the whole retrain flow for one seed; a P@1 gap there mixes the
warm start's effect with the seed's (the tree's k-means and the rankers' sample order, and the
leaf cost scale the search picks from them). This benchmark trains the same models without the
flow, so it can afford several seeds: the training split is cut into the same drops
(``benchmarks/retrain_drops.py``, ``--slice-seed``), they are merged one after the other as the
retrain flow's intake merges them (``xmc_core.intake.drops.take_in``), and for each model seed
(``tree.seed`` and ``ranker.seed``) a cold model is trained on every step's corpus and a warm
chain starts from the first step's cold model, each warm model the next one's champion (the
promotion gate is left out). Reported per step: the test split's P@1 and P@5 of each model, and
warm minus cold per seed with their mean.

Usage, from the repository root, with the project venv::

    python benchmarks/retrain_seeds.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,debian-deps] [--seeds 0,1,2] [--slices 4]
        [--slice-seed 0] [--out benchmarks/results/retrain-seeds-<date>.json]
    python benchmarks/retrain_seeds.py --report FILE   # print the tables of a results file
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import REPO, git_state, machine_info, write_json
from retrain_drops import write_drops

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.families.train import train_in_process
from xmc_core.families.warm import WarmBase
from xmc_core.intake import drops as intake


def step_corpora(src: Path, work: Path, n_slices: int, seed: int) -> list[Path]:
    """The training corpus after each drop's arrival, merged as the retrain flow merges."""
    drops = write_drops(src, work / "drops", n_slices, seed, prefix=src.name[:20])
    folders = intake.IntakeFolders(work / "landing", work / "quarantine", work / "archive",
                                   work / "store")  # fmt: skip
    corpora = []
    for drop in drops:
        folders.landing.mkdir(exist_ok=True)
        drop.rename(folders.landing / drop.name)
        result = intake.take_in(folders, "merge", Policies(), XmcConfig().data.rows_per_group)
        corpora.append(Path(str(result.corpus)))
    return corpora


def train(corpus: Path, work: Path, seed: int, warm_from: Path | None) -> dict[str, Any]:
    """One XR-Linear model (defaults, seeds ``seed``) on ``corpus``, warm from ``warm_from``
    (a model folder) or cold; its test metrics, seconds, and the folder it was saved to."""
    cfg = XmcConfig.load(None, [f"work_dir={work / 'work'}", "model.kind=xr_linear",
                                f"tree.seed={seed}", f"ranker.seed={seed}"])  # fmt: skip
    warm = None if warm_from is None else WarmBase(str(warm_from), "the previous step's model")
    t0 = time.perf_counter()
    out = train_in_process(Corpus(corpus), cfg, warm)
    seconds = time.perf_counter() - t0
    out["model"].save(work / "model")
    metrics = out["evaluation"].values
    scale = out["model"].ranker.leaf_cost_scale_
    return {"P@1": metrics["P@1"], "P@5": metrics["P@5"], "seconds": seconds,
            "leaf_cost_scale": scale, "model": work / "model"}  # fmt: skip


def bench_dataset(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Cold models and warm chains of every seed on one dataset's growing corpus."""
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="xmc-retrain-seeds-") as tmp:
        corpora = step_corpora(src, Path(tmp), args.slices, args.slice_seed)
        for seed in args.seeds:
            cold = [train(c, Path(tmp, f"cold-{seed}-{i}"), seed, None)
                    for i, c in enumerate(corpora, start=1)]  # fmt: skip
            warm, base = [], cold[0]["model"]
            for i, c in enumerate(corpora[1:], start=2):
                warm.append(train(c, Path(tmp, f"warm-{seed}-{i}"), seed, base))
                base = warm[-1]["model"]
            runs[str(seed)] = {"cold": [_brief(r) for r in cold], "warm": [_brief(r) for r in warm]}
            print(f"{src.name} seed {seed}: done", flush=True)
    return {"source": str(src), "runs": runs}


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "model"}


def report_lines(report: dict[str, Any]) -> list[str]:
    """Per dataset a markdown table: step, cold and warm P@1 per seed, warm - cold per seed
    and their mean (percentage points)."""
    lines = []
    for name, ds in report["datasets"].items():
        seeds = sorted(ds["runs"], key=int)
        lines += [
            f"{name} (seeds {', '.join(seeds)}; P@1 %)", "",
            "| step | cold P@1 | warm P@1 | warm - cold | mean |", "|---|---|---|---|---:|",
        ]  # fmt: skip
        for k in range(len(ds["runs"][seeds[0]]["warm"])):
            cold = [100 * ds["runs"][s]["cold"][k + 1]["P@1"] for s in seeds]
            warm = [100 * ds["runs"][s]["warm"][k]["P@1"] for s in seeds]
            gaps = [w - c for w, c in zip(warm, cold, strict=True)]
            lines.append(
                f"| {k + 2} | {' / '.join(f'{v:.2f}' for v in cold)} | "
                f"{' / '.join(f'{v:.2f}' for v in warm)} | "
                f"{' / '.join(f'{v:+.2f}' for v in gaps)} | {statistics.mean(gaps):+.2f} |"
            )
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    ap.add_argument("--datasets", default="reuters21578-modapte,debian-deps")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--slice-seed", type=int, default=0)
    today = dt.date.today().isoformat()
    out = REPO / f"benchmarks/results/retrain-seeds-{today}.json"
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--report", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.report is not None:
        print("\n".join(report_lines(json.loads(args.report.read_text()))))
        return
    args.seeds = [int(s) for s in args.seeds.split(",")]
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/retrain_seeds.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(None), "git": git_state(), "slices": args.slices,
        "slice_seed": args.slice_seed, "seeds": args.seeds, "model": "xr_linear", "datasets": {},
    }  # fmt: skip
    for name in args.datasets.split(","):
        report["datasets"][name] = bench_dataset(args.datasets_root / name, args)
        write_json(args.out, report)
    print("\n".join(report_lines(report)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
