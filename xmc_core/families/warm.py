"""A warm start: training that starts from a champion's model folder instead of from nothing.

The retrain flow decides whether to start warm and from which model
(:mod:`xmc_core.lifecycle.warm_start`); this module is what the stage graph does with it:

- the vocabulary keeps the champion's columns and appends the new terms
  (:meth:`~xmc_core.features.tfidf.TfidfVectorizer.extend_stats`);
- the label index keeps the champion's label ids and appends the new labels
  (:meth:`~xmc_core.features.labels.LabelIndex.extended`);
- the label tree keeps the champion's clusters and places the new labels by their label
  features (:func:`~xmc_core.linear.tree_growth.grow_tree`);
- the leaf level's cost scale is searched from the champion's, which it keeps without clear
  evidence on the grown corpus (:func:`~xmc_core.linear.leaf_cost.choose_leaf_cost`).

Every warm stage is keyed on the champion's part it reads (its folder's content), so a warm
retrain killed half-way resumes like a cold one. What was reused is recorded in the model
(``XmcModel.start``, see :func:`start_record`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xmc_core.config import TreeConfig
from xmc_core.corpus import Corpus
from xmc_core.features import stages
from xmc_core.features.counts import TermCounts
from xmc_core.features.label_features import LabelFeatures
from xmc_core.features.labels import LabelIndex
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.linear.tree_growth import grow_tree
from xmc_core.stages.graph import Runner, Stage
from xmc_core.storage.artifacts import read_meta
from xmc_core.transformer.champion import ENCODER_CLASS, ChampionEncoder


@dataclass(frozen=True)
class WarmBase:
    """The model a warm start starts from: its folder (an ``XmcModel``), what it is in words
    (``xmc-debian version 3 (champion)``) and how many warm starts led to it since the last
    cold one."""

    model_dir: str
    source: str
    warm_in_a_row: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> WarmBase:
        return cls(str(value["model_dir"]), str(value["source"]), int(value["warm_in_a_row"]))


@dataclass(frozen=True)
class WarmHandles:
    """The champion's parts as stage-graph sources, and what the graph needs to know of it."""

    vectorizer: Any
    labels: Any
    tree: Any
    leaf_scale: float | None
    start: dict[str, Any] = field(default_factory=dict)
    encoder: Any = None  # the champion's fine-tuned encoder (a transformer family's), or None
    ranker: Any = None  # the champion's ranker (its levels kept when the problem is the same)
    ranker_digest: str | None = None  # its training problem's (xmc_core.linear.reuse)


def warm_handles(run: Runner, base: WarmBase) -> WarmHandles:
    """Sources for the parts of ``base``'s model folder the warm stages read."""
    folder = Path(base.model_dir)
    ranker = read_meta(folder / "ranker", "XRLinearModel", verify=False)
    scale, digest = ranker.get("leaf_cost_scale"), ranker.get("train_digest")
    vectorizer = read_meta(folder / "vectorizer", "TfidfVectorizer", verify=False)
    meta = read_meta(folder, "XmcModel", verify=False)
    start = {
        "kind": "warm",
        "from": base.source,
        "model_dir": str(folder),
        "warm_in_a_row": base.warm_in_a_row + 1,
        "base_features": int(vectorizer["n_features"]),
        "base_labels": int(meta["n_labels"]),
        "base_docs": int(meta["n_train_docs"]),
    }
    encoder = None
    if meta.get("encoder") == ENCODER_CLASS:
        encoder = run.source(ChampionEncoder, str(folder / "encoder"))
    return WarmHandles(
        run.source(TfidfVectorizer, str(folder / "vectorizer")),
        run.source(LabelIndex, str(folder / "labels")),
        run.source(LabelTree, str(folder / "ranker" / "tree")),
        None if scale is None else float(scale),
        start,
        encoder,
        run.source(XRLinearModel, str(folder / "ranker")),
        None if digest is None else str(digest),
    )


def grow_label_tree(label_features: LabelFeatures, base: LabelTree, cfg: TreeConfig) -> LabelTree:
    """The champion's tree with the new labels placed (:func:`grow_tree`)."""
    return grow_tree(base, label_features.z, cfg)[0]


def start_record(
    start: dict[str, Any], vectorizer: TfidfVectorizer, labels: LabelIndex, tree: LabelTree,
    base_tree: LabelTree, leaf_scale: float | None,
) -> dict[str, Any]:  # fmt: skip
    """``start`` with what the warm start reused, as the model records it: vocabulary columns
    kept and appended, labels kept and new, tree leaves that hold the same labels as in the
    champion's tree, and the champion's leaf cost scale (where the leaf cost search started)."""
    grown = _leaf_label_sets(tree)
    leaves, kept = len(grown), len(set(grown) & set(_leaf_label_sets(base_tree)))
    return {
        **start,
        "reused": {
            "vocabulary_columns": start["base_features"],
            "new_columns": vectorizer.n_features - start["base_features"],
            "labels": start["base_labels"],
            "new_labels": len(labels) - start["base_labels"],
            "tree_leaves_kept": kept,
            "tree_leaves": leaves,
            "leaf_cost_scale": leaf_scale,
        },
    }


def _leaf_label_sets(tree: LabelTree) -> list[tuple[int, ...]]:
    """The labels of each leaf cluster (sorted ids), leaf by leaf."""
    C = tree.C[-1].tocsc()
    C.sort_indices()
    ids = C.indices.tolist()
    return [tuple(ids[lo:hi]) for lo, hi in zip(C.indptr[:-1], C.indptr[1:], strict=True)]


START_TAG = "xmc.start"
"""MLflow tag of a retrain's training run: how it started (``warm from ...`` / ``cold: ...``)."""


def start_line(reason: str, record: dict[str, Any] | None) -> str:
    """How a retrain started, in words: the start plan's ``reason`` and, when warm, what the
    model's ``start`` record says it reused."""
    reused = (record or {}).get("reused")
    if not reused:
        return reason
    scale = reused.get("leaf_cost_scale")
    return (
        f"{reason}: kept {reused['vocabulary_columns']:,} vocabulary columns "
        f"(+{reused['new_columns']:,} new), {reused['labels']:,} labels "
        f"(+{reused['new_labels']:,} new), {reused['tree_leaves_kept']:,} of "
        f"{reused['tree_leaves']:,} tree leaves unchanged, "
        + (
            "the leaf cost scale searched from 1"
            if scale is None
            else f"the leaf cost scale searched from the champion's {scale}"
        )
        + _matcher_words(reused)
        + (
            "; every ranker level kept (the champion's training problem)"
            if reused.get("ranker_levels_kept")
            else "; every ranker level trained again"
        )
    )


def _matcher_words(reused: dict[str, Any]) -> str:
    """How a transformer family's warm matcher was trained, in words ("" without one)."""
    if "matcher_steps" not in reused:
        return ""
    top = reused.get("matcher_top_layers")
    return (
        f", the champion's encoder fine-tuned {reused['matcher_steps']:,} steps at matcher "
        f"level {reused['matcher_level']}"
        + ("" if top is None else f" in its top {top} layer(s), the rest kept")
        + f" (cold: {reused['cold_matcher_steps']:,} steps over "
        f"{reused['cold_matcher_levels']} level(s))"
    )


def started(reason: str, model_dir: str | Path) -> tuple[str, dict[str, str]]:
    """(:func:`start_line`, :func:`start_tags`) of a retrain whose start plan said ``reason``
    and whose model folder is ``model_dir`` (its ``start`` record)."""
    record = read_meta(model_dir, "XmcModel", verify=False).get("start")
    return start_line(reason, record), start_tags(reason, record)


def start_tags(reason: str, record: dict[str, Any] | None) -> dict[str, str]:
    """MLflow tags of a retrain's run: ``xmc.start`` (:func:`start_line`) and, when warm,
    ``xmc.start.reused`` (the record's figures, JSON)."""
    tags = {START_TAG: start_line(reason, record)}
    reused = (record or {}).get("reused")
    if reused:
        tags[START_TAG + ".reused"] = json.dumps(reused, sort_keys=True)
    return tags


VOCABULARY_WARM = Stage(
    "vocabulary-warm", stages.extend_vectorizer, TfidfVectorizer,
    {"counts": TermCounts, "base": TfidfVectorizer}, on_dask=True,
    describe=lambda v: f"{v.n_features} features from {v.n_docs_} documents",
)  # fmt: skip
LABEL_INDEX_WARM = Stage(
    "label-index-warm", stages.extend_label_index, LabelIndex,
    {"corpus": Corpus, "base": LabelIndex}, on_dask=True,
    describe=lambda i: f"{len(i)} labels",
)  # fmt: skip
TREE_WARM = Stage(
    "tree-warm", grow_label_tree, LabelTree,
    {"label_features": LabelFeatures, "base": LabelTree},
    describe=lambda t: f"nodes per level {t.level_sizes()}",
)  # fmt: skip
