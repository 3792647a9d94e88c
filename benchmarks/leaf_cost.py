"""The leaf-cost search on validation carves: what it chooses, what each scale would give.

Usage, from the repository root, with the project venv::

    python benchmarks/leaf_cost.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps] [--seeds 0]
        [--out benchmarks/results/leaf-cost-<date>.json]

For each dataset, 20% of its TRAIN split (``bench_common.validation_source``, seed 0) is the
validation split and the rest the fit split; the test split is never read. Per seed (of the
tree and the rankers): the label tree and the levels above the leaves are trained once with the
default ``XmcConfig``; then ``choose_leaf_cost`` runs as training does (timed) and, for
reference, the leaf level is trained at every scale of ``leaf_cost_scales`` and the whole model
scored on the validation split (P@1, P@5, and the leaf level's fit seconds). Writes the results
JSON (command, machine, every figure) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scipy.sparse as sp
from bench_common import REPO, git_state, machine_info, prepare, validation_source, write_json

from xmc_core.config import XmcConfig
from xmc_core.evaluation.metrics import precision_at_k
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.linear.leaf_cost import choose_leaf_cost
from xmc_core.linear.levels import importance_weights, level_problems
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.solver import train_level
from xmc_core.linear.tree import LabelTree

DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"


def run_seed(work: Path, seed: int) -> dict[str, Any]:
    """The search's choice and every scale's validation P@k for one seed."""
    X, Y = (sp.load_npz(work / f"{n}_train.npz").tocsr() for n in ("X", "Y"))
    Xv, Yv = (sp.load_npz(work / f"{n}_test.npz").tocsr() for n in ("X", "Y"))
    cfg = XmcConfig()
    cfg = cfg.model_copy(
        update={
            "tree": cfg.tree.model_copy(update={"seed": seed}),
            "ranker": cfg.ranker.model_copy(update={"seed": seed}),
        }
    )
    rc, post = cfg.ranker, cfg.predict.post_processor
    tree = LabelTree.build(concat_label_features([pifa([pifa_partial(X, Y)])], [1.0]), cfg.tree)
    leaf = tree.depth - 1
    upper: list[sp.csc_matrix] = []
    for t in range(leaf):
        targets, M = level_problems(X, Y, tree.C, t, upper, rc, post)
        upper.append(train_level(X, targets[t], tree.C[t], M, rc))
    targets, M = level_problems(X, Y, tree.C, leaf, upper, rc, post)
    R = importance_weights(Y, tree.C, leaf) if rc.importance_weights else None
    t0 = time.perf_counter()
    choice = choose_leaf_cost(X, targets[leaf], tree.C[leaf], M, rc, R)
    search_s = time.perf_counter() - t0
    scales = {}
    for scale in sorted(rc.leaf_cost_scales):
        scaled = rc.model_copy(update={"Cp": rc.Cp * scale, "Cn": rc.Cn * scale})
        t0 = time.perf_counter()
        W = train_level(X, targets[leaf], tree.C[leaf], M, scaled, R)
        fit_s = time.perf_counter() - t0
        model = XRLinearModel(rc, cfg.predict).set_levels(tree, [*upper, W], X.shape[1])
        p = precision_at_k(Yv, model.predict(Xv), [1, 5])
        scales[str(scale)] = {"p@1": 100 * p[1], "p@5": 100 * p[5], "leaf_fit_s": fit_s}
    return {
        "seed": seed,
        "chosen": choice.scale,
        "search_s": search_s,
        "held_out_docs": choice.n_docs,
        "held_out_p@1_p@3": {str(s): list(v) for s, v in choice.held_out.items()},
        "validation": scales,
    }


def table(results: dict[str, Any]) -> str:
    """Markdown: per dataset and seed, the chosen scale and the validation P@1 per scale."""
    scales = sorted(XmcConfig().ranker.leaf_cost_scales)
    head = "| dataset | seed | chosen | search s | " + " | ".join(f"P@1 x{s:g}" for s in scales)
    lines = [head + " |", "|" + "---|" * (4 + len(scales))]
    for name, runs in results.items():
        for r in runs:
            cells = [f"{r['validation'][str(s)]['p@1']:.2f}" for s in scales]
            lines.append(
                f"| {name} | {r['seed']} | x{r['chosen']:g} | {r['search_s']:.1f} | "
                + " | ".join(cells) + " |"
            )  # fmt: skip
    return "\n".join(lines)


def report_head(today: str) -> dict[str, Any]:
    """The results JSON's head: command, date, machine, git state, the search's settings."""
    return {
        "command": " ".join(["python", *sys.argv]),
        "date": today,
        "machine": machine_info(None),
        "git": git_state(),
        "leaf_cost": XmcConfig().ranker.model_dump(
            include={"leaf_cost_scales", "leaf_cost_sample"}
        ),
        "datasets": {},
    }


def main() -> int:
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--seeds", default="0", help="comma-separated tree/ranker seeds")
    p.add_argument("--out", type=Path, default=REPO / f"benchmarks/results/leaf-cost-{today}.json")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    report = report_head(today)
    for name in args.datasets.split(","):
        with tempfile.TemporaryDirectory(prefix="xmc-leaf-cost-") as tmp:
            work = Path(tmp)
            carve = validation_source(args.datasets_root / name, work / "src", 0.2, 0)
            prepare(work / "src", work)
            runs = [run_seed(work, s) for s in seeds]
        report["datasets"][name] = {"carve": carve, "runs": runs}
        print(table({name: runs}), flush=True)
    write_json(args.out, report)
    print(table({k: v["runs"] for k, v in report["datasets"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
