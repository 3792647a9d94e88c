"""The peers of the calibration benchmark, in the peers venv (started by
``benchmarks/calibration.py``)::

    python benchmarks/calibration_peers.py METHOD WORKDIR OUTDIR

``WORKDIR`` holds the shared TF-IDF (scipy csr, float32): ``X_train.npz``/``Y_train.npz`` (the
whole training split), ``X_fit.npz``/``Y_fit.npz`` (the training split without the calibration
carve), ``X_carve.npz`` and ``X_test.npz``. ``METHOD``:

- ``libmultilabel``: ``linear.train_thresholding`` on the whole training split, with its
  defaults (one-vs-rest, thresholds for micro-F1 + macro-F1 by its own 3-fold cross-validation,
  CIKM 2023); ``OUTDIR/pred.npz``: its test predictions, 1 where a decision value is above its
  threshold (``model.predict_values > 0``).
- ``pecos``: XR-Linear with its defaults (PIFA, ``Indexer.gen``, ``XLinearModel.train``) on the
  training split without the carve; ``OUTDIR/carve.npz`` and ``OUTDIR/pred.npz``: its top
  ``TOPK`` scores of the carve and of the test split (the parent picks its best global
  threshold on the carve).

``OUTDIR/result.json``: ``train_s`` and ``predict_s``. Imports numpy, scipy and the peer only.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

TOPK = 20


def load(workdir: Path, name: str) -> sp.csr_matrix:
    return sp.csr_matrix(sp.load_npz(workdir / f"{name}.npz"), dtype=np.float32)


def run_libmultilabel(workdir: Path, out: Path) -> dict[str, float]:
    from libmultilabel import linear

    X, Y = load(workdir, "X_train"), load(workdir, "Y_train")
    t0 = time.perf_counter()
    model = linear.train_thresholding(Y, X, verbose=False)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    values = model.predict_values(load(workdir, "X_test"))
    pred = sp.csr_matrix((values > 0).astype(np.float32))
    sp.save_npz(out / "pred.npz", pred, compressed=False)
    return {"train_s": train_s, "predict_s": time.perf_counter() - t0}


def run_pecos(workdir: Path, out: Path) -> dict[str, float]:
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    X, Y = load(workdir, "X_fit"), load(workdir, "Y_fit")
    t0 = time.perf_counter()
    C = Indexer.gen(LabelEmbeddingFactory.create(Y, X, method="pifa"))
    model = XLinearModel.train(X, Y, C=C)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for name, split in (("carve", "X_carve"), ("pred", "X_test")):
        pred = sp.csr_matrix(model.predict(load(workdir, split), only_topk=TOPK))
        sp.save_npz(out / f"{name}.npz", pred, compressed=False)
    return {"train_s": train_s, "predict_s": time.perf_counter() - t0}


def main(argv: list[str]) -> None:
    method, workdir, out = argv[0], Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    runner = {"libmultilabel": run_libmultilabel, "pecos": run_pecos}[method]
    result = runner(workdir, out)
    (out / "result.json").write_text(json.dumps(result) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
