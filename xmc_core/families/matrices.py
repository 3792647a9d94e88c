"""Matrices as the featurized splits: the source side of a training run on given features.

``xmc train --x X.npz --y Y.npz`` (and :class:`~xmc_core.model.estimator.XmcClassifier` given a
matrix) replaces the featurize graph by :func:`matrix_graph`, whose outputs have the same names
(``vectorizer``, ``label_index``, ``label_features``, ``train``, ``test``); the family's own
stages (tree, rankers, evaluation) then run unchanged. The user's features are used as they
are (no TF-IDF); the label features are PIFA over them. The calibration carve holds training
rows out by their ids (``row-N``, as :func:`~xmc_core.corpus.carve.held_out` does for a
corpus's documents): ``held``, which the model is calibrated on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.config import CalibrationConfig, LabelFeaturesConfig, XmcConfig
from xmc_core.corpus.carve import carve_share, held_out
from xmc_core.errors import InputError
from xmc_core.families.calibrate import check_carve
from xmc_core.families.configured import trained_families
from xmc_core.features.label_features import (
    LabelFeatures,
    concat_label_features,
    pifa,
    pifa_partial,
)
from xmc_core.features.labels import LabelIndex
from xmc_core.features.matrices import (
    FeatureMatrix,
    GivenFeatures,
    LabelMatrix,
    LabelNames,
    MatrixFiles,
    check_matrix_files,
)
from xmc_core.features.split_features import SplitFeatures
from xmc_core.stages.graph import Runner, Stage


def row_ids(n: int) -> pa.Array:
    """Document ids of matrix rows: ``row-0``, ``row-1``, ... (0-based, as scipy's rows)."""
    return pa.array([f"row-{i}" for i in range(n)], type=pa.large_string())


def matrix_split(
    X: FeatureMatrix | None, Y: LabelMatrix | None, n_features: int, n_labels: int
) -> SplitFeatures:
    """One split from its matrices (both None: an empty split of that width)."""
    if X is None or Y is None:
        empty = sp.csr_matrix((0, n_features), dtype=np.float32)
        return SplitFeatures(empty, sp.csr_matrix((0, n_labels), dtype=np.float32), row_ids(0))
    return SplitFeatures(X.X, Y.Y, row_ids(X.X.shape[0]))


def label_index(names: LabelNames | None, n_labels: int) -> LabelIndex:
    """The label names in Y's column order; without names the column numbers ``0``, ``1``..."""
    return LabelIndex(names.names if names is not None else [str(j) for j in range(n_labels)])


def given_features(n_features: int) -> GivenFeatures:
    """The vectorizer stand-in of a model trained on features of width ``n_features``."""
    return GivenFeatures(n_features)


def label_pifa(train: SplitFeatures, cfg: LabelFeaturesConfig) -> LabelFeatures:
    """PIFA over the training features: csr (n_labels, n_features), computed as the featurize
    graph's ``build_label_features`` does for ``kind: pifa`` (one block, weight 1), so the same
    X and Y give the same label features bit for bit."""
    return LabelFeatures(
        concat_label_features([pifa([pifa_partial(train.X, train.Y)])], [1.0]), cfg.kind
    )


def carve_rows(train: SplitFeatures, cfg: CalibrationConfig, held: bool) -> SplitFeatures:
    """The training rows the calibration carve holds out (``held``) or keeps, in order."""
    n = train.X.shape[0]
    share = carve_share(n, cfg.fraction, cfg.max_docs)
    out = held_out(train.doc_ids.to_pylist(), share, cfg.seed)
    return train.take(np.flatnonzero(out if held else ~out))


SPLIT = Stage(
    "matrix-split", matrix_split, SplitFeatures, {"X": FeatureMatrix, "Y": LabelMatrix},
    describe=lambda s: f"X {s.X.shape} ({s.X.nnz} nonzeros), Y {s.Y.shape}",
)  # fmt: skip
LABELS = Stage(
    "matrix-labels", label_index, LabelIndex, {"names": LabelNames},
    describe=lambda i: f"{len(i)} labels",
)  # fmt: skip
VECTORIZER = Stage("given-features", given_features, GivenFeatures)
CARVE_ROWS = Stage(
    "matrix-carve", carve_rows, SplitFeatures, {"train": SplitFeatures},
    describe=lambda s: f"{s.X.shape[0]} training rows",
)  # fmt: skip
LABEL_FEATURES = Stage(
    "matrix-label-features", label_pifa, LabelFeatures, {"train": SplitFeatures},
    describe=lambda z: f"{z.kind}: Z {z.z.shape}, {z.z.nnz} nonzeros",
)  # fmt: skip


def check_matrix_run(files: MatrixFiles, cfg: XmcConfig) -> tuple[int, int]:
    """Refuse, before any work, what a run on matrices cannot do: a family that needs raw
    text, label features that need label texts, and bad files (:func:`check_matrix_files`).
    Returns (n_features, n_labels)."""
    for member, family in trained_families(cfg):
        if family.needs_text:
            raise InputError(
                None,
                f"{member.key}.kind={family.name} needs raw text, and feature matrices hold none",
                f"set {member.key}.kind=xr_linear, or train on a text dataset: xmc train "
                "DATASET MODEL",
            )
        kind, where = member.cfg.label_features.kind, ""
        if member.cfg.label_features != cfg.label_features:  # a member's own
            where = f" (in {member.key}.set)"
        if kind != "pifa":
            raise InputError(
                None,
                f"label_features.kind={kind}{where} needs label texts, and feature matrices "
                "hold none",
                f"set label_features.kind=pifa{where}",
            )
    return check_matrix_files(files)


def matrix_graph(run: Runner, files: MatrixFiles, cfg: XmcConfig) -> dict[str, Any]:
    """The featurize graph's outputs from matrix files (checked first: :func:`check_matrix_run`);
    returns the handles ``vectorizer``, ``label_index``, ``label_features``, ``train``,
    ``test`` (an empty split when no test files are given), and ``held`` when the calibration
    carve holds rows out (:func:`carved_rows`; ``train`` is then the rest)."""
    d, n_labels = check_matrix_run(files, cfg)
    names = None if files.label_names is None else run.source(LabelNames, str(files.label_names))
    sources = {"train": (files.x, files.y), "test": (files.x_test, files.y_test)}
    splits = {}
    for split, (x, y) in sources.items():
        X = None if x is None else run.source(FeatureMatrix, str(x))
        Y = None if y is None else run.source(LabelMatrix, str(y))
        splits[split] = run(SPLIT, label=f"read-{split}", X=X, Y=Y, n_features=d, n_labels=n_labels)
    held = carved_rows(run, splits["train"], cfg, Path(files.x))
    if held is not None:
        splits["train"] = run(CARVE_ROWS, label="carve-kept", train=splits["train"],
                              cfg=cfg.calibration, held=False)  # fmt: skip
    return {
        "vectorizer": run(VECTORIZER, n_features=d),
        "label_index": run(LABELS, names=names, n_labels=n_labels),
        "label_features": run(LABEL_FEATURES, train=splits["train"], cfg=cfg.label_features),
        **splits,
        **({} if held is None else {"held": held}),
    }


def carved_rows(run: Runner, train: Any, cfg: XmcConfig, x_file: Path) -> Any:
    """The handle of the training rows held out to calibrate on, or None (no carve: too few
    rows for ``calibration.min_docs``, or calibration off; a threshold without a carve is an
    error naming ``x_file``: :func:`~xmc_core.families.calibrate.check_carve`)."""
    if not check_carve(run.value(train).X.shape[0], cfg, x_file):
        return None
    return run(CARVE_ROWS, label="carve-held", train=train, cfg=cfg.calibration, held=True)
