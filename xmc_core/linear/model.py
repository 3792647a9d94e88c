"""XR-Linear: one linear ranker per tree level, trained coarse to fine, beam search to predict."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Self

import scipy.sparse as sp

from xmc_core.config import PredictConfig, RankerConfig
from xmc_core.errors import ArtifactError
from xmc_core.linear.beam import ChunkedLevel, beam_search
from xmc_core.linear.leaf_cost import choose_leaf_cost
from xmc_core.linear.levels import importance_weights, level_problems
from xmc_core.linear.solver import train_level, train_level_chunks
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.artifacts import (
    load_csr,
    meta_fields,
    read_meta,
    save_csr,
    save_csr_rows,
    write_meta,
)

if TYPE_CHECKING:
    from xmc_core.model.contract import Negatives

log = logging.getLogger(__name__)


def fit_level(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    tree: LabelTree,
    t: int,
    trained: Sequence[sp.csc_matrix | ChunkedLevel],
    cfg: RankerConfig,
    post_processor: str,
    extra_parents: sp.csr_matrix | None = None,
    leaf_scale: float | None = None,
) -> tuple[sp.csc_matrix, float]:
    """Rankers of tree level ``t`` given the levels above (``trained``, their matrices or beam
    chunks, for matcher negatives), and the scale of the costs they were trained with.

    ``X``: csr (n_docs, n_features); ``Y``: csr (n_docs, n_labels); ``extra_parents``: csr
    (n_docs, K_t) binary, more parents per document to train with (e.g. an external matcher's
    clusters). Returns (W, scale): W csc (n_features + 1, K_{t+1}), the last row holding the
    bias weights. The leaf level's costs are scaled as
    :func:`~xmc_core.linear.leaf_cost.choose_leaf_cost` chooses (``cfg.leaf_cost_scales``), its
    search starting from ``leaf_scale`` when given (a warm start's champion's scale), else
    from 1; the other levels' by 1.
    """
    args, scale = _level_problem(X, Y, tree, t, trained, cfg, post_processor, extra_parents,
                                 leaf_scale)  # fmt: skip
    start = time.perf_counter()
    W = train_level(*args, what=f"level {t}")
    log.debug(
        "level %d: %d nodes under %d parents, %d (doc, parent) pairs, W nnz %d, %.1f s",
        t, tree.C[t].shape[0], tree.C[t].shape[1], args[3].nnz, W.nnz, time.perf_counter() - start,
    )  # fmt: skip
    return W, scale


def fit_level_chunks(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    tree: LabelTree,
    t: int,
    trained: Sequence[ChunkedLevel],
    cfg: RankerConfig,
    post_processor: str,
    extra_parents: sp.csr_matrix | None = None,
) -> tuple[ChunkedLevel, float]:
    """:func:`fit_level`'s rankers as the level's beam chunks (the matrix is never formed)."""
    args, scale = _level_problem(X, Y, tree, t, trained, cfg, post_processor, extra_parents)
    return train_level_chunks(*args, what=f"level {t}"), scale


def _level_problem(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    tree: LabelTree,
    t: int,
    trained: Sequence[sp.csc_matrix | ChunkedLevel],
    cfg: RankerConfig,
    post_processor: str,
    extra_parents: sp.csr_matrix | None,
    leaf_scale: float | None = None,
) -> tuple[tuple, float]:
    """(the arguments of ``train_level`` for level ``t``: X, targets, C, M, costs, R; the
    scale of the costs), the leaf's scale chosen as :func:`fit_level` says."""
    if len(trained) != t:
        raise ValueError(f"level {t} needs the {t} levels above it, got {len(trained)}")
    targets, M = level_problems(X, Y, tree.C, t, trained, cfg, post_processor, extra_parents)
    R = importance_weights(Y, tree.C, t) if cfg.importance_weights else None
    scale = 1.0
    if t == tree.depth - 1:
        scale = choose_leaf_cost(X, targets[t], tree.C[t], M, cfg, R, leaf_scale or 1.0).scale
        cfg = cfg.model_copy(update={"Cp": cfg.Cp * scale, "Cn": cfg.Cn * scale})
    return (X, targets[t], tree.C[t], M, cfg, R), scale


class XRLinearModel:
    """A label tree and one ranker matrix per level.

    ``fit(X, Y, tree)`` trains every level; ``predict(X)`` returns the top-k labels of each
    document as csr (n_docs, n_labels) scores. Prediction settings are saved with the model and
    can be overridden per call.
    """

    def __init__(self, ranker: RankerConfig, predict: PredictConfig) -> None:
        self.ranker = ranker
        self.predict_cfg = predict
        self.train_digest_: str | None = None  # what it was trained on, when recorded

    def fit(
        self,
        X: sp.csr_matrix,
        Y: sp.csr_matrix,
        tree: LabelTree,
        negatives: Negatives | None = None,
    ) -> XRLinearModel:
        """Train every level, coarse to fine. ``X``: csr (n, d); ``Y``: csr (n, n_labels);
        ``negatives``: extra parents per level (e.g. a matcher's shortlists), see
        :func:`fit_level`."""
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows, Y has {Y.shape[0]}")
        if Y.shape[1] != tree.C[-1].shape[0]:
            raise ValueError(f"Y has {Y.shape[1]} labels, the tree {tree.C[-1].shape[0]}")
        chunks: list[ChunkedLevel] = []  # each level kept only as its beam chunks
        post, scale = self.predict_cfg.post_processor, 1.0
        for t in range(tree.depth):
            extra = None if negatives is None else negatives.level(t)
            level, scale = fit_level_chunks(X, Y, tree, t, chunks, self.ranker, post, extra)
            chunks.append(level)
        return self._set_chunks(tree, chunks, X.shape[1], scale)

    def set_levels(
        self,
        tree: LabelTree,
        weights: list[sp.csc_matrix],
        n_features: int,
        leaf_cost_scale: float | None = None,
    ) -> Self:
        """Assemble a model from levels trained elsewhere (e.g. one orchestrated task each);
        ``leaf_cost_scale``: the scale of Cp and Cn the leaf level was trained with, when known
        (a warm start from this model keeps it)."""
        if len(weights) != tree.depth:
            raise ValueError(f"{len(weights)} weight matrices for a tree of depth {tree.depth}")
        for t, W in enumerate(weights):
            if W.shape != (n_features + 1, tree.C[t].shape[0]):
                raise ValueError(f"level {t}: W shape {W.shape} does not fit the tree")
        chunks = [ChunkedLevel.build(W, tree.C[t]) for t, W in enumerate(weights)]
        return self._set_chunks(tree, chunks, n_features, leaf_cost_scale)

    def _set_chunks(
        self,
        tree: LabelTree,
        chunks: list[ChunkedLevel],
        n_features: int,
        leaf_cost_scale: float | None,
    ) -> Self:
        """The model's state: the tree and each level's beam chunks (the only copy of the
        weights: :meth:`level_weights` and :meth:`save` rebuild a level's matrix from them)."""
        self.tree_ = tree
        self.chunks_ = chunks
        self.n_features_ = n_features
        self.leaf_cost_scale_ = leaf_cost_scale
        return self

    def level_weights(self, t: int) -> sp.csc_matrix:
        """Level ``t``'s rankers: csc (n_features + 1, K_{t+1}) float32, the last row the bias
        weights (rebuilt from the level's chunks)."""
        return self.chunks_[t].to_csr().tocsc()

    @property
    def weights_(self) -> list[sp.csc_matrix]:
        """Every level's rankers (:meth:`level_weights`), rebuilt at each access."""
        return [self.level_weights(t) for t in range(len(self.chunks_))]

    @property
    def n_labels(self) -> int:
        """Number of labels (columns of the prediction)."""
        return self.tree_.C[-1].shape[0]

    def predict(
        self,
        X: sp.csr_matrix,
        beam_size: int | None = None,
        topk: int | None = None,
        post_processor: str | None = None,
    ) -> sp.csr_matrix:
        """Top-k labels per document: csr (n_docs, n_labels) scores, by beam search."""
        if X.shape[1] != self.n_features_:
            raise ValueError(f"X has {X.shape[1]} features, the model {self.n_features_}")
        cfg = self.predict_cfg
        beam = beam_size or cfg.beam_size
        k = topk or cfg.topk
        post = post_processor or cfg.post_processor
        widths = [beam] * (len(self.chunks_) - 1) + [k]
        return beam_search(X, self.chunks_, widths, post, self.ranker.bias)

    def save(self, folder: str | Path) -> None:
        """Write ``tree/``, ``W{t}.npz`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.tree_.save(folder / "tree")
        for t, level in enumerate(self.chunks_):  # a range of one level's rows at a time
            indptr, shape = level.csr_indptr(), (level.n_features + 1, level.n_nodes)
            save_csr_rows(folder / f"W{t}.npz", shape, indptr, partial(level.csr_rows, indptr))
        fields = {
            "ranker": self.ranker.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"),
            "n_features": self.n_features_,
            "n_labels": self.n_labels,
            "depth": self.tree_.depth,
        }
        if self.leaf_cost_scale_ is not None:  # absent: not known (trained outside a level)
            fields["leaf_cost_scale"] = self.leaf_cost_scale_
        if self.train_digest_ is not None:  # absent: not recorded (see xmc_core.linear.reuse)
            fields["train_digest"] = self.train_digest_
        write_meta(folder, "XRLinearModel", fields)

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        """Read a folder written by :meth:`save`; fails clearly if anything is off."""
        return cls.load_as(Path(folder), "XRLinearModel")

    @classmethod
    def load_as(cls, folder: Path, kind: str) -> Self:
        """:meth:`load` of a folder whose ``meta.json`` names the class ``kind``."""
        meta = read_meta(folder, kind)
        with meta_fields(folder):
            model = cls(RankerConfig(**meta["ranker"]), PredictConfig(**meta["predict"]))
            depth, n_features = int(meta["depth"]), int(meta["n_features"])
            scale = meta.get("leaf_cost_scale")  # absent: saved before xmc recorded it
            scale = None if scale is None else _positive(float(scale))
            digest = meta.get("train_digest")
            model.train_digest_ = None if digest is None else str(digest)
        tree = LabelTree.load(folder / "tree")
        if tree.depth != depth:
            raise ArtifactError(folder / "tree", f"depth {tree.depth}, meta says {depth}")
        chunks = []
        for t in range(tree.depth):  # one level's matrix at a time
            W = load_csr(folder / f"W{t}.npz")
            if W.shape != (n_features + 1, tree.C[t].shape[0]):
                raise ArtifactError(folder, f"inconsistent model: level {t}: W shape {W.shape} "
                                    "does not fit the tree")  # fmt: skip
            try:
                chunks.append(ChunkedLevel.build(W, tree.C[t]))
            except ValueError as err:
                raise ArtifactError(folder / f"W{t}.npz", f"inconsistent model: {err}") from err
        return model._set_chunks(tree, chunks, n_features, scale)


def _positive(value: float) -> float:
    if not value > 0 or value == float("inf"):
        raise ValueError(f"leaf_cost_scale {value} is not a positive number")
    return value


@dataclass(frozen=True)
class LevelRankers:
    """The rankers of one tree level, trained on its own (one orchestrated task per level):
    ``W`` csc (n_features + 1, K_{level+1}), the last row the bias weights; ``cost_scale``:
    the scale of Cp and Cn they were trained with."""

    W: sp.csc_matrix
    level: int
    cost_scale: float = 1.0

    def save(self, folder: str | Path) -> None:
        """``W.npz`` + ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_csr(folder / "W.npz", self.W.tocsr())
        write_meta(
            folder,
            "LevelRankers",
            {
                "level": self.level, "shape": list(self.W.shape), "nnz": int(self.W.nnz),
                "cost_scale": self.cost_scale,
            },
        )  # fmt: skip

    @classmethod
    def load(cls, folder: str | Path) -> LevelRankers:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        meta = read_meta(folder, "LevelRankers")
        with meta_fields(folder):
            level = int(meta["level"])
            scale = _positive(float(meta.get("cost_scale", 1.0)))
        return cls(load_csr(folder / "W.npz").tocsc(), level, scale)
