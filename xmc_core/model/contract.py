"""The model contract: the parts every family is made of, and what a family declares.

Following ``FAMILIES.md``'s frame, a model is an **encoder** (text -> the ranker's input), a
**label index** (label -> clusters, e.g. a balanced k-means tree), **negatives** (which
(document, label-cluster) pairs a level trains on beyond its own) and a **ranker** (scores
labels). The interfaces are small and scikit-learn shaped: ``fit(...) -> self``, ``predict`` /
``transform``, ``save(folder)``, ``Cls.load(folder)``. Every saved part writes a ``meta.json``
naming its class, and :mod:`xmc_core.model.registry` maps that name back to the class, so a
saved model loads without a branch on its family.

A :class:`Family` is a named composition of parts: its config section, its stage graph (the
one declaration of its training DAG, run by ``xmc train`` and by the flows alike) and what its
served model needs installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import scipy.sparse as sp

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from xmc_core.config import PredictConfig, XmcConfig
    from xmc_core.config_section import Section
    from xmc_core.stages.graph import Runner


@runtime_checkable
class Saved(Protocol):
    """A part that round-trips through a folder (``meta.json`` + arrays, no pickle)."""

    def save(self, folder: str | Path) -> None: ...

    @classmethod
    def load(cls, folder: str | Path) -> Self: ...


@runtime_checkable
class Encoder(Protocol):
    """Documents -> the ranker's input. ``transform(X, texts)``: ``X`` csr (n, d) the TF-IDF
    rows of the documents, ``texts`` their raw texts; returns csr (n, d') (an encoder that
    only uses TF-IDF returns ``X`` itself). ``load(folder, device)`` places any network on
    ``device`` (``auto``: CUDA when present)."""

    uses_text: bool

    def transform(self, X: sp.csr_matrix, texts: list[str | None] | pa.Array) -> sp.csr_matrix: ...

    def save(self, folder: str | Path) -> None: ...

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> Self: ...


@runtime_checkable
class LabelIndexer(Protocol):
    """Label features -> a label index. ``fit(Z)``: ``Z`` csr (n_labels, d) label features;
    the fitted index (e.g. a ``LabelTree``) is saved and loaded on its own."""

    def fit(self, Z: sp.csr_matrix) -> Any: ...


@runtime_checkable
class Negatives(Protocol):
    """Extra (document, cluster) pairs per ranker level: ``level(t)`` csr (n_docs, K_t)
    binary, or None when level ``t`` has none (e.g. an external matcher's shortlists)."""

    def level(self, t: int) -> sp.csr_matrix | None: ...


@runtime_checkable
class Ranker(Protocol):
    """Scores labels for encoded documents.

    ``fit(X, Y, index, negatives)``: ``X`` csr (n, d) encoded documents, ``Y`` csr (n, L)
    binary labels; returns self. ``predict(X, beam_size, topk)``: csr (n, L) with at most
    ``topk`` scores per row (None: the saved ``predict_cfg``).
    """

    predict_cfg: PredictConfig

    @property
    def n_labels(self) -> int: ...

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any, negatives: Negatives | None = None
    ) -> Self: ...

    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix: ...

    def save(self, folder: str | Path) -> None: ...

    @classmethod
    def load(cls, folder: str | Path) -> Self: ...


TrainGraph = Callable[["Runner", Mapping[str, Any], "XmcConfig"], dict[str, Any]]
"""``graph(run, featurized, cfg) -> outputs``: the family's stages after featurization.

``featurized`` holds the handles of the featurize graph (``corpus``, ``vectorizer``,
``label_index``, ``label_features``, ``train``, ``test``); the outputs must include ``model``
(an ``XmcModel``), ``model_train`` and ``model_test`` (the splits as the model's input, for the
evaluation and diagnostics); more (trees, checkpoints) are shown in the run report. The frame
ends every graph the same way (``families/common.py: evaluated``: ``evaluation``, the model's
test ``Metrics``)."""


@dataclass(frozen=True)
class Lazy:
    """A function named by ``"module:attr"``, imported on its first call: a family's package
    names its graph this way, so finding the family (the registry, the config) imports none of
    the graph's dependencies (torch, faiss)."""

    target: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)


@dataclass(frozen=True)
class Family:
    """A named composition of parts, declared in its package's ``__init__`` (``FAMILY``) and
    found through the ``xmc.families`` entry points (:mod:`xmc_core.model.registry`).

    ``name``: ``model.kind`` in the config, ``family`` in a saved model's ``meta.json``, its
    folder and its config section's key (one spelling, with underscores); ``graph``: its
    training stages (see :data:`TrainGraph`), usually a :class:`Lazy`; ``section``: its own
    config section class (a family of ``xmc_core``: the config's ``<name>`` key; a plug-in's:
    ``plugins.<name>``); ``sections``: the config sections it reads (shown in the run report,
    checked by the contract tests); ``parts``: the saved part classes it adds, class name ->
    ``"module:Class"`` (imported when a saved model names one); ``needs_text``: trains on raw
    text (not bag-of-words); ``requirements``: packages its served model imports beyond the
    core ones (and ``config_requirements``: those it imports as a config sets it up);
    ``members``: a family made of other families (an ensemble): ``cfg`` -> its :class:`Member` s,
    whose needs (raw text, label texts, packages) are checked and pinned for it;
    ``contract_settings``: the ``--set`` items that size it for the contract tests' 300-document
    corpus (``{encoder}`` stands for a tiny local transformer encoder's folder);
    ``config_position``: where a built-in's section comes among the families' sections of the
    config (``xmc dump-config``), lower first, ties by name; ``warm_start``: its graph takes
    ``warm=`` (:class:`xmc_core.families.warm.WarmHandles`) and can start from a champion;
    ``zero_shot``: it scores labels that have a text but no training document
    (``label_features.zero_shot``).
    """

    name: str
    graph: TrainGraph
    description: str
    section: type[Section] | None = None
    sections: Sequence[str] = ()
    parts: Mapping[str, str] = field(default_factory=dict)
    needs_text: bool = False
    requirements: Sequence[str] = ()
    config_requirements: Callable[[XmcConfig], Sequence[str]] | None = None
    members: Callable[[XmcConfig], Sequence[Member]] | None = None
    contract_settings: Sequence[str] = ()
    config_position: int = 100
    warm_start: bool = False
    zero_shot: bool = False


@dataclass(frozen=True)
class Member:
    """One family a composed family trains: ``key``, where it is configured (e.g.
    ``ensemble.members[1]``); ``label``, what a report calls it (``xr_linear tree.seed=1``);
    ``cfg``, its whole config."""

    key: str
    label: str
    cfg: XmcConfig


def label_counts(Y: sp.csr_matrix) -> np.ndarray:
    """Training documents per label: (n_labels,) int64."""
    import numpy as np

    return np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.int64)
