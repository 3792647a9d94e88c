"""The encoder on this CPU in float32 vs bf16 and fp16 autocast: training step and embedding.

Usage, from the repository root, with the project venv, nothing else running::

    python benchmarks/cpu_precision.py [--dataset ../shared/datasets/debian-deps]
        [--lengths 64,128] [--steps 8] [--modes fp32,bf16,fp16,int8,onnx-int8]
        [--out benchmarks/results/cpu-precision-<date>.json]

The packaged all-MiniLM-L6-v2 (``TextEncoder``, mean pooling) on the first 2,048 training texts
of ``--dataset``, with torch's threads as configured (all cores). For each token length and each
of ``fp32`` (no autocast), ``bf16`` and ``fp16`` (``torch.autocast("cpu", dtype)``): the median
seconds of a training step (32 random documents, forward, a loss on the embeddings, backward,
AdamW; the first 2 steps are warm-up) and the milliseconds per document of embedding the 512
longest documents in batches of 128 (inference mode), with the smallest cosine between those
embeddings and the float32 ones, and ``int8`` (embedding only: torch's dynamic int8
quantization of every ``nn.Linear``, weights per tensor, activations quantized on the fly) and
``onnx-int8`` (embedding only: the int8 ONNX export that ``matcher.predict_runtime: onnx-int8``
runs in ONNX Runtime, weights per output channel), with the mean cosine too. ``--modes`` picks
some (fp32 first: the reference). A lever for the CPU preset only if it is faster here.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import warnings
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import torch
from torch.ao.quantization import quantize_dynamic

from xmc_core.config import EncoderConfig
from xmc_core.transformer.encoder import TextEncoder, default_encoder_path, load_tokenizer
from xmc_core.transformer.onnx_int8 import Int8Encoder
from xmc_core.transformer.tokens import TokenizedTexts, tokenize_texts

MODES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
INT8 = "int8"  # embedding only: quantize_dynamic's int8 Linear layers
ONNX_INT8 = "onnx-int8"  # embedding only: what matcher.predict_runtime onnx-int8 runs
EMBED_ONLY = (INT8, ONNX_INT8)
N_TEXTS, BATCH, EMBED_DOCS, EMBED_BATCH, WARMUP = 2048, 32, 512, 128, 2


def cast(mode: str) -> contextlib.AbstractContextManager:
    """Autocast to ``mode``'s dtype; none for fp32 and int8 (its layers are int8 already)."""
    dtype = MODES.get(mode)
    return contextlib.nullcontext() if dtype is None else torch.autocast("cpu", dtype=dtype)


def train_steps(tokens: TokenizedTexts, length: int, mode: str, steps: int) -> list[float]:
    """Seconds of each training step (fresh encoder and AdamW, batches drawn from seed 0)."""
    torch.manual_seed(0)
    encoder = TextEncoder.load(EncoderConfig(max_length=length)).train()
    opt = torch.optim.AdamW(encoder.parameters(), lr=5e-5)
    rng, seconds = np.random.default_rng(0), []
    for _ in range(steps):
        ids, mask = tokens.batch(
            rng.choice(tokens.n_docs, BATCH, replace=False), torch.device("cpu")
        )
        t0 = time.perf_counter()
        with cast(mode):
            emb = encoder(ids, mask)
        loss = (emb.float().sum(1) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seconds.append(time.perf_counter() - t0)
    return seconds


def embed_longest(tokens: TokenizedTexts, length: int, mode: str) -> tuple[float, np.ndarray]:
    """(ms per document, embeddings) of the EMBED_DOCS longest documents."""
    encoder = TextEncoder.load(EncoderConfig(max_length=length)).eval()
    order = np.argsort(-tokens.lengths, kind="stable")[:EMBED_DOCS]
    if mode == ONNX_INT8:
        int8 = Int8Encoder.from_encoder(encoder)
        longest = tokens.take(order)
        int8.embed(longest.take(np.arange(8)), 8)  # the session's first run allocates: untimed
        t0 = time.perf_counter()
        out = int8.embed(longest, EMBED_BATCH)
        return 1000 * (time.perf_counter() - t0) / len(order), out
    if mode == INT8:  # torch warns this API moves to torchao: not news here
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="torch.ao")
        encoder = quantize_dynamic(encoder, {torch.nn.Linear}, dtype=torch.qint8)
    out = np.empty((len(order), encoder.hidden_size), dtype=np.float32)
    t0 = time.perf_counter()
    with torch.inference_mode(), cast(mode):
        for start in range(0, len(order), EMBED_BATCH):
            ids, mask = tokens.batch(order[start : start + EMBED_BATCH], torch.device("cpu"))
            out[start : start + EMBED_BATCH] = encoder(ids, mask).float().numpy()
    return 1000 * (time.perf_counter() - t0) / len(order), out


def measure(
    texts: list[str], lengths: list[int], steps: int, modes: list[str]
) -> list[dict[str, Any]]:
    """One record per (token length, mode); the first mode is the cosines' reference."""
    tokenizer = load_tokenizer(default_encoder_path())
    rows = []
    for length in lengths:
        tokens = tokenize_texts(tokenizer, texts, length)
        reference = None
        for mode in modes:
            step_s = None
            if mode not in EMBED_ONLY:
                step_s = statistics.median(train_steps(tokens, length, mode, steps)[WARMUP:])
            ms, emb = embed_longest(tokens, length, mode)
            reference = emb if reference is None else reference
            cosines = np.sum(emb * reference, axis=1) / (
                np.linalg.norm(emb, axis=1) * np.linalg.norm(reference, axis=1)
            )
            rows.append({"max_length": length, "mode": mode, "train_step_s": step_s,
                         "train_docs_per_s": None if step_s is None else BATCH / step_s,
                         "embed_ms_per_doc": ms, "min_cosine_to_fp32": float(cosines.min()),
                         "mean_cosine_to_fp32": float(cosines.mean())})  # fmt: skip
            step = "-" if step_s is None else f"{step_s:.3f} s"
            cos = f"cosine min {cosines.min():.5f} mean {cosines.mean():.5f}"
            print(f"{length} tokens, {mode}: train step {step}, embed {ms:.2f} ms/doc, {cos}",
                  flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--lengths", default="64,128")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--modes", default=",".join([*MODES, *EMBED_ONLY]), help="fp32 first")
    bench_common.add_dataset_and_out(p, "cpu-precision")
    args = p.parse_args(argv)
    texts = (args.dataset / "train_texts.txt").read_text(encoding="utf-8").splitlines()[:N_TEXTS]
    lengths, modes = [int(v) for v in args.lengths.split(",")], args.modes.split(",")
    if modes[0] != "fp32" or set(modes) - {*MODES, *EMBED_ONLY}:
        p.error(f"--modes: fp32 first, then any of {[*MODES, *EMBED_ONLY][1:]}")
    rows = measure(texts, lengths, args.steps, modes)
    bench_common.write_torch_report(args.out, "cpu_precision.py", argv, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
