"""How the calibration stage's choices fare on validation carves of the training split.

The choices of ``xmc_core.calibration`` (which maps compete, how an isotonic map interpolates,
how a label's own threshold is placed, how many relevant carve documents it needs) were made on
these figures, never on the test split:

- XR-Linear (``configs/xr-linear.yaml``, calibration off) trains on 80% of the training
  documents (a keyed hash of their doc ids, seed 1); the other 20% are cut in 4 folds of about
  5%, the size of the default carve.
- Maps: each variant is fitted on one fold as the calibrate stage fits it (the choice on half
  the fold, the refit on all of it) and scored on the other three: ECE@1, ECE@5, Brier@5.
- Thresholds: tuned on one fold (``sum`` objective) with the default map, scored on the other
  three: micro-F1 and macro-F1 for the global threshold alone and per label.
- Carve by group (a grouped corpus only: debian-deps, whose test split holds whole source
  packages): 20% of the training split's groups stand in for the test split; XR-Linear and the
  ensemble train on the rest less a carve of the default share, of documents or of whole groups,
  are calibrated on it and scored on the stand-in: P@1 of the carve and of the stand-in, ECE@1
  and ECE@5 of the stand-in (one carve each, no folds).

The maps' and thresholds' figures are means over the 4 folds. Usage, from the repository root::

    python benchmarks/calibration_choices.py [--datasets-root ../shared/datasets]
        [--datasets reuters21578-modapte,bibtex-bow,delicious-bow,debian-deps]
        [--parts maps,thresholds,groups]
        [--out benchmarks/results/calibration-choices-<date>.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import scipy.sparse as sp

from xmc_core.calibration import calibrator as cal
from xmc_core.calibration import thresholds as th
from xmc_core.calibration.maps import IsotonicMap, PlattMap, _pairs
from xmc_core.calibration.metrics import ece_at_k, threshold_scores, top_k_pairs
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.carve import held_out
from xmc_core.model.estimator import XmcClassifier

DATASETS = ("reuters21578-modapte", "bibtex-bow", "delicious-bow", "debian-deps")
PARTS = ("maps", "thresholds", "groups")
FOLDS = 4
GROUP_PRESETS = ("xr-linear", "ensemble")


class EndsIsotonic(IsotonicMap):
    """The isotonic map interpolating between its blocks' ends (scikit-learn's), flat across a
    block: the one :class:`IsotonicMap` replaced."""

    @classmethod
    def fit(cls, scores: Any, outcomes: Any, weights: Any = None) -> EndsIsotonic:
        from scipy.optimize import isotonic_regression

        s, o, w = _pairs(scores, outcomes, weights)
        xs, inv = np.unique(s, return_inverse=True)
        sw, swy = np.bincount(inv, weights=w), np.bincount(inv, weights=w * o)
        fit = isotonic_regression(swy / sw, weights=sw, increasing=True)
        lo, hi = xs[fit.blocks[:-1]], xs[fit.blocks[1:] - 1]
        x, y = np.column_stack([lo, hi]).ravel(), np.repeat(fit.x[fit.blocks[:-1]], 2)
        keep = np.ones(len(x), dtype=bool)
        keep[1::2] = hi > lo
        return cls(x[keep], y[keep])


MAPS: dict[str, tuple[tuple, tuple]] = {
    "chosen (default)": ((IsotonicMap, PlattMap), cal.GROUPINGS),
    "chosen, isotonic by block ends": ((EndsIsotonic, PlattMap), cal.GROUPINGS),
    **{f"{k.kind}/{g}": ((k,), (g,)) for k in (IsotonicMap, PlattMap) for g in cal.GROUPINGS},
    **{f"isotonic by block ends/{g}": ((EndsIsotonic,), (g,)) for g in cal.GROUPINGS},
}


def validation_scores(workdir: Path) -> dict[str, Any]:
    """XR-Linear on 80% of the training split; its top 20 on the other 20%, in folds."""
    ids = Corpus(workdir / "corpus").read_split("train", ["doc_id"]).column("doc_id").to_pylist()
    held = held_out(ids, 0.2, 1)
    X = sp.load_npz(workdir / "X_train.npz").tocsr()
    Y = sp.load_npz(workdir / "Y_train.npz").tocsr()
    clf = XmcClassifier(bench_common.REPO / "configs" / "xr-linear.yaml",
                        calibration__enabled=False).fit(X[~held], Y[~held])  # fmt: skip
    return {
        "S": clf.model_.predict_features(X[held], topk=20).tocsr(), "Y": Y[held],
        "label_docs": np.asarray((Y[~held] > 0).sum(axis=0)).ravel(),
        "fold": np.random.default_rng(7).integers(0, FOLDS, int(held.sum())),
    }  # fmt: skip


def fit_map(S: sp.csr_matrix, Y: sp.csr_matrix, label_docs: np.ndarray, kinds: tuple,
            groupings: tuple) -> cal.Calibrator:  # fmt: skip
    """The calibrate stage's fit restricted to ``kinds`` x ``groupings``."""
    saved = cal.KINDS, cal.GROUPINGS, cal.IsotonicMap
    cal.KINDS, cal.GROUPINGS = kinds, groupings
    if EndsIsotonic in kinds:  # the refit of the chosen isotonic map too
        cal.IsotonicMap = EndsIsotonic
    try:
        return cal.Calibrator.fit(S, Y, 20, label_docs)
    finally:
        cal.KINDS, cal.GROUPINGS, cal.IsotonicMap = saved


def map_figures(d: dict[str, Any]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, (kinds, groupings) in MAPS.items():
        rows = []
        for f in range(FOLDS):
            fit = d["fold"] == f
            c = fit_map(d["S"][fit], d["Y"][fit], d["label_docs"], kinds, groupings)
            P, Y = c.probabilities(d["S"][~fit], d["label_docs"]), d["Y"][~fit]
            pairs = top_k_pairs(P, Y, 5)
            rows.append([ece_at_k(P, Y, 1), ece_at_k(P, Y, 5),
                         float(np.mean((pairs.values - pairs.relevant) ** 2))])  # fmt: skip
        mean = np.mean(rows, axis=0).tolist()
        out[name] = dict(zip(("ECE@1", "ECE@5", "Brier@5"), mean, strict=True))
    return out


def kept_per_label(P: sp.csr_matrix, Y: sp.csr_matrix, fallback: float, m: int) -> np.ndarray:
    """Each label's own threshold at its lowest kept carve probability (no halfway point)."""
    mid = th._per_label(P, Y, fallback, m)
    out = mid.copy()
    for label in np.flatnonzero(mid != fallback):
        p = P.data[P.indices == label]
        out[label] = p[p >= mid[label]].min()
    return out


def threshold_figures(d: dict[str, Any]) -> dict[str, dict[str, float]]:
    rows: dict[str, list[tuple[float, float]]] = {}
    for f in range(FOLDS):
        fit = d["fold"] == f
        c = cal.Calibrator.fit(d["S"][fit], d["Y"][fit], 20, d["label_docs"])
        Pf = sp.csr_matrix(c.probabilities(d["S"][fit], d["label_docs"]))
        Pe, Ye = c.probabilities(d["S"][~fit], d["label_docs"]), d["Y"][~fit]
        g = th.Thresholds.tune(Pf, d["Y"][fit], "sum").value
        variants: dict[str, Any] = {"global": g}
        for m in (3, 5, 10, 20):
            variants[f"per label >= {m}, halfway (default at 10)"] = th._per_label(
                Pf, d["Y"][fit], g, m
            )
            variants[f"per label >= {m}, at the kept probability"] = kept_per_label(
                Pf, d["Y"][fit], g, m
            )
        for name, t in variants.items():
            r = threshold_scores(Pe, Ye, t)
            rows.setdefault(name, []).append((r["micro_f1"], r["macro_f1"]))
    return {n: dict(zip(("micro-F1", "macro-F1"), np.mean(v, axis=0).tolist(), strict=True))
            for n, v in rows.items()}  # fmt: skip


def group_figures(workdir: Path) -> dict[str, dict[str, float]]:
    """A carve of documents against a carve of groups, scored on held-out groups."""
    table = Corpus(workdir / "corpus").read_split("train", ["doc_id", "group"])
    keys = {"documents": table["doc_id"].to_pylist(), "groups": table["group"].to_pylist()}
    X = sp.load_npz(workdir / "X_train.npz").tocsr()
    Y = sp.load_npz(workdir / "Y_train.npz").tocsr()
    test = held_out(keys["groups"], 0.2, 11)
    rest = np.flatnonzero(~test)
    share = XmcConfig().calibration.fraction
    out: dict[str, dict[str, float]] = {}
    for preset in GROUP_PRESETS:
        for by, k in keys.items():
            c = held_out([k[i] for i in rest], share, 0)
            fit, carve = rest[~c], rest[c]
            clf = XmcClassifier(bench_common.REPO / "configs" / f"{preset}.yaml",
                                calibration__enabled=False).fit(X[fit], Y[fit])  # fmt: skip
            label_docs = np.asarray((Y[fit] > 0).sum(axis=0)).ravel()
            Sc = clf.model_.predict_features(X[carve], topk=20).tocsr()
            St = clf.model_.predict_features(X[test], topk=20).tocsr()
            P = cal.Calibrator.fit(Sc, Y[carve], 20, label_docs).probabilities(St, label_docs)
            out[f"{preset}, carve of {by}"] = {
                "P@1 carve": float(top_k_pairs(Sc, Y[carve], 1).relevant.mean()),
                "P@1 held-out groups": float(top_k_pairs(St, Y[test], 1).relevant.mean()),
                "ECE@1": ece_at_k(P, Y[test], 1), "ECE@5": ece_at_k(P, Y[test], 5),
            }  # fmt: skip
    return out


def dataset_figures(workdir: Path, parts: list[str]) -> dict[str, Any]:
    """The figures of ``parts`` on one prepared dataset (``groups``: when it is grouped)."""
    out: dict[str, Any] = {}
    if "maps" in parts or "thresholds" in parts:
        d = validation_scores(workdir)
        out |= {"maps": map_figures(d)} if "maps" in parts else {}
        out |= {"thresholds": threshold_figures(d)} if "thresholds" in parts else {}
    if "groups" in parts and Corpus(workdir / "corpus").grouped:
        out["carve by group"] = group_figures(workdir)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--datasets-root", type=Path, default=bench_common.REPO.parent / "shared" / "datasets"
    )
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--parts", default=",".join(PARTS))
    today = dt.date.today().isoformat()
    out = bench_common.REPO / f"benchmarks/results/calibration-choices-{today}.json"
    p.add_argument("--out", type=Path, default=out)
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "command": shlex.join(
            ["python", "benchmarks/calibration_choices.py", *(argv or sys.argv[1:])]
        ),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": bench_common.machine_basics(), "git": bench_common.git_state(), "datasets": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            workdir = Path(tmp) / name
            workdir.mkdir()
            bench_common.prepare(args.datasets_root / name, workdir, keep_corpus=True)
            result["datasets"][name] = dataset_figures(workdir, args.parts.split(","))
            bench_common.write_json(args.out, result)
            for part, rows in result["datasets"][name].items():
                for v, figs in rows.items():
                    shown = "  ".join(f"{k} {100 * x:.2f}" if "Brier" not in k else f"{k} {x:.5f}"
                                      for k, x in figs.items())  # fmt: skip
                    print(f"{name:21s} {part:14s} {v:44s} {shown}", flush=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
