"""One timed XR-Transformer run, stage by stage, in its own process (project venv).

Usage (started by ``benchmarks/xr_transformer.py``)::

    python benchmarks/xr_transformer_runner.py WORKDIR OUTDIR --checkpoints DIR [--config FILE]
        [--set K=V ...]

``WORKDIR`` holds the shared features of ``benchmarks/peers.py``'s ``prepare`` (``X_train.npz``,
``Y_train.npz``, ``X_test.npz``) and ``corpus/``, the ingested dataset they were computed from
(same documents, same order). ``--config`` (a YAML file such as ``configs/xr-transformer-cpu.yaml``)
and ``--set`` make the ``XmcConfig``, as for ``xmc train``. ``--checkpoints`` is the
matcher's checkpoint root; it is emptied first, so every level is trained, unless ``--resume``
keeps the levels an earlier run finished (``matcher_resumed`` lists them).

The stages are those of ``xmc_core.transformer.pipeline.train_transformer``, called one by one
with the library's own functions so each is timed: tokenize the training texts, matcher tree
(PIFA from X/Y, as the pipeline's label features, then ``LabelTree.build``), the matcher
(``train_matcher``; per level, seconds and history are read from each checkpoint's
``meta.json``), load the last encoder, embed the training documents, ``fit_final_ranker``
(its refined tree, matcher predictions, matcher-aware shortlists, concatenation and XR-Linear
fit timed separately by wrapping those calls), then the test documents through
``EmbeddingFeatures.features`` (tokenize + embed + concat, the serving path) and
``ranker.predict``. Every stage records wall and CPU seconds; on CUDA also the peak allocated
GPU memory and the GPU utilisation sampled every 0.5 s in a thread (``torch.cuda.utilization``,
else ``nvidia-smi``). Writes ``OUTDIR/result.json``, ``OUTDIR/pred.npz`` (csr (n_test,
n_labels), top ``predict.topk`` scores) and ``OUTDIR/model/`` (ranker + encoder).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import scipy.sparse as sp
import torch
from peer_runner import _ours_warmup  # benchmarks/ (the script's folder) is on sys.path

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.features.pifa import concat_label_features, pifa, pifa_partial
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.artifacts import read_meta
from xmc_core.transformer import pipeline
from xmc_core.transformer.encoder import resolve_device
from xmc_core.transformer.matcher import MatcherCheckpoint, train_matcher
from xmc_core.transformer.ranker import EmbeddingFeatures

SAMPLE_S = 0.5
TRAIN_STAGES = (
    "tokenize_train", "matcher_tree", "matcher", "load_encoder", "embed_train", "final_ranker",
)  # fmt: skip
PREDICT_STAGES = ("test_features", "predict")


def cpu_s() -> float:
    """User + system CPU seconds of this process (all its threads)."""
    t = os.times()
    return t.user + t.system


class GpuSampler(threading.Thread):
    """GPU utilisation (%) of ``device`` every SAMPLE_S seconds, as ``(perf_counter, %)``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(daemon=True)
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        self.samples: list[tuple[float, float]] = []
        self.source = "none"
        self._stop_event = threading.Event()

    def read(self) -> float | None:
        """One reading: ``torch.cuda.utilization`` (needs pynvml), else ``nvidia-smi``."""
        if self.source in ("none", "torch.cuda.utilization"):
            try:
                value = float(torch.cuda.utilization(self.index))
                self.source = "torch.cuda.utilization"
                return value
            except Exception:  # pynvml missing or NVML error: fall back once
                self.source = "nvidia-smi"
        cmd = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        cmd += ["-i", ids[self.index] if self.index < len(ids) else str(self.index)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True)
            return float(out.stdout.strip().splitlines()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            self.source = "unavailable"
            return None

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_S) and self.source != "unavailable":
            value = self.read()
            if value is not None:
                self.samples.append((time.perf_counter(), value))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def mean(self, start: float, end: float) -> dict[str, Any]:
        """Mean utilisation and number of samples taken between ``start`` and ``end``."""
        values = [v for t, v in self.samples if start <= t <= end]
        return {"gpu_util_mean": float(np.mean(values)) if values else None, "n": len(values)}


class StageClock:
    """Wall seconds, CPU seconds and (CUDA) peak allocated memory of named stages."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.stages: dict[str, dict[str, float]] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0, c0 = time.perf_counter(), cpu_s()
        yield
        if self.cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        record = {"wall_s": t1 - t0, "cpu_s": cpu_s() - c0, "t_start": t0, "t_end": t1}
        if self.cuda:
            record["gpu_peak_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        self.stages[name] = record


@contextmanager
def timed_calls(targets: dict[str, tuple[Any, str]], times: dict[str, float]) -> Iterator[None]:
    """While inside, every call of ``getattr(owner, attr)`` adds its seconds to ``times[name]``
    (``targets``: name -> (owner, attr)); the originals are restored on exit."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t0

        return timed

    with ExitStack() as stack:
        for name, (owner, attr) in targets.items():
            stack.enter_context(mock.patch.object(owner, attr, wrap(name, getattr(owner, attr))))
        yield


# The calls of pipeline.fit_final_ranker, timed one by one (the remainder is "other").
RANKER_PARTS = {
    "label_features_s": (pipeline, "ranker_label_features"),
    "tree_s": (LabelTree, "build"),
    "matcher_predictions_s": (pipeline, "matcher_predictions"),
    "matcher_shortlists_s": (pipeline, "matcher_parent_shortlists"),
    "concat_features_s": (pipeline, "concat_features"),
    "fit_s": (XRLinearModel, "fit"),
}


def level_record(ckpt: MatcherCheckpoint) -> dict[str, Any]:
    """Seconds and training history of one matcher level, from its ``meta.json``."""
    meta = read_meta(ckpt.folder, "MatcherLevel", verify=False)
    history = meta.get("history", {})
    records = history.get("records", [])
    last = records[-1] if records else {}
    return {
        "level": ckpt.level,
        "n_clusters": ckpt.n_clusters,
        "device": meta.get("device"),
        "level_s": meta.get("seconds"),
        "train_loop_s": history.get("seconds"),
        "steps": history.get("steps"),
        "docs_per_s_median": float(np.median([r["docs_per_s"] for r in records]))
        if records
        else None,
        "final_val": {k: v for k, v in last.items() if k.startswith("P@") or k == "loss"},
        "history": records,
    }


def device_info(device: torch.device) -> dict[str, Any]:
    """Torch build, thread counts and the GPU's name and memory."""
    info: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cuda_available": torch.cuda.is_available(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {"gpu_name": props.name, "gpu_memory_gb": props.total_memory / 2**30}
        info["cuda_version"] = torch.version.cuda
    return info


def train_and_predict(workdir: Path, outdir: Path, cfg: XmcConfig, root: Path) -> dict[str, Any]:
    """Every stage, timed; returns the result record (writes ``pred.npz`` and ``model/``)."""
    names = ("X_train", "Y_train", "X_test")
    X, Y, X_test = (sp.load_npz(workdir / f"{n}.npz").tocsr() for n in names)
    corpus = Corpus(workdir / "corpus")
    device = resolve_device(cfg.matcher.device)
    warmup_s = _ours_warmup(X, Y, cfg)  # numba kernels of the final ranker, untimed
    clock, sampler = StageClock(device), None
    if device.type == "cuda":
        sampler = GpuSampler(device)
        sampler.start()
    with clock("tokenize_train"):
        tokens = pipeline.tokenize_split(corpus, "train", cfg)
    if tokens.n_docs != X.shape[0]:
        raise RuntimeError(f"{tokens.n_docs} tokenized documents, X_train has {X.shape[0]} rows")
    with clock("matcher_tree"):
        Z = concat_label_features([pifa([pifa_partial(X, Y)])], [1.0])
        matcher_tree = LabelTree.build(Z, cfg.tree)
    with clock("matcher"):
        ckpts = train_matcher(tokens, Y, matcher_tree, cfg.encoder, cfg.matcher, root)
    with clock("load_encoder"):
        encoder, tokenizer = ckpts[-1].encoder()
    with clock("embed_train"):  # as the pipeline: only documents the checkpoint lacks
        E = pipeline.final_embeddings(ckpts[-1], encoder, tokens, cfg.matcher)
    parts: dict[str, float] = {}
    with clock("final_ranker"), timed_calls(RANKER_PARTS, parts):
        ranker = pipeline.fit_final_ranker(X, E, Y, matcher_tree, ckpts[-1], cfg)
    parts["other_s"] = clock.stages["final_ranker"]["wall_s"] - sum(parts.values())
    features = EmbeddingFeatures(
        encoder, tokenizer, cfg.matcher.embedding_weight, cfg.matcher.embed_batch_size,
        cfg.matcher.device, cfg.matcher.bf16,
    )  # fmt: skip
    texts = corpus.read_split("test", ["text"]).column("text")  # read untimed, as X_test
    with clock("test_features"):
        Xc_test = features.features(X_test, texts)
    with clock("predict"):
        pred = ranker.predict(Xc_test)
    if sampler is not None:
        sampler.stop()
    ranker.save(outdir / "model" / "ranker")
    features.save(outdir / "model" / "embedding")
    sp.save_npz(outdir / "pred.npz", sp.csr_matrix(pred, dtype=np.float32), compressed=False)
    result = summarize(clock, sampler, ckpts, parts, matcher_tree, ranker, X_test.shape[0], device)
    return result | {"warmup_s_untimed": warmup_s}


def summarize(
    clock: StageClock,
    sampler: GpuSampler | None,
    ckpts: list[MatcherCheckpoint],
    parts: dict[str, float],
    matcher_tree: LabelTree,
    ranker: XRLinearModel,
    n_test: int,
    device: torch.device,
) -> dict[str, Any]:
    """The result record: stage times (and GPU utilisation), matcher levels, totals."""
    stages = clock.stages
    levels = [level_record(c) for c in ckpts]
    start = stages["matcher"]["t_start"]
    for level in levels:  # per-level window from the levels' own seconds (approximate)
        end = start + (level["level_s"] or 0.0)
        if sampler is not None:
            level["gpu"] = sampler.mean(start, end)
        start = end
    gpu: dict[str, Any] = {"sampled": sampler is not None}
    if sampler is not None:
        t0, t1 = stages[TRAIN_STAGES[0]]["t_start"], stages[TRAIN_STAGES[-1]]["t_end"]
        gpu |= {"source": sampler.source, "train": sampler.mean(t0, t1)}
        gpu["peak_allocated_mb"] = max(s.get("gpu_peak_allocated_mb", 0.0) for s in stages.values())
        for record in stages.values():
            record |= {"gpu": sampler.mean(record["t_start"], record["t_end"])}
    for record in stages.values():
        del record["t_start"], record["t_end"]
    return {
        "train_s": sum(stages[s]["wall_s"] for s in TRAIN_STAGES),
        "predict_s": sum(stages[s]["wall_s"] for s in PREDICT_STAGES),
        "n_test": n_test,
        "stages_s": stages,
        "final_ranker_parts_s": parts,
        "matcher_levels": levels,
        "matcher_tree_sizes": matcher_tree.level_sizes(),
        "ranker_tree_sizes": ranker.tree_.level_sizes(),
        "ranker_n_features": ranker.n_features_,
        "gpu": gpu,
        "environment": device_info(device),
    }


def main(argv: list[str]) -> int:
    """``WORKDIR OUTDIR --checkpoints DIR [--config FILE] [--set K=V ...]``: run, write
    ``result.json``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("workdir", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument(
        "--checkpoints", type=Path, required=True, help="emptied (unless --resume), then written"
    )
    p.add_argument(
        "--resume", action="store_true",
        help="keep finished matcher levels of an earlier run of the same config (their "
        "seconds, from their meta.json, are added to train_s; matcher_resumed lists them)",
    )  # fmt: skip
    p.add_argument("--config", type=Path, help="YAML config file (default: the defaults)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = XmcConfig.load(args.config, args.set)
    if not args.resume:
        shutil.rmtree(args.checkpoints, ignore_errors=True)
    # finished before this run: a level folder with its meta.json, as train_matcher decides
    found = {m.parent.name for m in args.checkpoints.glob("level-*/meta.json")}
    args.outdir.mkdir(parents=True, exist_ok=True)
    result = train_and_predict(args.workdir, args.outdir, cfg, args.checkpoints)
    levels = result["matcher_levels"]
    reused = [level for level in levels if f"level-{level['level']}" in found]
    result["matcher_resumed"] = [level["level"] for level in reused]
    if reused:  # the reused levels' training seconds count; reloading them stays in (seconds)
        result["matcher_reload_s"] = result["stages_s"]["matcher"]["wall_s"]
        result["train_s"] += sum(level["level_s"] or 0.0 for level in reused)
    result |= {"method": "xr-transformer", "config_file": str(args.config), "overrides": args.set}
    result["config"] = cfg.model_dump(mode="json")
    (args.outdir / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
