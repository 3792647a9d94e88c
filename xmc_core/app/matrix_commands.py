"""``xmc train|predict|evaluate --x X.npz [--y Y.npz]``: the PECOS-style entry points, on
feature matrices (scipy sparse ``.npz``) instead of a dataset folder or texts."""

from __future__ import annotations

import time
from pathlib import Path

import scipy.sparse as sp

from xmc_core.app.commands import check_threshold, write_predictions
from xmc_core.app.summary import RunSummary
from xmc_core.config import XmcConfig
from xmc_core.errors import InputError
from xmc_core.evaluation.metrics import format_metrics
from xmc_core.families.matrices import check_matrix_run, row_ids
from xmc_core.families.train import train_matrices_in_process
from xmc_core.features.matrices import (
    FeatureMatrix,
    LabelMatrix,
    MatrixFiles,
    check_model_input,
    npz_shape,
)
from xmc_core.features.split_features import SplitFeatures
from xmc_core.model.xmc_model import XmcModel, save_model_folder
from xmc_core.storage.folder_swap import check_dir_target


def train(files: MatrixFiles, model_dir: Path, cfg: XmcConfig, overwrite: bool = False) -> dict:
    """Train the configured family (XR-Linear) on ``files``; save the model folder atomically
    and print the test metrics when test matrices are given. Every check on the files and the
    target folder runs before any training work. Returns the test metrics (``{}``: no test)."""
    check_dir_target(Path(model_dir), overwrite)
    check_matrix_run(files, cfg)
    start = time.perf_counter()
    outputs = train_matrices_in_process(files, cfg)
    has_test = files.x_test is not None
    metrics = outputs["evaluation"].values if has_test else {}
    save_model_folder(
        model_dir, outputs["model"], cfg, {"test": metrics} if has_test else {}, overwrite
    )
    n_train, n_labels = npz_shape(files.y, "--y")
    n_test = npz_shape(files.y_test, "--y-test")[0] if files.y_test is not None else 0
    summary = RunSummary(
        family=cfg.model.kind, dataset=str(files.x), metrics=metrics, model=str(model_dir),
        seconds=time.perf_counter() - start,
        data=f"{n_train} train / {n_test} test rows, {n_labels} labels (feature matrices)",
        extra={} if has_test else {"test": "none (give --x-test and --y-test for metrics)"},
        predict_args="--x X.npz out.npz",
    )  # fmt: skip
    print(summary.format())
    return metrics


def read_features(model: XmcModel, path: Path, flag: str = "--x") -> sp.csr_matrix:
    """The checked feature matrix csr (n_docs, n_features) of ``path`` for ``model`` (its
    width is checked from the header, before the matrix is read)."""
    n_docs, width = npz_shape(path, flag)
    check_model_input(model.vectorizer.n_features, model.encoder.uses_text, (n_docs, width), path)
    return FeatureMatrix.load(path).X


def predict(
    model_dir: Path, x: Path, output: Path, beam: int | None, topk: int | None,
    threshold: float | None = None,
) -> int:  # fmt: skip
    """Predict the rows of ``x``: ``output`` ``.npz`` gets the score matrix csr (n_docs,
    n_labels), any other path (``-``: stdout) JSON lines ``{"doc_id": "row-N", "labels",
    "scores"}`` (and ``"probabilities"``: :func:`~xmc_core.app.commands.predict`). Returns the
    number of documents."""
    model = XmcModel.load(model_dir)
    check_threshold(model, threshold, output)
    X = read_features(model, x)
    scores = model.predict_features(X, topk, beam)
    batches = iter([(row_ids(X.shape[0]).to_pylist(), scores)])
    return write_predictions(output, model, batches, threshold)


def evaluate(
    model_dir: Path, x: Path, y: Path, cfg: XmcConfig, beam: int | None, topk: int | None
) -> dict:
    """P@k, nDCG@k, R@k, PSP@k of a saved model on feature and label matrices; printed and
    returned."""
    model = XmcModel.load(model_dir)
    X = read_features(model, x)
    n_y, n_labels = npz_shape(y, "--y")
    if n_y != X.shape[0]:
        raise InputError(
            y, f"{n_y} rows, but {x} has {X.shape[0]}",
            "give one label row per document of X, in the same order",
        )  # fmt: skip
    if n_labels != len(model.labels):
        raise InputError(
            y, f"{n_labels} columns (labels), but the model has {len(model.labels)} labels",
            "use the training label columns",
        )  # fmt: skip
    feats = SplitFeatures(X, LabelMatrix.load(y).Y, row_ids(X.shape[0]))
    metrics = model.evaluate(feats, cfg.eval, beam_size=beam, topk=topk)
    print(format_metrics(metrics))
    return metrics
