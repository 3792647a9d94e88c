"""The diagnostics task: k-curves, recall by label frequency, beam recall and ranker loss per
tree level (train and test), the matcher's loss history, and their plots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from prefect import get_run_logger, task

from tasks.caching import artifact_dir, cache_key, fp, produce, stage_key
from xmc_core import diagnostics, plots
from xmc_core.artifacts import load_arrays, read_meta
from xmc_core.atomic import write_json
from xmc_core.config import EvalConfig
from xmc_core.features.split_features import SplitFeatures
from xmc_core.fingerprint import closure_fingerprint
from xmc_core.linear.model import XRLinearModel
from xmc_core.metrics import recall_by_frequency

TASK_OPTIONS = {"persist_result": True, "result_serializer": "json"}
DIAGNOSTICS_FILE = "diagnostics.json"
PLOTS_DIR = "plots"
MAX_DOCS = 20_000
"""Documents per split the diagnostics look at (a seeded sample beyond it)."""
MIN_KMAX = 10
"""The k-curves reach at least this k (or the largest ``eval.ks``)."""


def _diagnose_key(
    model_dir: str, train_dir: str, test_dir: str, eval_cfg: EvalConfig, work_dir: str,
    matcher_checkpoints: list[str] | None = None, max_docs: int = MAX_DOCS,
) -> str:  # fmt: skip
    checkpoints = [fp(Path(c)) for c in matcher_checkpoints or []]
    return stage_key(
        "diagnostics", fp(model_dir), fp(train_dir), fp(test_dir), eval_cfg.fingerprint(),
        checkpoints, max_docs, code=closure_fingerprint(__name__),
    )  # fmt: skip


@task(
    name="diagnose",
    task_run_name="diagnose",
    cache_key_fn=cache_key("diagnostics", _diagnose_key),
    **TASK_OPTIONS,
)
def diagnose(
    model_dir: str, train_dir: str, test_dir: str, eval_cfg: EvalConfig, work_dir: str,
    matcher_checkpoints: list[str] | None = None, max_docs: int = MAX_DOCS,
) -> str:  # fmt: skip
    """Diagnostics of a trained model -> folder with ``diagnostics.json`` and ``plots/*.png``.

    ``model_dir``: an ``XmcModel`` folder; ``train_dir``/``test_dir``: ``SplitFeatures``
    folders holding the model's input (for XR-Transformer the embedded splits);
    ``matcher_checkpoints``: XR-Transformer's matcher level folders (their loss history), or
    None; ``max_docs``: documents per split looked at (seeded sample beyond it).
    """
    log = get_run_logger()
    key = _diagnose_key(
        model_dir, train_dir, test_dir, eval_cfg, work_dir, matcher_checkpoints, max_docs
    )
    with produce(work_dir, "diagnostics", key, log) as tmp:
        if tmp is not None:
            start = time.perf_counter()
            report = compute_diagnostics(
                model_dir, {"train": train_dir, "test": test_dir}, eval_cfg,
                matcher_checkpoints, max_docs,
            )  # fmt: skip
            report["plots"] = write_plots(report, tmp / PLOTS_DIR)
            write_json(tmp / DIAGNOSTICS_FILE, report)
            log.info(
                "diagnostics in %.1f s: beam recall %s, loss %s",
                time.perf_counter() - start, report["beam_recall"], report["training_loss"],
            )  # fmt: skip
    return str(artifact_dir(work_dir, "diagnostics", key))


def load_ranker(model_dir: str | Path) -> tuple[XRLinearModel, np.ndarray]:
    """The ranker and training label counts (n_labels,) of an ``XmcModel`` folder, without its
    encoder: the splits given to :func:`diagnose` already hold the model's features."""
    folder = Path(model_dir)
    read_meta(folder, "XmcModel")
    counts = load_arrays(folder / "label_counts.npz")["counts"]
    return XRLinearModel.load(folder / "ranker"), counts


def compute_diagnostics(
    model_dir: str,
    split_dirs: dict[str, str],
    eval_cfg: EvalConfig,
    matcher_checkpoints: list[str] | None,
    max_docs: int,
) -> dict[str, Any]:
    """Every diagnostic as JSON-ready data (see :func:`diagnose`)."""
    ranker, counts = load_ranker(model_dir)
    beam_size = ranker.predict_cfg.beam_size
    kmax = max(MIN_KMAX, *eval_cfg.ks)
    k_recall = max(eval_cfg.ks)
    out: dict[str, Any] = {
        "beam_size": beam_size,
        "loss": ranker.ranker.loss,
        "kmax": kmax,
        "recall_k": k_recall,
        "n_docs": {},
        "k_curves": {},
        "recall_by_frequency": {},
        "beam_recall": {},
        "training_loss": {},
    }
    for split, folder in split_dirs.items():
        feats = SplitFeatures.load(folder)
        rows = _sample(feats.X.shape[0], max_docs)
        X, Y = feats.X[rows], feats.Y[rows]
        scores = ranker.predict(X, topk=kmax)
        out["n_docs"][split] = len(rows)
        out["k_curves"][split] = diagnostics.k_curves(Y, scores, kmax)
        out["recall_by_frequency"][split] = recall_by_frequency(Y, scores, counts, k_recall)
        out["beam_recall"][split] = diagnostics.beam_recall_per_level(ranker, X, Y, beam_size)
        out["training_loss"][split] = diagnostics.training_loss_per_level(ranker, X, Y)
    history = diagnostics.matcher_loss_history(matcher_checkpoints or [])
    out["matcher_loss"] = {str(level): points for level, points in history.items()}
    return out


def write_plots(report: dict[str, Any], folder: Path) -> dict[str, str]:
    """The PNGs of a diagnostics report under ``folder``: ``{plot name: file name}``."""
    written = [
        plots.plot_k_curves(report["k_curves"], folder / "k_curves.png"),
        plots.plot_recall_by_frequency(
            report["recall_by_frequency"], report["recall_k"], folder / "recall_by_frequency.png"
        ),
        plots.plot_beam_recall(
            report["beam_recall"], report["beam_size"], folder / "beam_recall.png"
        ),
        plots.plot_training_loss(
            report["training_loss"], report["loss"], folder / "training_loss.png"
        ),
    ]
    if report["matcher_loss"]:
        history = {int(level): points for level, points in report["matcher_loss"].items()}
        written.append(plots.plot_matcher_loss(history, folder / "matcher_loss.png"))
    return {path.stem: path.name for path in written}


def _sample(n_docs: int, max_docs: int) -> np.ndarray:
    """All rows, or ``max_docs`` of them drawn with a fixed seed, sorted."""
    if n_docs <= max_docs:
        return np.arange(n_docs)
    return np.sort(np.random.default_rng(0).choice(n_docs, max_docs, replace=False))
