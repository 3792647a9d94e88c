"""One timed PECOS XR-Transformer run (``pecos.xmc.xtransformer``), in its own process (peers venv).

Usage (started by ``benchmarks/pecos_xrt.py``, with the peers venv's interpreter)::

    python benchmarks/pecos_xrt_runner.py WORKDIR OUTDIR

``WORKDIR`` holds the shared features (``X_train.npz``, ``Y_train.npz``, ``X_test.npz``: the TF-IDF
every method gets) and ``pecos-xrt/``, written by ``pecos_xrt.prepare``: ``texts-train.json`` and
``texts-test.json`` (the raw texts, in the feature rows' order), ``chain-<i>.npz`` (the matcher's
cluster chain, ours: PECOS fine-tunes on every level of it) and ``settings.json``
(``train_params``, ``pred_params`` and the prediction keywords, as PECOS's ``from_dict`` reads
them). Training is ``XTransformer.train`` with those; prediction is ``XTransformer.predict`` on
the test texts and TF-IDF (top ``TOPK``). Stages are timed by wrapping PECOS's own calls: each
matcher level (``TransformerMatcher.train``), inside it the fine-tuning loop
(``fine_tune_encoder``) and the encoder passes (``TransformerMatcher.predict``: embeddings and
cluster predictions of the training texts), the refined tree (``Indexer.gen``, on
``LabelEmbeddingFactory.pifa`` of TF-IDF and embedding), and the ranker (``XLinearModel.train``).
Writes ``OUTDIR/result.json``, ``OUTDIR/pred.npz`` (csr (n_test, n_labels)) and ``OUTDIR/model/``.
Only numpy, scipy, torch and PECOS are imported.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import scipy.sparse as sp

TOPK = 20


def cpu_s() -> float:
    """User + system CPU seconds of this process (all its threads)."""
    t = os.times()
    return t.user + t.system


@contextmanager
def timed_calls(targets: dict[str, tuple[Any, str]], calls: list[dict[str, Any]]) -> Iterator[None]:
    """While inside, every call of ``getattr(owner, attr)`` appends ``{"name", "wall_s",
    "cpu_s"}`` to ``calls`` (``targets``: name -> (owner, attr)); originals restored on exit."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.perf_counter(), cpu_s()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append(
                    {"name": name, "wall_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0}
                )

        return timed

    with ExitStack() as stack:
        for name, (owner, attr) in targets.items():
            stack.enter_context(mock.patch.object(owner, attr, wrap(name, getattr(owner, attr))))
        yield


def stage_targets() -> dict[str, tuple[Any, str]]:
    """PECOS's calls inside ``XTransformer.train`` that are timed."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel
    from pecos.xmc.xtransformer.matcher import TransformerMatcher

    return {
        "matcher_level": (TransformerMatcher, "train"),
        "fine_tune_loop": (TransformerMatcher, "fine_tune_encoder"),
        "encoder_pass": (TransformerMatcher, "predict"),
        "label_features": (LabelEmbeddingFactory, "pifa"),
        "refined_tree": (Indexer, "gen"),
        "ranker": (XLinearModel, "train"),
    }


def stage_totals(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per stage name (summed), and each matcher level's own seconds in order."""
    totals: dict[str, float] = {}
    for call in calls:
        totals[call["name"]] = totals.get(call["name"], 0.0) + call["wall_s"]
    levels = [c["wall_s"] for c in calls if c["name"] == "matcher_level"]
    loops = [c["wall_s"] for c in calls if c["name"] == "fine_tune_loop"]
    return {"totals_s": totals, "matcher_level_s": levels, "fine_tune_loop_s": loops}


def load_inputs(workdir: Path) -> dict[str, Any]:
    """Features, texts, the cluster chain and the settings of ``pecos_xrt.prepare``."""
    folder = workdir / "pecos-xrt"
    X, Y, X_test = (
        sp.load_npz(workdir / f"{n}.npz").tocsr() for n in ("X_train", "Y_train", "X_test")
    )
    texts = {
        s: json.loads((folder / f"texts-{s}.json").read_text(encoding="utf-8"))
        for s in ("train", "test")
    }
    n_chain = len(list(folder.glob("chain-*.npz")))
    chain = [sp.load_npz(folder / f"chain-{i}.npz").tocsc() for i in range(n_chain)]
    settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    if len(texts["train"]) != X.shape[0] or len(texts["test"]) != X_test.shape[0]:
        raise RuntimeError(f"{folder}: text and feature row counts differ")
    f32 = np.float32
    return {
        "X": X.astype(f32), "Y": Y.astype(f32), "X_test": X_test.astype(f32), "texts": texts,
        "chain": chain, "settings": settings,
    }  # fmt: skip


def train_and_predict(workdir: Path, outdir: Path) -> dict[str, Any]:
    """Train, predict, save; returns the result record."""
    import torch
    from pecos.utils.cluster_util import ClusterChain
    from pecos.xmc.xtransformer.model import XTransformer
    from pecos.xmc.xtransformer.module import MLProblemWithText

    d = load_inputs(workdir)
    s = d["settings"]
    train_params = XTransformer.TrainParams.from_dict(s["train_params"], recursive=True)
    pred_params = XTransformer.PredParams.from_dict(s["pred_params"], recursive=True)
    prob = MLProblemWithText(d["texts"]["train"], d["Y"], X_feat=d["X"])
    calls: list[dict[str, Any]] = []
    t0, c0 = time.perf_counter(), cpu_s()
    with timed_calls(stage_targets(), calls):
        model = XTransformer.train(
            prob, clustering=ClusterChain(d["chain"]), train_params=train_params,
            pred_params=pred_params, **s["train_kwargs"],
        )  # fmt: skip
    train_s, train_cpu_s = time.perf_counter() - t0, cpu_s() - c0
    train_stages = stage_totals(calls)
    calls.clear()
    t0 = time.perf_counter()
    with timed_calls(stage_targets(), calls):
        pred = model.predict(d["texts"]["test"], X_feat=d["X_test"], **s["predict_kwargs"])
    predict_s = time.perf_counter() - t0
    model.save(str(outdir / "model"))
    pred = sp.csr_matrix(pred, dtype=np.float32)
    sp.save_npz(outdir / "pred.npz", pred, compressed=False)
    return {
        "train_s": train_s, "train_cpu_s": train_cpu_s, "predict_s": predict_s,
        "n_test": d["X_test"].shape[0], "stages": train_stages,
        "predict_stages": stage_totals(calls),
        "chain_sizes": [c.shape[0] for c in d["chain"]],
        "torch_threads": torch.get_num_threads(), "settings": s,
    }  # fmt: skip


def main(argv: list[str]) -> int:
    """``WORKDIR OUTDIR``: run, write ``result.json``."""
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    workdir, outdir = map(Path, argv)
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    outdir.mkdir(parents=True, exist_ok=True)
    result = train_and_predict(workdir, outdir)
    (outdir / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
