"""A saved XR-Transformer model's prediction in float32 (torch) vs int8 (ONNX Runtime).

Usage, from the repository root, with the project venv (``make install`` has the onnx extra),
nothing else running::

    python benchmarks/int8_predict.py MODEL_DIR [--dataset ../shared/datasets/debian-deps]
        [--repeats 3] [--batch-size B] [--out benchmarks/results/int8-predict-<date>.json]

``MODEL_DIR`` is a saved XR-Transformer model, for example one that
``benchmarks/xr_transformer.py --keep-models DIR`` kept (``DIR/<dataset>``). The same weights
predict the dataset's test texts twice: in float32 (torch), and with the encoder exported to
int8 by the current code (``EmbeddingFeatures(runtime="onnx-int8")``, what
``predict_runtime: onnx-int8`` trains into the model; an int8 encoder saved in the model is not
used). Reports for each: the median of ``--repeats`` timed predictions (ms per 1,000
documents; the first call of each warms up, untimed), every metric against the test labels, and
the int8 embeddings' cosines to the float32 ones; and the export's seconds. ``--batch-size``
embeds that many documents per forward pass in both runtimes instead of the model's saved
``matcher.embed_batch_size``. Issue 18's target:
≤ 1.5 s per 1,000 documents at a P@1 loss ≤ 0.3 against the float32 model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
from families_runner import score_in_shared
from peer_runner import TOPK

from xmc_core.corpus import Corpus
from xmc_core.model.xmc_model import XmcModel


def int8_twin(model: XmcModel) -> tuple[XmcModel, float]:
    """The same model with its encoder exported to int8, and the export's seconds."""
    t0 = time.perf_counter()
    features = model.encoder.on_runtime("onnx-int8")
    return model.with_encoder(features), time.perf_counter() - t0


def measure(
    model: XmcModel, texts: Any, workdir: Path, repeats: int, name: str
) -> tuple[dict[str, Any], np.ndarray]:
    """Timed predictions and metrics of ``model`` on ``texts``; its test embeddings."""
    model.predict(texts[:256], topk=TOPK)  # warm-up
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pred = model.predict(texts, topk=TOPK)
        seconds.append(time.perf_counter() - t0)
    scored = score_in_shared(workdir, pred, model.labels.names.to_pylist(), name)
    ms = 1000 * statistics.median(seconds) / len(texts) * 1000
    row = {"predict_ms_per_1k": ms, "predict_s": seconds} | scored
    print(f"{name}: {ms:,.0f} ms per 1k docs, P@1 {100 * scored['metrics']['P@1']:.2f}", flush=True)
    return row, model.encoder.embed(texts)


def run(
    model_dir: Path, dataset: Path, repeats: int, batch_size: int | None = None
) -> dict[str, Any]:
    """Both runtimes on ``dataset``'s test split (ingested into a temporary folder), at
    ``batch_size`` documents per forward pass (None: the model's own)."""
    with tempfile.TemporaryDirectory(prefix="xmc-int8-") as tmp:
        workdir = Path(tmp)
        stats = bench_common.prepare(dataset, workdir, keep_corpus=True)
        texts = Corpus(workdir / "corpus").read_split("test", ["text"]).column("text")
        model = XmcModel.load(model_dir, device="cpu")
        if model.family != "xr_transformer":
            raise SystemExit(f"{model_dir}: not an XR-Transformer model")
        model = model.with_encoder(model.encoder.on_runtime("torch"))
        if batch_size is not None:
            model = model.with_encoder(replace(model.encoder, batch_size=batch_size))
        full, E_full = measure(model, texts, workdir, repeats, "float32")
        twin, export_s = int8_twin(model)
        fast, E_fast = measure(twin, texts, workdir, repeats, "int8")
    cosines = np.sum(E_full * E_fast, axis=1)
    loss = 100 * (full["metrics"]["P@1"] - fast["metrics"]["P@1"])
    speedup = full["predict_ms_per_1k"] / fast["predict_ms_per_1k"]
    print(f"int8: P@1 loss {loss:.2f}, {speedup:.2f}x faster, export {export_s:.1f} s")
    return {
        "dataset": dataset.name, "stats": stats, "n_test": len(texts),
        "batch_size": model.encoder.batch_size, "float32": full,
        "int8": fast, "export_s": export_s, "p_at_1_loss": loss, "speedup": speedup,
        "cosine": {"mean": float(cosines.mean()), "min": float(cosines.min()),
                   "p01": float(np.quantile(cosines, 0.01))},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("model", type=Path)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, help="documents per forward pass (default: saved)")
    bench_common.add_dataset_and_out(p, "int8-predict")
    args = p.parse_args(argv)
    result = run(args.model, args.dataset, args.repeats, args.batch_size)
    bench_common.write_torch_report(args.out, "int8_predict.py", argv, result=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
