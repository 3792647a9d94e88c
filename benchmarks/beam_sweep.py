"""One saved model's test metrics and ranking time at several prediction beam sizes.

Usage, from the repository root, with the project venv, nothing else running::

    python benchmarks/beam_sweep.py MODEL_DIR [--dataset ../shared/datasets/debian-deps]
        [--validation 0.2] [--beams 10,20,40] [--repeats 3]
        [--out benchmarks/results/beam-sweep-<date>.json]

``MODEL_DIR`` is a saved model (for example one that ``benchmarks/xr_transformer.py
--keep-models DIR`` kept, ``DIR/<dataset>``). With ``--validation F`` the documents scored are
the validation carve of the dataset's TRAIN split that ``xr_transformer.py --validation F`` makes
(``bench_common.validation_source``, seed 0; the model must have been trained on its fit part),
so a beam size is chosen without reading the test split. The documents are encoded once (TF-IDF
and, for a model that embeds, the encoder, timed as ``encode_s``); then for each beam size the
ranker's beam search alone is timed (median of ``--repeats``) and every metric scored against
the labels in the shared label index (``bench_common.score``, as the benchmarks score).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import scipy.sparse as sp
from families_runner import score_in_shared
from peer_runner import TOPK

from xmc_core.corpus import Corpus
from xmc_core.model.xmc_model import XmcModel


def sweep(model: XmcModel, X: sp.csr_matrix, workdir: Path, beam: int, repeats: int) -> dict:
    """The beam search at ``beam`` on encoded rows ``X``: median seconds and metrics."""
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pred = model.predict_features(X, topk=TOPK, beam_size=beam)
        seconds.append(time.perf_counter() - t0)
    ms = 1e6 * statistics.median(seconds) / X.shape[0]
    scored = score_in_shared(workdir, pred, model.labels.names.to_pylist(), f"beam-{beam}")
    print(f"beam {beam}: rank {ms:,.0f} ms per 1k docs, P@1 {100 * scored['metrics']['P@1']:.2f}")
    return {"beam_size": beam, "rank_ms_per_1k": ms, "rank_s": seconds} | scored


def run(
    model_dir: Path, dataset: Path, validation: float | None, beams: list[int], repeats: int
) -> dict[str, Any]:
    """Every beam size of ``beams`` on ``dataset``'s test split (or its validation carve)."""
    with tempfile.TemporaryDirectory(prefix="xmc-beams-") as tmp:
        workdir, carved = Path(tmp) / "work", None
        workdir.mkdir()
        if validation is not None:
            source = Path(tmp) / "validation" / dataset.name
            carved = bench_common.validation_source(dataset, source, validation, seed=0)
            dataset = source
        stats = bench_common.prepare(dataset, workdir, keep_corpus=True)
        model = XmcModel.load(model_dir, device="cpu")
        t0 = time.perf_counter()
        split = model.encode_split(Corpus(workdir / "corpus"), "test")
        encode_s = time.perf_counter() - t0
        rows = [sweep(model, split.X, workdir, beam, repeats) for beam in beams]
    return {
        "model": str(model_dir), "family": model.family, "dataset": dataset.name,
        "validation": carved, "stats": stats, "n_docs": split.X.shape[0],
        "encode_s": encode_s, "beams": rows,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("model", type=Path)
    p.add_argument("--validation", type=float, metavar="FRACTION")
    p.add_argument("--beams", default="10,20,40", help="comma-separated beam sizes")
    p.add_argument("--repeats", type=int, default=3)
    bench_common.add_dataset_and_out(p, "beam-sweep")
    args = p.parse_args(argv)
    beams = [int(b) for b in args.beams.split(",")]
    result = run(args.model, args.dataset, args.validation, beams, args.repeats)
    bench_common.write_torch_report(args.out, "beam_sweep.py", argv, result=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
