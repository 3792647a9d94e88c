"""The label-frequency baseline of ``benchmarks/families.py``: every test document gets the
``TOPK`` most frequent training labels, scored by their training frequency (ties: the lower
label id). The floor a learned model must clear.

Usage: ``python benchmarks/frequency_runner.py WORKDIR OUTDIR`` (a workdir prepared by
``bench_common.prepare``): writes ``OUTDIR/pred.npz``, ``OUTDIR/model/counts.npy`` and
``OUTDIR/result.json`` (``train_s``: counting, ``predict_s``: writing the rows).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from peer_runner import TOPK  # benchmarks/ (the script's folder) is on sys.path


def top_labels(Y: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most frequent labels of ``Y`` (most frequent first, ties to the lower id) and
    their frequencies (share of the rows holding them)."""
    counts = np.bincount(Y.indices, minlength=Y.shape[1])
    order = np.argsort(-counts, kind="stable")[: min(k, Y.shape[1])]
    return order, counts[order] / max(1, Y.shape[0])


def predict(labels: np.ndarray, freqs: np.ndarray, n: int, n_labels: int) -> sp.csr_matrix:
    """csr (n, n_labels): every row the same ``labels`` with scores ``freqs``."""
    k = len(labels)
    data = np.tile(freqs.astype(np.float32), n)
    indptr = np.arange(0, n * k + 1, k)
    return sp.csr_matrix((data, np.tile(labels, n), indptr), shape=(n, n_labels))


def main(argv: list[str]) -> int:
    workdir, outdir = Path(argv[0]), Path(argv[1])
    (outdir / "model").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    Y = sp.load_npz(workdir / "Y_train.npz").tocsr()
    labels, freqs = top_labels(Y, TOPK)
    train_s = time.perf_counter() - t0
    np.save(outdir / "model" / "counts.npy", np.bincount(Y.indices, minlength=Y.shape[1]))
    n_test = sp.load_npz(workdir / "X_test.npz").shape[0]
    seconds = []
    for _ in range(2):  # predict, predict_again (the other runners' pair)
        t0 = time.perf_counter()
        pred = predict(labels, freqs, n_test, Y.shape[1])
        seconds.append(time.perf_counter() - t0)
    sp.save_npz(outdir / "pred.npz", pred, compressed=False)
    result = {
        "train_s": train_s, "predict_s": seconds[0], "predict_again_s": seconds[1],
        "n_test": n_test, "top_labels": labels.tolist(), "frequencies": freqs.tolist(),
    }  # fmt: skip
    (outdir / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
