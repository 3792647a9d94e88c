"""PECOS's half of ``benchmarks/xr_linear_causes.py``, run in the peers venv.

Usage (the parent script runs it)::

    .venv-peers/bin/python benchmarks/tree_swap_runner.py WORKDIR SEED OUTDIR

Reads ``X_train``/``Y_train``/``X_test`` from ``WORKDIR`` (the shared features) and our label
tree of this seed from ``OUTDIR/tree-ours/C{t}.npz``; builds PECOS's tree with ``seed=SEED``
(PIFA, ``Indexer.gen`` defaults) and writes it as ``OUTDIR/tree-pecos/C{t}.npz`` (the same
cluster-chain convention: ``C[t]`` maps level t+1's nodes to level t's); trains
``XLinearModel`` with its defaults on each tree and writes its top-20 predictions of the test
rows as ``OUTDIR/pred-pecos-on-{pecos,ours}.npz`` and the seconds in ``OUTDIR/pecos.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

TOPK = 20


def load_chain(folder: Path) -> list[sp.csc_matrix]:
    """``C0.npz``, ``C1.npz``, ... of ``folder`` as csc matrices, in order."""
    n = len(list(folder.glob("C*.npz")))
    return [sp.load_npz(folder / f"C{t}.npz").tocsc().astype(np.float32) for t in range(n)]


def main(argv: list[str]) -> int:
    """Build PECOS's tree, train on both trees, write predictions and seconds."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.base import ClusterChain
    from pecos.xmc.xlinear.model import XLinearModel

    workdir, seed, out = Path(argv[0]), int(argv[1]), Path(argv[2])
    X, Y, X_test = (
        sp.load_npz(workdir / f"{n}.npz").tocsr() for n in ("X_train", "Y_train", "X_test")
    )
    t0 = time.perf_counter()
    Z = LabelEmbeddingFactory.create(Y, X, method="pifa")
    chain = Indexer.gen(Z, seed=seed)
    seconds: dict[str, float] = {"pecos_tree_s": time.perf_counter() - t0}
    (out / "tree-pecos").mkdir(parents=True, exist_ok=True)
    for t, m in enumerate(chain):
        sp.save_npz(out / "tree-pecos" / f"C{t}.npz", sp.csr_matrix(m), compressed=False)
    trees = {"pecos": chain, "ours": ClusterChain(load_chain(out / "tree-ours"))}
    for name, C in trees.items():
        t0 = time.perf_counter()
        model = XLinearModel.train(X, Y, C=C)
        seconds[f"fit_on_{name}_s"] = time.perf_counter() - t0
        pred = sp.csr_matrix(model.predict(X_test, only_topk=TOPK), dtype=np.float32)
        sp.save_npz(out / f"pred-pecos-on-{name}.npz", pred, compressed=False)
    (out / "pecos.json").write_text(json.dumps(seconds, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
