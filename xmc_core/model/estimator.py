"""``XmcClassifier``: xmc from Python, shaped like a scikit-learn estimator.

``fit(X, Y)`` on a feature matrix csr (n_docs, n_features) and a label matrix csr (n_docs,
n_labels), or ``fit(texts, labels)`` on raw texts and label lists; ``predict`` returns each
document's best labels with their scores. No training code of its own: a matrix goes through
the same graph as ``xmc train --x`` (:func:`~xmc_core.families.train.train_matrices_in_process`),
texts through the one of ``xmc train DATASET`` (a dataset folder written in the work folder).

Example::

    clf = XmcClassifier(tree__max_leaf_size=4).fit(X, Y, label_names=["a", "b", "c"])
    clf.predict(X[:2], topk=2)  # [[("a", 0.97), ("c", 0.02)], [("b", 0.99), ("a", 0.01)]]
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from xmc_core.config import XmcConfig
from xmc_core.config_io import apply_override
from xmc_core.errors import InputError
from xmc_core.features.matrices import (
    LabelNames,
    MatrixFiles,
    check_feature_values,
    check_label_values,
    check_model_input,
    csr_from_memory,
)
from xmc_core.features.split_features import SplitFeatures
from xmc_core.model.estimator_params import as_overrides, config_params, params_repr
from xmc_core.model.xmc_model import XmcModel, save_model_folder

Features = sp.spmatrix | sp.sparray | np.ndarray
"""Documents as features: (n_docs, n_features), sparse (CSR best) or dense."""
Texts = Sequence[str]
"""Documents as raw texts (a model trained on texts)."""

CONFIG_FILE = "config.yaml"


class XmcClassifier:
    """Extreme multi-label classifier (XR-Linear by default).

    ``config``: an :class:`~xmc_core.config.XmcConfig`, a YAML file (e.g. a preset in
    ``configs/``) or None (the defaults); ``overrides``: config keys as ``section__key=value``
    (``tree__max_leaf_size=16``, ``ranker__loss="logistic"``), applied on top; ``work_dir``: the
    working folder of the runs (None: a temporary folder per ``fit``, removed after it).
    Fitted attributes: ``model_`` (the :class:`~xmc_core.model.xmc_model.XmcModel`) and
    ``config_`` (the config it was trained with).

    A scikit-learn estimator by its protocol (sklearn is not imported): ``get_params`` /
    ``set_params`` with the config's keys as ``section__key``, ``score`` (P@1 by default), so
    ``sklearn.base.clone``, ``Pipeline`` and ``GridSearchCV`` work on it.
    """

    def __init__(
        self,
        config: XmcConfig | str | Path | None = None,
        *,
        work_dir: str | Path | None = None,
        **overrides: Any,
    ) -> None:
        self.config = config
        self.work_dir = work_dir
        self.overrides = overrides

    def _config(self, work_dir: Path | None = None) -> XmcConfig:
        """The configuration of a run: ``config`` with the overrides, in ``work_dir`` (None: the
        config's own)."""
        sets = as_overrides(self.overrides)
        if work_dir is not None:
            sets.append(f"work_dir={json.dumps(str(work_dir))}")
        if not isinstance(self.config, XmcConfig):
            return XmcConfig.load(self.config, sets)
        raw = self.config.model_dump(mode="json")
        for item in sets:
            apply_override(raw, item)
        return XmcConfig.model_validate(raw)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """scikit-learn's parameters: the constructor's arguments (``config``, ``work_dir`` and
        the overrides given: what ``sklearn.base.clone`` rebuilds an estimator from), and with
        ``deep`` every other key of the config too, as ``section__key`` (its value in ``config``
        with the overrides; YAML's types: a path as a string)."""
        params: dict[str, Any] = {"config": self.config, "work_dir": self.work_dir}
        if deep:
            params.update(config_params(self._config()))
        params.update(self.overrides)
        return params

    def set_params(self, **params: Any) -> XmcClassifier:
        """Set ``config``, ``work_dir`` or config keys as ``section__key`` (what ``GridSearchCV``
        and ``Pipeline.set_params`` call); returns self. An unknown key or a bad value is the
        config's error naming it, raised here and changing nothing."""
        config = params.pop("config", self.config)
        work_dir = params.pop("work_dir", self.work_dir)
        changed = XmcClassifier(config, work_dir=work_dir, **{**self.overrides, **params})
        changed._config()  # checks every key and value now, not at fit
        self.config, self.work_dir, self.overrides = config, work_dir, changed.overrides
        return self

    def __repr__(self) -> str:
        """scikit-learn's style: the arguments that differ from the defaults, e.g.
        ``XmcClassifier(tree__max_leaf_size=4)``."""
        return params_repr(type(self).__name__, self.config, self.work_dir, self.overrides)

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags, read by its meta-estimators (``GridSearchCV``, ``Pipeline``):
        sparse or text input, a target required. Not tagged a classifier: sklearn's classifier
        paths expect one class per row (stratified folds refuse label lists and label matrices
        fold as ``KFold`` anyway). Only scikit-learn calls this, so only then is it imported."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=True),
            input_tags=InputTags(sparse=True, string=True),
        )

    def fit(
        self,
        X: Features | Texts,
        Y: Features | Sequence[Sequence[str]],
        label_names: Sequence[str] | None = None,
    ) -> XmcClassifier:
        """Train on features ``X`` (n_docs, n_features) and labels ``Y`` (n_docs, n_labels), 0/1
        (``label_names``: one per column of Y; default ``"0"``, ``"1"``, ...), or on raw texts
        ``X`` and label lists ``Y`` (one list of names per text). Returns self."""
        with tempfile.TemporaryDirectory(prefix="xmc-fit-") as tmp:
            work = Path(self.work_dir) if self.work_dir is not None else Path(tmp) / "work"
            cfg = self._config(work)
            inputs = Path(tmp) / "inputs"
            inputs.mkdir()
            if _is_texts(X):
                outputs = _fit_texts(list(X), Y, inputs, cfg)  # type: ignore[arg-type]
            else:
                outputs = _fit_matrices(X, Y, label_names, inputs, cfg)  # type: ignore[arg-type]
        self.model_: XmcModel = outputs["model"]
        self.config_: XmcConfig = cfg
        return self

    def predict_scores(
        self, X: Features | Texts, topk: int | None = None, beam_size: int | None = None
    ) -> sp.csr_matrix:
        """Scores csr (n_docs, n_labels): at most ``topk`` per row (None: the config's
        ``predict.topk``), ``beam_size`` (None: ``predict.beam_size``); the same matrix ``xmc
        predict MODEL --x X.npz OUT.npz`` writes."""
        model = self._fitted()
        if _is_texts(X):
            return model.predict(list(X), topk, beam_size)  # type: ignore[arg-type]
        return model.predict_features(self._features(X), topk, beam_size)

    def predict_proba(
        self, X: Features | Texts, topk: int | None = None, beam_size: int | None = None
    ) -> sp.csr_matrix:
        """Probabilities csr (n_docs, n_labels): the chance that each of a document's ``topk``
        best labels (as :meth:`predict_scores`) is relevant; an uncalibrated model (trained
        on too few documents for the carve, ``calibration.min_docs``) is an error."""
        model = self._fitted()
        model.calibrated()  # before any prediction
        return model.probabilities(self.predict_scores(X, topk, beam_size))

    def predict(
        self, X: Features | Texts, topk: int = 5, beam_size: int | None = None
    ) -> list[list[tuple[str, float]]]:
        """Each document's ``topk`` best ``(label name, score)`` pairs, best first."""
        return self._fitted().top_labels(self.predict_scores(X, topk, beam_size))

    def evaluate(
        self, X: Features | Texts, Y: Features | Sequence[Sequence[str]]
    ) -> dict[str, float]:
        """P@k, nDCG@k, R@k, PSP@k (fractions; k from ``eval.ks``) on features ``X`` and label
        matrix ``Y`` (n_docs, n_labels), or on texts and label lists (unknown labels: misses)."""
        model = self._fitted()
        if _is_texts(X):
            texts = model.capped(list(X))  # type: ignore[arg-type]
            Yc, _ = model.labels.encode(pa.array([list(y) for y in Y], pa.list_(pa.string())))
            feats = model.features(model.vectorizer.transform(texts), texts)
        else:
            feats = self._features(X)
            Yc = csr_from_memory(Y, "Y")  # type: ignore[arg-type]
            check_label_values(Yc, "Y")
            if Yc.shape != (feats.shape[0], len(model.labels)):
                raise InputError(
                    None, f"Y is {Yc.shape}; ({feats.shape[0]}, {len(model.labels)}) expected",
                    "give one row per document and one column per label of the model",
                )  # fmt: skip
        split = SplitFeatures(feats, Yc, pa.array([str(i) for i in range(feats.shape[0])]))
        return model.evaluate(split, self.config_.eval)

    def score(
        self,
        X: Features | Texts,
        Y: Features | Sequence[Sequence[str]],
        metric: str | None = None,
    ) -> float:
        """One metric of :meth:`evaluate` on ``X`` and ``Y``, higher is better: ``metric`` (e.g.
        ``"nDCG@5"``), None: the config's ``registry.metric``, the one the registry's gate judges
        a model by (P@1 by default; set ``registry__metric`` to make ``GridSearchCV`` pick by
        another)."""
        metrics = self.evaluate(X, Y)
        name = metric if metric is not None else self.config_.registry.metric
        if name not in metrics:
            raise InputError(
                None, f"no metric {name!r} in the evaluation",
                f"give one of {', '.join(metrics)} (k from eval.ks)",
            )  # fmt: skip
        return metrics[name]

    def save(self, path: str | Path, overwrite: bool = False) -> None:
        """Write the model folder (as ``xmc train`` does: ``xmc predict`` and ``xmc serve`` read
        it), atomically."""
        save_model_folder(path, self._fitted(), self.config_, {}, overwrite)

    @classmethod
    def load(cls, path: str | Path) -> XmcClassifier:
        """A fitted classifier from a model folder (written by :meth:`save` or ``xmc train``)."""
        path = Path(path)
        model = XmcModel.load(path)
        cfg_file = path / CONFIG_FILE
        cfg = XmcConfig.load(cfg_file if cfg_file.is_file() else None)
        clf = cls(cfg)
        clf.model_, clf.config_ = model, cfg
        return clf

    def _fitted(self) -> XmcModel:
        if not hasattr(self, "model_"):
            raise InputError(None, "this XmcClassifier is not fitted", "call fit(X, Y) first")
        return self.model_

    def _features(self, X: Features) -> sp.csr_matrix:
        """``X`` as checked float32 CSR features (n_docs, n_features) for the fitted model."""
        model = self._fitted()
        Xc = csr_from_memory(X, "X")
        check_model_input(model.vectorizer.n_features, model.encoder.uses_text, Xc.shape, "X")
        check_feature_values(Xc, "X")
        return Xc


def _is_texts(X: object) -> bool:
    """Raw texts: a sequence of strings (not a matrix)."""
    return (
        not sp.issparse(X)
        and not isinstance(X, np.ndarray)
        and all(
            isinstance(t, str)
            for t in X  # type: ignore[attr-defined]
        )
    )


def _fit_matrices(
    X: Features, Y: Features, label_names: Sequence[str] | None, inputs: Path, cfg: XmcConfig
) -> dict[str, Any]:
    """Check X and Y (indices, shapes, values: nothing unchecked reaches scipy's or numba's
    kernels), write them (and the names) as ``.npz`` files, then ``xmc train --x``'s graph."""
    from xmc_core.families.train import train_matrices_in_process

    Xc, Yc = csr_from_memory(X, "X"), csr_from_memory(Y, "Y")
    check_feature_values(Xc, "X")
    check_label_values(Yc, "Y")
    if Yc.shape[0] != Xc.shape[0]:
        raise InputError(
            "Y", f"{Yc.shape[0]} rows, but X has {Xc.shape[0]}",
            "give one label row per document of X, in the same order",
        )  # fmt: skip
    files = MatrixFiles(inputs / "X.npz", inputs / "Y.npz")
    sp.save_npz(files.x, Xc, compressed=False)
    sp.save_npz(files.y, Yc, compressed=False)
    if label_names is not None:
        names = [str(n) for n in label_names]
        path = inputs / "labels.txt"
        path.write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
        if any("\n" in n or "\r" in n or n != n.strip() for n in names):
            raise InputError(
                None, "a label name holds a line break or surrounding spaces",
                "give names without them",
            )  # fmt: skip
        LabelNames.load(path)  # empty or repeated names: an error naming the position
        files = MatrixFiles(files.x, files.y, label_names=path)
    return train_matrices_in_process(files, cfg)


def _fit_texts(
    texts: list[str], labels: Sequence[Sequence[str]], inputs: Path, cfg: XmcConfig
) -> dict[str, Any]:
    """Write the documents as a dataset folder, then ``xmc train DATASET``'s graph on it.

    Every dataset has a test split, so the first document is written as the test split too
    (its evaluation is computed and dropped: use :meth:`XmcClassifier.evaluate`)."""
    from xmc_core.corpus import Corpus
    from xmc_core.corpus.writer import DatasetWriter
    from xmc_core.families.train import train_in_process

    if len(texts) != len(labels):
        raise InputError(
            None, f"{len(texts)} texts but {len(labels)} label lists", "give one list per text"
        )
    for i, names in enumerate(labels):
        if isinstance(names, str):
            raise InputError(
                None, f"labels[{i}] is a string ({names[:50]!r})",
                "give each document a list of label names, e.g. [['a', 'b'], ['c']]",
            )  # fmt: skip
    dataset = inputs / "dataset"
    with DatasetWriter(dataset, kind="text", source={"format": "python"}) as ds:
        for split, rows in (("train", len(texts)), ("test", 1)):
            writer = ds.split(split)
            for i in range(rows):
                writer.add(f"{split}-{i:08d}", texts[i], list(labels[i]), "fit(texts)", i + 1)
            ds.close_split(split, "fit(texts)")
    return train_in_process(Corpus(dataset), cfg)
