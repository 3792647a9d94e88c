"""One timed run of one XMC method, in its own process: train, predict, save the model.

Usage (started by ``benchmarks/peers.py``, with the interpreter that has the method installed)::

    python benchmarks/peer_runner.py METHOD WORKDIR OUTDIR

``METHOD`` is ``ours`` or ``ours-cold`` (the project venv; ``ours-cold`` runs with an empty
numba cache and no warm-up), ``pecos``, ``napkinxc`` or ``omikuji`` (the peers
venv, ``benchmarks/requirements-peers.txt``). ``WORKDIR`` holds the shared features:
``X_train.npz``, ``Y_train.npz``, ``X_test.npz`` (scipy csr, float32). Writes to ``OUTDIR``:
``model/`` (the saved model), ``pred.npz`` (csr (n_test, n_labels) of the top-``TOPK`` scores
per document) and ``result.json``: wall seconds of training and of prediction, stages, RSS after
loading the data, and ``predict_again_s``, a second identical prediction call, for reference
(ours and PECOS also ``train_cpu_s``, the CPU seconds of training, all threads).
Ours and PECOS release the label features (PIFA) once the tree is built: neither trains on
them, and our pipeline's stages never hold them during the fit (before 2026-12-03 both held
them to the end, 1-2 GB at 1M labels). Every method runs with its library's defaults, as a new
user would call it, except the random seed: ``XMC_BENCH_SEED`` (default 0) seeds ours
(``tree.seed`` and ``ranker.seed``), PECOS's tree and napkinXC (Omikuji takes no seed; it is
not deterministic). The parent computes every metric with our metrics module. Only numpy, scipy
and the method's own library are imported, so this file runs in both environments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

TOPK = 20
WARMUP_DOCS = 200
OMIKUJI_TREES = 3
"""Omikuji's forest size, written out (it is also ``default_hyper_param()``'s): the issue's
ensemble target compares 3 XR-Linear members with 3 Omikuji trees."""


def bench_seed() -> int:
    """The run's seed, from ``XMC_BENCH_SEED`` (the parent sets it per repeat)."""
    return int(os.environ.get("XMC_BENCH_SEED", "0"))


def ours_config() -> Any:
    """The default ``XmcConfig`` with the run's seed for the tree and the rankers."""
    from xmc_core.config import XmcConfig

    seed = bench_seed()
    return XmcConfig.load(None, [f"tree.seed={seed}", f"ranker.seed={seed}"])


# A method: (X_train, Y_train, X_test, model_dir) -> (predictions csr, timings and notes)
Method = Callable[[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, Path], tuple[sp.csr_matrix, dict]]


def rss_mb() -> float:
    """Resident set size of this process, in MiB (from /proc, no psutil needed)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def label_lists(Y: sp.csr_matrix) -> list[list[int]]:
    """Label ids of every row of ``Y``: csr (n_docs, n_labels)."""
    return [Y.indices[Y.indptr[i] : Y.indptr[i + 1]].tolist() for i in range(Y.shape[0])]


def pairs_to_csr(rows: Sequence[Sequence[tuple[int, float]]], n_labels: int) -> sp.csr_matrix:
    """Per-document lists of ``(label, score)`` -> csr (n_docs, n_labels) float32."""
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    flat = [pair for r in rows for pair in r]
    indices = np.array([p[0] for p in flat], dtype=np.int64)
    data = np.array([p[1] for p in flat], dtype=np.float32)
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), n_labels))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------- ours (project venv)
def _ours_train(
    X: sp.csr_matrix, Y: sp.csr_matrix, cfg: Any, mark: Callable[[str], None] = lambda _: None
) -> tuple[Any, dict[str, float]]:
    """PIFA (as our pipeline computes it), label tree, XR-Linear fit; seconds per stage.
    ``mark(stage)`` is called as each stage begins (``benchmarks/memory_trace.py`` records it)."""
    from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
    from xmc_core.linear.model import XRLinearModel
    from xmc_core.linear.tree import LabelTree

    mark("pifa")
    Z, pifa_s = timed(lambda: concat_label_features([pifa([pifa_partial(X, Y)])], [1.0]))
    mark("tree")
    t0 = time.perf_counter()  # not ``timed``: a lambda would keep Z alive
    tree, tree_s = LabelTree.build(Z, cfg.tree), time.perf_counter() - t0
    del Z  # as our pipeline's stages do (the fit's never holds them); PECOS's likewise
    mark("fit")
    model, fit_s = timed(lambda: XRLinearModel(cfg.ranker, cfg.predict).fit(X, Y, tree))
    return model, {"pifa_s": pifa_s, "tree_s": tree_s, "fit_s": fit_s}


def _ours_warmup(X: sp.csr_matrix, Y: sp.csr_matrix, cfg: Any) -> float:
    """Fit and predict on the first WARMUP_DOCS documents (their labels only), with a small
    tree of several levels, so numba's kernels are compiled or loaded from its on-disk cache
    before the timers start. Returns its wall seconds."""
    t0 = time.perf_counter()
    Xw, Yw = X[:WARMUP_DOCS], Y[:WARMUP_DOCS]
    Yw = Yw[:, np.unique(Yw.indices)].tocsr()
    small = cfg.model_copy(update={"tree": cfg.tree.model_copy(update={"max_leaf_size": 2})})
    model, _ = _ours_train(Xw, Yw, small)
    model.predict(Xw)
    return time.perf_counter() - t0


def run_ours(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    X_test: sp.csr_matrix,
    model_dir: Path,
    mark: Callable[[str], None] = lambda _: None,
) -> Any:
    """xmc XR-Linear with the default ``XmcConfig`` (tree 16/100, squared hinge, beam 10);
    ``mark(stage)`` as each stage begins (``benchmarks/memory_trace.py`` records them)."""
    cfg = ours_config()
    mark("warm-up")
    warmup_s = _ours_warmup(X, Y, cfg)
    t0, cpu0 = time.perf_counter(), time.process_time()
    model, stages = _ours_train(X, Y, cfg, mark)
    train_s, train_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    mark("predict")
    pred, predict_s = timed(lambda: model.predict(X_test))
    notes = {"predict_again_s": timed(lambda: model.predict(X_test))[1]}
    mark("save")
    model.save(model_dir)
    notes |= {"warmup_s_untimed": warmup_s, "stages_s": stages, "train_cpu_s": train_cpu_s}
    return pred, {"train_s": train_s, "predict_s": predict_s, **notes}


def run_ours_cold(
    X: sp.csr_matrix, Y: sp.csr_matrix, X_test: sp.csr_matrix, model_dir: Path
) -> Any:
    """``ours`` as a user's very first process meets it: the parent points ``NUMBA_CACHE_DIR``
    at a new empty folder, and there is no warm-up, so training and prediction include
    compiling the numba kernels. Then the same training and prediction again, warm, in the
    same process: the difference is the one-time compile cost."""
    cfg = ours_config()
    t0 = time.perf_counter()
    model, stages = _ours_train(X, Y, cfg)
    train_s = time.perf_counter() - t0
    pred, predict_s = timed(lambda: model.predict(X_test))
    (warm, warm_stages), warm_train_s = timed(lambda: _ours_train(X, Y, cfg))
    warm_predict_s = timed(lambda: warm.predict(X_test))[1]
    model.save(model_dir)
    notes = {
        "predict_again_s": warm_predict_s,
        "stages_s": stages,
        "warm_train_s": warm_train_s,
        "warm_stages_s": warm_stages,
        "compile_s": train_s + predict_s - warm_train_s - warm_predict_s,
        "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"),
    }
    return pred, {"train_s": train_s, "predict_s": predict_s, **notes}


# ---------------------------------------------------------------- peers (.venv-peers)
def run_pecos(X: sp.csr_matrix, Y: sp.csr_matrix, X_test: sp.csr_matrix, model_dir: Path) -> Any:
    """PECOS XR-Linear: PIFA, ``Indexer.gen`` and ``XLinearModel.train`` with defaults."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    t0, cpu0 = time.perf_counter(), time.process_time()
    Z, pifa_s = timed(lambda: LabelEmbeddingFactory.create(Y, X, method="pifa"))
    t1 = time.perf_counter()  # not ``timed``: a lambda would keep Z alive
    C, tree_s = Indexer.gen(Z, seed=bench_seed()), time.perf_counter() - t1
    del Z  # the label features, once clustered: ours likewise
    model, fit_s = timed(lambda: XLinearModel.train(X, Y, C=C))
    train_s, train_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    pred, predict_s = timed(lambda: model.predict(X_test))
    again_s = timed(lambda: model.predict(X_test))[1]
    model.save(str(model_dir))
    stages = {"pifa_s": pifa_s, "tree_s": tree_s, "fit_s": fit_s}
    notes = {"predict_again_s": again_s, "stages_s": stages, "train_cpu_s": train_cpu_s}
    return sp.csr_matrix(pred), {"train_s": train_s, "predict_s": predict_s, **notes}


def run_napkinxc(X: sp.csr_matrix, Y: sp.csr_matrix, X_test: sp.csr_matrix, model_dir: Path) -> Any:
    """napkinXC PLT with defaults; the model folder is written by ``fit``."""
    from napkinxc.models import PLT

    labels = label_lists(Y)  # napkinXC takes a list of label-id lists (conversion untimed)
    model = PLT(str(model_dir), seed=bench_seed())
    _, train_s = timed(lambda: model.fit(X, labels))
    rows, predict_s = timed(lambda: model.predict_proba(X_test, top_k=TOPK))
    notes = {"predict_again_s": timed(lambda: model.predict_proba(X_test, top_k=TOPK))[1]}
    return pairs_to_csr(rows, Y.shape[1]), {"train_s": train_s, "predict_s": predict_s, **notes}


def write_xc_file(path: Path, X: sp.csr_matrix, Y: sp.csr_matrix) -> None:
    """The Extreme Classification Repository text format Omikuji reads:
    a ``n_docs n_features n_labels`` header, then ``l1,l2 f:v f:v`` per document."""
    with open(path, "w", encoding="ascii") as fh:
        fh.write(f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n")
        for i in range(X.shape[0]):
            labels = ",".join(map(str, Y.indices[Y.indptr[i] : Y.indptr[i + 1]].tolist()))
            lo, hi = X.indptr[i], X.indptr[i + 1]
            pairs = zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist(), strict=True)
            feats = " ".join(f"{j}:{v:.7g}" for j, v in pairs)
            fh.write(f"{labels} {feats}".rstrip(" ") + "\n")  # Omikuji rejects "l1,l2 \n"


def run_omikuji(X: sp.csr_matrix, Y: sp.csr_matrix, X_test: sp.csr_matrix, model_dir: Path) -> Any:
    """Omikuji (Parabel-like forest) with ``default_hyper_param()``, OMIKUJI_TREES trees, and its
    default thread count (all cores); training reads the XC text file, prediction goes document
    by document."""
    import omikuji

    data_path = model_dir.parent / "train.xc.txt"
    _, write_s = timed(lambda: write_xc_file(data_path, X, Y))
    hp = omikuji.Model.default_hyper_param()
    hp.n_trees = OMIKUJI_TREES
    model, train_s = timed(lambda: omikuji.Model.train_on_data(str(data_path), hp))
    data_path.unlink()

    def predict() -> list[list[tuple[int, float]]]:
        rows = []
        for i in range(X_test.shape[0]):
            lo, hi = X_test.indptr[i], X_test.indptr[i + 1]
            doc = list(
                zip(X_test.indices[lo:hi].tolist(), X_test.data[lo:hi].tolist(), strict=True)
            )
            rows.append(model.predict(doc, top_k=TOPK))
        return rows

    rows, predict_s = timed(predict)
    notes = {"predict_again_s": timed(predict)[1], "write_xc_file_s_untimed": write_s}
    notes["n_trees"] = hp.n_trees
    model.save(str(model_dir))
    return pairs_to_csr(rows, Y.shape[1]), {"train_s": train_s, "predict_s": predict_s, **notes}


METHODS: dict[str, Method] = {
    "ours": run_ours,
    "ours-cold": run_ours_cold,
    "pecos": run_pecos,
    "napkinxc": run_napkinxc,
    "omikuji": run_omikuji,
}


def main(argv: list[str]) -> int:
    """``METHOD WORKDIR OUTDIR``: load the features, run the method, write the outputs."""
    if len(argv) != 3 or argv[0] not in METHODS:
        print(f"usage: peer_runner.py {{{','.join(METHODS)}}} WORKDIR OUTDIR", file=sys.stderr)
        return 2
    method, workdir, outdir = argv[0], Path(argv[1]), Path(argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    names = ("X_train", "Y_train", "X_test")
    X, Y, X_test = (sp.load_npz(workdir / f"{n}.npz").tocsr() for n in names)
    rss_start = rss_mb()
    pred, result = METHODS[method](X, Y, X_test, outdir / "model")
    sp.save_npz(outdir / "pred.npz", sp.csr_matrix(pred, dtype=np.float32), compressed=False)
    result |= {"method": method, "n_test": X_test.shape[0], "rss_after_load_mb": rss_start}
    (outdir / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
