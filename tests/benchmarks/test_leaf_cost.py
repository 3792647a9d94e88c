"""benchmarks/leaf_cost.py and leaf_cost_price.py on a tiny problem: every scale scored, the
search's choice among them, the price table from real fits."""

from __future__ import annotations

from pathlib import Path

import leaf_cost
import leaf_cost_price
import numpy as np
import scipy.sparse as sp


def _write(folder: Path, n: int = 400, d: int = 60, k: int = 12) -> None:
    """Train and test splits of a noisy linear multi-label problem as the benchmarks' npz."""
    rng = np.random.default_rng(0)
    for split, rows in (("train", n), ("test", n // 4)):
        X = sp.random(rows, d, density=0.2, random_state=rng, format="csr", dtype=np.float64)
        X = X.multiply(1.0 / np.sqrt(np.maximum(X.multiply(X).sum(axis=1), 1e-12))).tocsr()
        W = np.random.default_rng(1).normal(size=(d, k))
        scores = np.asarray(X @ W) + 0.5 * rng.normal(size=(rows, k))
        Y = (scores >= np.sort(scores, axis=1)[:, [-2]]).astype(np.float32)  # top 2 labels
        sp.save_npz(folder / f"X_{split}.npz", sp.csr_matrix(X, dtype=np.float32))
        sp.save_npz(folder / f"Y_{split}.npz", sp.csr_matrix(Y))


def test_every_scale_is_scored_and_the_choice_is_one_of_them(tmp_path: Path) -> None:
    _write(tmp_path)
    run = leaf_cost.run_seed(tmp_path, seed=0)
    assert set(run["validation"]) == {"0.25", "0.5", "1.0", "2.0", "4.0"}
    assert all(0 <= v["p@1"] <= 100 and v["leaf_fit_s"] > 0 for v in run["validation"].values())
    assert str(run["chosen"]) in run["validation"] and run["held_out_docs"] > 0
    assert "1.0" in run["held_out_p@1_p@3"]
    row = leaf_cost.table({"tiny": [run]}).splitlines()[2]
    assert row.startswith(f"| tiny | 0 | x{run['chosen']:g} |")


def test_the_price_compares_fits_with_the_search_on_and_off(tmp_path: Path) -> None:
    _write(tmp_path)
    r = leaf_cost_price.price(tmp_path, repeats=2)
    assert len(r["fit_s"]["on"]) == len(r["fit_s"]["off"]) == 2
    assert len(r["search_s"]) == 2 and all(s > 0 for s in r["search_s"])
    assert r["chosen"] in (0.25, 0.5, 1.0, 2.0, 4.0) and r["held_out_docs"] > 0
    if r["chosen"] == 1.0:  # the same weights: the same predictions
        assert r["test_p@1"]["on"] == r["test_p@1"]["off"]
    row = leaf_cost_price.table({"tiny": r}).splitlines()[2]
    assert row.startswith(f"| tiny | x{r['chosen']:g} |")
