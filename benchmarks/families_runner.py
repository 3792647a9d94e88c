"""One timed training of one of our families from a preset, in its own process (project venv).

Usage (started by ``benchmarks/families.py``)::

    python benchmarks/families_runner.py WORKDIR OUTDIR --config FILE [--set K=V ...]

``WORKDIR`` is a folder of ``bench_common.prepare(..., keep_corpus=True)``: ``corpus/`` (the
ingested dataset), the shared features (``X_train.npz``, ``Y_train.npz``, used here only to
warm numba's kernels up, untimed) and ``labels.json`` (the shared label index). The config is
``--config`` then ``--set`` (as ``xmc train``), with ``work_dir`` moved into ``OUTDIR`` so
nothing is resumed from an earlier run.

Training is ``xmc train``'s in-process graph (``xmc_core.families.train``: ``check_corpus``,
``train_graph``, the objects behind its handles) on a runner that times every stage. The test
side of the graph (stages named ``evaluation`` or ``diagnostics``, and stages labelled for the
``test`` split: its featurization, tokenization, embedding) is not training: ``train_s`` is the
graph's wall time minus those stages (``graph_s`` keeps the total). Prediction is
``XmcModel.predict`` on the test texts (top ``TOPK``), timed twice. Writes to ``OUTDIR``:
``model/`` (``XmcModel.save``), ``pred.npz`` (csr (n_test, n_labels) in the shared label
index; and ``pred-full-precision.npz``, the same model in float32, when it predicts in int8)
and ``result.json``. On a machine with a GPU, a family that runs on torch has the GPU's
utilisation sampled every 0.5 s (``gpu_sampler.py``): its mean over the training and over each
stage call, and the peak allocated GPU memory, are in ``result.json`` (``gpu``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from peer_runner import TOPK, _ours_warmup  # benchmarks/ (the script's folder) is on sys.path

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.families.train import check_corpus, train_graph, values_of
from xmc_core.model import registry
from xmc_core.stages.graph import Held, InProcessRunner, Stage

TEST_STAGES = ("evaluation", "diagnostics")
"""Stage names that score the test split: not training."""
FULL_PRECISION = "pred-full-precision.npz"
"""A model that predicts at reduced precision (``matcher.predict_runtime: onnx-int8``) also
predicts the test texts once with the same weights in float32 (torch), into this file."""


class TimedRunner(InProcessRunner):
    """:class:`InProcessRunner` that records every stage call: label, stage name, seconds."""

    def __init__(self, work_dir: str) -> None:
        super().__init__(work_dir)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, stage: Stage, *, label: str | None = None, **args: Any) -> Held:
        t0 = time.perf_counter()
        held = super().__call__(stage, label=label, **args)
        t1 = time.perf_counter()
        call = {"label": label or stage.name, "stage": stage.name, "wall_s": t1 - t0}
        self.calls.append(call | {"t_start": t0, "t_end": t1})
        return held


def start_gpu_sampler(cfg: XmcConfig) -> Any | None:
    """A started ``gpu_sampler.GpuSampler`` when the family runs on torch and a GPU is present
    (torch is not imported for the other families: it would count in their RSS)."""
    if "torch" not in registry.family(cfg.model.kind).requirements:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    from gpu_sampler import GpuSampler

    sampler = GpuSampler(torch.device("cuda"))
    sampler.start()
    return sampler


def gpu_record(sampler: Any | None, calls: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """The GPU's mean utilisation over the training and per stage call (``calls`` get a
    ``gpu`` entry), its peak allocated memory; ``{"sampled": False}`` without a sampler. Drops
    the calls' ``t_start``/``t_end`` marks either way."""
    out: dict[str, Any] = {"sampled": sampler is not None}
    if sampler is not None:
        import torch

        sampler.stop()
        train = [c for c in calls if not on_test_split(c)]
        out |= {"source": sampler.source, "train": sampler.mean(t0, train[-1]["t_end"])}
        out["peak_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        out["gpu_name"] = torch.cuda.get_device_name()
        for call in calls:
            call["gpu"] = sampler.mean(call["t_start"], call["t_end"])
    for call in calls:
        del call["t_start"], call["t_end"]
    return out


def on_test_split(call: dict[str, Any]) -> bool:
    """Whether a recorded stage call works on the test split (``test`` in its dash-separated
    label, e.g. ``featurize-test-0``, ``embed-test``) or scores it."""
    return call["stage"] in TEST_STAGES or "test" in call["label"].split("-")


def train(corpus: Corpus, cfg: XmcConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The family's graph on ``corpus``: (its output objects, the timing record)."""
    check_corpus(corpus, cfg)
    run = TimedRunner(str(cfg.work_dir))
    marks: dict[str, float] = {}
    sampler = start_gpu_sampler(cfg)
    t0 = time.perf_counter()
    handles = train_graph(
        run, run.source(Corpus, str(corpus.path)), cfg,
        on_featurized=lambda _: marks.setdefault("featurized", time.perf_counter()),
    )  # fmt: skip
    graph_s = time.perf_counter() - t0
    gpu = gpu_record(sampler, run.calls, t0)
    outputs = values_of(run, handles)
    excluded = [c for c in run.calls if on_test_split(c)]
    record = {
        "train_s": graph_s - sum(c["wall_s"] for c in excluded),
        "graph_s": graph_s,
        "featurize_graph_s": marks.get("featurized", t0) - t0,
        "test_side_s": sum(c["wall_s"] for c in excluded),
        "test_side_stages": [c["label"] for c in excluded],
        "stages_s": run.calls,
        "gpu": gpu,
    }
    return outputs, record


def to_shared(pred: sp.csr_matrix, names: list[str], shared: list[str]) -> sp.csr_matrix:
    """Scores csr (n_docs, len(names)) in the model's label order -> csr (n_docs, len(shared))
    in the shared label index's order (a label the index lacks is dropped)."""
    if names == shared:
        return pred
    pos = {name: i for i, name in enumerate(shared)}
    cols = np.array([pos.get(name, -1) for name in names], dtype=np.int64)
    coo = pred.tocoo()
    keep = cols[coo.col] >= 0
    rows, new_cols = coo.row[keep], cols[coo.col[keep]]
    return sp.csr_matrix((coo.data[keep], (rows, new_cols)), shape=(pred.shape[0], len(shared)))


def save_pred(path: Path, pred: sp.csr_matrix) -> None:
    sp.save_npz(path, sp.csr_matrix(pred, dtype=np.float32), compressed=False)


def score_in_shared(workdir: Path, pred: sp.csr_matrix, names: list[str], name: str) -> dict:
    """``pred`` (in the model's label order ``names``) written to ``workdir/pred-{name}.npz``
    in the shared label index of ``workdir/labels.json``, then scored (``bench_common.score``)."""
    import bench_common  # here: the runner itself needs none of it

    shared = json.loads((workdir / "labels.json").read_text(encoding="utf-8"))
    path = workdir / f"pred-{name}.npz"
    save_pred(path, to_shared(pred, names, shared))
    return bench_common.score(workdir, path)


def timed(fn: Any) -> tuple[Any, float]:
    """``fn()`` and its wall seconds."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def train_and_predict(workdir: Path, outdir: Path, cfg: XmcConfig) -> dict[str, Any]:
    """Warm up, train, predict the test texts; write ``model/`` and ``pred.npz``."""
    X, Y = (sp.load_npz(workdir / f"{n}.npz").tocsr() for n in ("X_train", "Y_train"))
    warmup_s = _ours_warmup(X, Y, cfg)  # numba kernels of the XR rankers, untimed
    del X, Y
    corpus = Corpus(workdir / "corpus")
    outputs, record = train(corpus, cfg)
    model = outputs["model"]
    texts = corpus.read_split("test", ["text"]).column("text")  # read untimed
    pred, predict_s = timed(lambda: model.predict(texts, topk=TOPK))
    again_s = timed(lambda: model.predict(texts, topk=TOPK))[1]
    shared = json.loads((workdir / "labels.json").read_text(encoding="utf-8"))
    names = model.labels.names.to_pylist()
    save_pred(outdir / "pred.npz", to_shared(pred, names, shared))
    full_s = None
    if getattr(model.encoder, "runtime", "torch") != "torch":  # the full-precision P@1 too
        full = model.with_encoder(model.encoder.on_runtime("torch"))
        pred, full_s = timed(lambda: full.predict(texts, topk=TOPK))
        save_pred(outdir / FULL_PRECISION, to_shared(pred, names, shared))
    model.save(outdir / "model")
    evaluation = outputs.get("evaluation")
    return record | {
        "full_precision_predict_s": full_s,
        "predict_s": predict_s,
        "predict_again_s": again_s,
        "n_test": len(texts),
        "family": model.family,
        "labels_identical_to_shared": names == shared,
        "labels_outside_shared": len(set(names) - set(shared)),
        "pipeline_test_metrics": None if evaluation is None else evaluation.values,
        "warmup_s_untimed": warmup_s,
    }


def main(argv: list[str]) -> int:
    """``WORKDIR OUTDIR --config FILE [--set K=V ...]``: run, write ``result.json``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("workdir", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument("--config", type=Path, required=True, help="the method's preset file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args.outdir.mkdir(parents=True, exist_ok=True)
    cfg = XmcConfig.load(args.config, [*args.set, f"work_dir={args.outdir / 'work'}"])
    result = train_and_predict(args.workdir, args.outdir, cfg)
    result |= {"config_file": str(args.config), "overrides": args.set}
    result["config"] = cfg.model_dump(mode="json")
    (args.outdir / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
