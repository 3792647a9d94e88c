"""PECOS's XR-Transformer as a benchmark method, set up like one of our XR-Transformer presets.

``prepare`` writes what ``pecos_xrt_runner.py`` (peers venv) reads into ``WORKDIR/pecos-xrt/``:
the raw texts (the corpus' order, which is the shared features' row order), our matcher's
cluster chain and PECOS's parameters made from our config (``settings``); ``run`` measures one
run. What is made the same, and what cannot be:

- the encoder folder (``encoder.path``, default the packaged all-MiniLM-L6-v2), the token
  length (``encoder.max_length``: PECOS's ``truncate_length``), the batch size, the steps per
  level, the encoder's learning rate, weight decay, warm-up (as steps), gradient clipping, the
  squared hinge loss, the negatives (teacher forcing and/or the previous level's predictions:
  ``tfn``/``man``), the matcher's beam (``only_topk`` of the matcher levels), the bootstrap
  (``linear``: a linear head fitted on the previous level's embeddings; PECOS has none for the
  first level);
- the tree: PECOS fine-tunes on every level of the chain it is given up to
  ``max_match_clusters``; it is given our matcher's tree from its first matcher level down
  (``chain[0]`` joins that level to the root), so both train the same levels of the same
  clusters; its ranker's refined tree is PECOS's own, with our branching and leaf size;
- PECOS has no document subsample (``matcher.train_docs``) and no held-out validation
  documents: it fine-tunes on batches drawn from every training document, and it embeds
  every training document after each level (its bootstrap and its ranker need them);
- PECOS pools with its BERT model's pooler (``[CLS]``), ours as ``encoder.pooling`` says; its
  ranker is PECOS's XR-Linear with its own defaults (teacher-forcing negatives).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import bench_common  # benchmarks/ (the script's folder) is on sys.path
import numpy as np
import scipy.sparse as sp
from families_methods import finish, matcher_tree, skipped

from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.transformer.encoder import default_encoder_path
from xmc_core.transformer.shortlist import matcher_levels

RUNNER = Path(__file__).resolve().with_name("pecos_xrt_runner.py")
TOPK = 20
FOLDER = "pecos-xrt"
DATA_WORKERS = 1
"""PECOS's ``batch_gen_workers`` (its default 4): its texts are tokenized before training, so
data-loader workers only slice tensors, and on 2 cores more would compete with torch's threads.
Not 0: PECOS also passes it as the thread count of a sparse product, and 0 threads stops the
process with a floating-point exception (a division by zero). The worker process's RSS counts
in the process tree's peak."""


def negatives(cfg: XmcConfig) -> str:
    """PECOS's ``negative_sampling`` for our matcher's shortlist settings."""
    m = cfg.matcher
    names = [n for n, on in (("tfn", m.teacher_forcing), ("man", m.matcher_negatives)) if on]
    return "+".join(names) or "tfn"


def settings(cfg: XmcConfig) -> dict[str, Any]:
    """PECOS's ``train_params``, ``pred_params`` and keywords for our ``cfg``."""
    m, tree = cfg.matcher, cfg.tree
    cpu = m.device == "cpu"
    matcher_train = {
        "model_shortcut": str(cfg.encoder.path or default_encoder_path()),
        "negative_sampling": negatives(cfg),
        "loss_function": "squared-hinge",
        "bootstrap_method": "linear" if m.bootstrap else "no-bootstrap",
        "batch_size": m.batch_size,
        "batch_gen_workers": DATA_WORKERS,
        "max_steps": m.steps_per_level,
        "learning_rate": m.encoder_lr,
        "weight_decay": m.weight_decay,
        "warmup_steps": round(m.warmup_fraction * m.steps_per_level),
        "max_grad_norm": m.grad_clip,
        "logging_steps": 10,
        "save_steps": m.steps_per_level,
        "use_gpu": not cpu,
    }
    matcher_pred = {"only_topk": m.beam_size, "truncate_length": cfg.encoder.max_length}
    indexer = {"nr_splits": tree.branching, "max_leaf_size": tree.max_leaf_size}
    return {
        "train_params": {
            "preliminary_indexer_params": indexer,
            "refined_indexer_params": indexer,
            "matcher_params_chain": matcher_train,
            "max_match_clusters": m.max_clusters,
        },
        "pred_params": {"matcher_params_chain": matcher_pred},
        "train_kwargs": {"threads": os.cpu_count() or 1},
        "predict_kwargs": {
            "only_topk": TOPK, "batch_size": m.embed_batch_size, "use_gpu": not cpu,
            "batch_gen_workers": DATA_WORKERS, "threads": os.cpu_count() or 1,
        },
    }  # fmt: skip


def chain_from(tree: Any, first: int) -> list[sp.csr_matrix]:
    """``tree.C`` from level ``first`` down, the level joined to the root (PECOS's chain)."""
    top = sp.csr_matrix(np.ones((tree.C[first].shape[0], 1), dtype=np.float32))
    return [top, *tree.C[first + 1 :]]


def prepare(workdir: Path, cfg: XmcConfig) -> dict[str, Any]:
    """Write ``WORKDIR/pecos-xrt/`` (texts, chain, settings); return the context of ``run``."""
    folder = workdir / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    tree = matcher_tree(workdir, cfg)
    levels = matcher_levels(tree, cfg.matcher)
    chain = chain_from(tree, levels[0])
    sizes = [c.shape[0] for c in chain]
    trained = sum(k <= cfg.matcher.max_clusters for k in sizes)
    if trained != len(levels):
        why = f"PECOS would fine-tune {trained} levels of {sizes}, ours {len(levels)}"
        return {"skip": why}
    for i, c in enumerate(chain):
        sp.save_npz(folder / f"chain-{i}.npz", c, compressed=False)
    corpus = Corpus(workdir / "corpus")
    for split in ("train", "test"):
        texts = corpus.read_split(split, ["text"]).column("text").to_pylist()
        (folder / f"texts-{split}.json").write_text(json.dumps(texts), encoding="utf-8")
    made = settings(cfg)
    (folder / "settings.json").write_text(json.dumps(made, indent=1), encoding="utf-8")
    return {
        "settings": made, "matcher_tree_sizes": tree.level_sizes(), "matcher_levels": levels,
        "chain_sizes": sizes,
    }  # fmt: skip


def run(workdir: Path, python: str, context: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One measured ``pecos_xrt_runner.py`` run on the prepared ``workdir``."""
    if "skip" in context:
        return skipped(context["skip"])
    outdir, log = workdir / "out-pecos-xrt", workdir / "pecos-xrt.log"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [python, str(RUNNER), str(workdir), str(outdir)]
    result = finish(cmd, workdir, outdir, log, timeout_s)
    result["xmc_core_digest"] = bench_common.xmc_digest()
    return result


if __name__ == "__main__":
    sys.exit("run benchmarks/xr_transformer.py or benchmarks/families.py")
