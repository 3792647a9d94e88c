"""What the leaf-cost search costs and buys on each dataset's full training split.

Usage, from the repository root, with the project venv::

    python benchmarks/leaf_cost_price.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps] [--repeats 3]
        [--out benchmarks/results/leaf-cost-price-<date>.json]

Each dataset is featurized once (``bench_common.prepare``); PIFA and the label tree are built
once (default ``XmcConfig``); then, ``--repeats`` times and alternating, XR-Linear is fitted in
this process with the default ranker (the search on) and with ``leaf_cost_scales = [1.0]``
(off), after one untimed warm-up fit of each. Reports per dataset the scale chosen, the
search's seconds, the fit seconds (medians) of both, and the test P@1 of both (reported, never
used to choose anything). Writes the results JSON and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scipy.sparse as sp
from bench_common import REPO, prepare, write_json
from leaf_cost import DATASETS, report_head

import xmc_core.linear.model as model_lib
from xmc_core.config import XmcConfig
from xmc_core.evaluation.metrics import precision_at_k
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.linear.leaf_cost import choose_leaf_cost
from xmc_core.linear.tree import LabelTree


def price(work: Path, repeats: int) -> dict[str, Any]:
    """Fit seconds with and without the search, the choice, and both test P@1."""
    X, Y, Xt, Yt = (sp.load_npz(work / f"{n}.npz").tocsr() for n in
                    ("X_train", "Y_train", "X_test", "Y_test"))  # fmt: skip
    cfg = XmcConfig()
    off = cfg.ranker.model_copy(update={"leaf_cost_scales": [1.0]})
    tree = LabelTree.build(concat_label_features([pifa([pifa_partial(X, Y)])], [1.0]), cfg.tree)
    choices = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        choices.append(choose_leaf_cost(*args, **kwargs))
        return choices[-1]

    times: dict[str, list[float]] = {"on": [], "off": []}
    p_at_1 = {}
    model_lib.choose_leaf_cost = recorded  # the fit's own call, recorded
    try:
        for rep in range(repeats + 1):  # the first round is an untimed warm-up
            for name, ranker in (("on", cfg.ranker), ("off", off)):
                t0 = time.perf_counter()
                model = model_lib.XRLinearModel(ranker, cfg.predict).fit(X, Y, tree)
                if rep:
                    times[name].append(time.perf_counter() - t0)
                p_at_1[name] = 100 * precision_at_k(Yt, model.predict(Xt), [1])[1]
    finally:
        model_lib.choose_leaf_cost = choose_leaf_cost
    searched = [c for c in choices if c.held_out]  # the fits with the search on
    last = searched[-1] if searched else choices[-1]
    return {
        "chosen": last.scale,
        "search_s": [c.seconds for c in searched[1:]],  # after the warm-up
        "held_out_docs": last.n_docs,
        "held_out_p@1_p@3": {str(s): list(v) for s, v in last.held_out.items()},
        "fit_s": times,
        "fit_s_median": {k: statistics.median(v) for k, v in times.items()},
        "test_p@1": p_at_1,
    }


def table(results: dict[str, Any]) -> str:
    """Markdown: one row per dataset."""
    lines = [
        "| dataset | chosen | search s | fit s on / off | ratio | test P@1 on / off |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        on, off = r["fit_s_median"]["on"], r["fit_s_median"]["off"]
        search = statistics.median(r["search_s"]) if r["search_s"] else 0.0
        lines.append(
            f"| {name} | x{r['chosen']:g} | {search:.2f} | {on:.2f} / {off:.2f} | "
            f"{on / off:.2f} | {r['test_p@1']['on']:.2f} / {r['test_p@1']['off']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--datasets-root", type=Path, default=REPO.parent / "shared" / "datasets")
    p.add_argument("--datasets", default=DATASETS, help="comma-separated folder names")
    p.add_argument("--repeats", type=int, default=3)
    out = REPO / f"benchmarks/results/leaf-cost-price-{today}.json"
    p.add_argument("--out", type=Path, default=out)
    args = p.parse_args()
    report = report_head(today)
    for name in args.datasets.split(","):
        with tempfile.TemporaryDirectory(prefix="xmc-leaf-cost-price-") as tmp:
            prepare(args.datasets_root / name, Path(tmp))
            report["datasets"][name] = price(Path(tmp), args.repeats)
        print(table({name: report["datasets"][name]}), flush=True)
    write_json(args.out, report)
    print(table(report["datasets"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
