"""Where XR-Linear's gap to PECOS comes from: the tree or the rankers, on validation carves.

Usage, from the repository root, with the project venv (and ``make peers-venv`` done once)::

    python benchmarks/xr_linear_causes.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps] [--seeds 0,1,2]
        [--variant NAME:KEY=VALUE[,KEY=VALUE...] ...] [--tree NAME:KEY=VALUE[,...] ...]
        [--peers-python .venv-peers/bin/python]
        [--out benchmarks/results/xr-linear-causes-<date>.json]

For each dataset, 20% of its TRAIN split (``bench_common.validation_source``, seed 0) is the
validation split and the rest the fit split, featurized once (the shared TF-IDF); the test
split is never read. Per seed, the label trees: ``ours`` (our PIFA and ``LabelTree.build``,
``tree.seed``), ``pecos`` (PECOS's PIFA and ``Indexer.gen`` with ``seed``), ``ours-y1`` (ours on
the PIFA xmc used before 2026-12-02, :func:`y1_pifa`) and one per ``--tree`` (``TreeConfig``
overrides, e.g. ``restarts3:tree.kmeans_restarts=3``). PECOS's ``XLinearModel`` (defaults) trains
on ``ours`` and ``pecos`` (``tree_swap_runner.py``, in the peers venv); our XR-Linear on every
tree, with the default ``XmcConfig`` (``ranker.seed`` = the seed) and with each ``--variant``
(``XmcConfig`` overrides, e.g. ``iter100:ranker.max_iter=100``). Every model is scored on the
validation split (P@1, P@5, PSP@5, with the fit split's label counts). Writes the results JSON
(command, machine, every figure) and prints a table of the medians over the seeds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from bench_common import REPO, git_state, machine_info, prepare, validation_source, write_json

from xmc_core.config import XmcConfig
from xmc_core.evaluation.metrics import evaluate
from xmc_core.features.pifa import concat_label_features, normalize_rows_f32, pifa, pifa_partial
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.model.contract import label_counts

DATASETS = "reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps"
RUNNER = Path(__file__).resolve().with_name("tree_swap_runner.py")
SHOWN = ("P@1", "P@5", "PSP@5")
TOPK = 20


def scores(pred: sp.csr_matrix, Y_val: sp.csr_matrix, Y_fit: sp.csr_matrix) -> dict[str, float]:
    """P@1, P@5 and PSP@5 in % of ``pred`` on the validation labels."""
    m = evaluate(Y_val, pred, XmcConfig().eval, label_counts(Y_fit), Y_fit.shape[0])
    return {k: 100 * m[k] for k in SHOWN}


def load_tree(folder: Path) -> LabelTree:
    """A cluster chain written as ``C{t}.npz`` (ours or PECOS's) as our :class:`LabelTree`."""
    n = len(list(folder.glob("C*.npz")))
    return LabelTree([sp.load_npz(folder / f"C{t}.npz").tocsr() for t in range(n)])


def y1_pifa(X: sp.csr_matrix, Y: sp.csr_matrix) -> sp.csr_matrix:
    """PIFA as xmc computed it before 2026-12-02: ``rownorm(Yᵀ · rownorm(X))``, every document
    weighing 1 in each of its labels' centroids (PECOS's and ours now: 1/sqrt(label count))."""
    return normalize_rows_f32(Y.T @ normalize_rows_f32(X))


def ours(X: sp.csr_matrix, Y: sp.csr_matrix, tree: LabelTree, sets: list[str], seed: int) -> Any:
    """Our XR-Linear trained on ``tree`` with the default config plus ``sets``; (model, s)."""
    cfg = XmcConfig.load(None, [*sets, f"ranker.seed={seed}"])
    t0 = time.perf_counter()
    model = XRLinearModel(cfg.ranker, cfg.predict).fit(X, Y, tree)
    return model, time.perf_counter() - t0


def run_seed(
    work: Path,
    seed: int,
    variants: dict[str, list[str]],
    tree_variants: dict[str, list[str]],
    peers: Path,
) -> dict[str, Any]:
    """Every (tree, trainer) pair of one seed, scored on the validation split."""
    X, Y, Xv, Yv = (sp.load_npz(work / f"{n}.npz").tocsr()
                    for n in ("X_train", "Y_train", "X_test", "Y_test"))  # fmt: skip
    out = work / f"seed-{seed}"
    t0 = time.perf_counter()
    Z = concat_label_features([pifa([pifa_partial(X, Y)])], [1.0])
    our_tree = LabelTree.build(Z, XmcConfig.load(None, [f"tree.seed={seed}"]).tree)
    result: dict[str, Any] = {"seed": seed, "our_tree_s": time.perf_counter() - t0}
    our_tree.save(out / "tree-ours")
    subprocess.run([str(peers), str(RUNNER), str(work), str(seed), str(out)], check=True)
    result["pecos_s"] = json.loads((out / "pecos.json").read_text())
    trees = {"ours": our_tree, "pecos": load_tree(out / "tree-pecos")}
    for name, sets in {"ours-y1": [], **tree_variants}.items():
        cfg = XmcConfig.load(None, [*sets, f"tree.seed={seed}"]).tree
        trees[name] = LabelTree.build(y1_pifa(X, Y) if name == "ours-y1" else Z, cfg)
    result["level_sizes"] = {name: t.level_sizes() for name, t in trees.items()}
    runs: dict[str, Any] = {}
    for tree_name, tree in trees.items():
        if tree_name in ("ours", "pecos"):
            pred = sp.load_npz(out / f"pred-pecos-on-{tree_name}.npz").tocsr()
            runs[f"pecos/{tree_name}"] = scores(pred, Yv, Y)
        for variant, sets in variants.items():
            model, fit_s = ours(X, Y, tree, sets, seed)
            pred = model.predict(Xv, topk=TOPK)
            runs[f"{variant}/{tree_name}"] = scores(pred, Yv, Y) | {"fit_s": fit_s}
            print(f"  seed {seed} {variant} on {tree_name}'s tree: "
                  f"P@1 {runs[f'{variant}/{tree_name}']['P@1']:.2f}", flush=True)  # fmt: skip
    result["runs"] = runs
    return result


def medians(seeds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per (trainer/tree) run, the median of each shown metric over the seeds."""
    names = seeds[0]["runs"].keys()
    return {n: {k: statistics.median(s["runs"][n][k] for s in seeds) for k in SHOWN}
            for n in names}  # fmt: skip


def table(results: dict[str, Any]) -> str:
    """Markdown: per dataset and run, the medians (and the spread of P@1 over the seeds)."""
    lines = [
        "| dataset | trainer / tree | P@1 | P@5 | PSP@5 | P@1 per seed |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        for run, m in r["medians"].items():
            per_seed = ", ".join(f"{s['runs'][run]['P@1']:.2f}" for s in r["seeds"])
            cells = " | ".join(f"{m[k]:.2f}" for k in SHOWN)
            lines.append(f"| {name} | {run} | {cells} | {per_seed} |")
    return "\n".join(lines)


def parse_variants(items: list[str]) -> dict[str, list[str]]:
    """``NAME:KEY=VALUE,KEY=VALUE`` items; ``default`` (no overrides) always first."""
    variants: dict[str, list[str]] = {"default": []}
    for item in items:
        name, sep, sets = item.partition(":")
        if not sep or not name or name in variants:
            raise SystemExit(f"--variant {item!r}: write NAME:KEY=VALUE[,KEY=VALUE], names unique")
        variants[name] = sets.split(",") if sets else []
    return variants


def main() -> int:
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated tree/ranker seeds")
    p.add_argument("--variant", action="append", default=[], help="NAME:KEY=VALUE[,KEY=VALUE]")
    p.add_argument("--tree", action="append", default=[], help="NAME:KEY=VALUE[,KEY=VALUE]")
    p.add_argument("--peers-python", type=Path, default=REPO / ".venv-peers" / "bin" / "python")
    p.add_argument(
        "--out", type=Path, default=REPO / f"benchmarks/results/xr-linear-causes-{today}.json"
    )
    args = p.parse_args()
    variants = parse_variants(args.variant)
    trees = {k: v for k, v in parse_variants(args.tree).items() if k != "default"}
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]), "date": today,
        "machine": machine_info(args.peers_python), "git": git_state(),
        "variants": variants, "trees": trees, "datasets": {},
    }  # fmt: skip
    for name in args.datasets.split(","):
        with tempfile.TemporaryDirectory(prefix="xmc-causes-") as tmp:
            work = Path(tmp)
            split = validation_source(args.datasets_root / name, work / "source", 0.2, seed=0)
            stats = prepare(work / "source", work) | {"validation": split}
            seeds = [run_seed(work, int(s), variants, trees, args.peers_python)
                     for s in args.seeds.split(",")]  # fmt: skip
        report["datasets"][name] = {"stats": stats, "seeds": seeds, "medians": medians(seeds)}
        write_json(args.out, report)  # each dataset as it finishes
        print(table({name: report["datasets"][name]}), flush=True)
    print(table(report["datasets"]))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
