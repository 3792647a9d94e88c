"""Config sections of XR-Linear (and of every family built on its tree and rankers): label
features, the label tree, the per-level rankers and beam search. Part of the one typed
configuration (:class:`xmc_core.config.XmcConfig` holds them as ``label_features``, ``tree``,
``ranker`` and ``predict``); defaults are declared here and nowhere else."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from xmc_core.config_section import Section


class LabelFeaturesConfig(Section):
    """Label representation used to build the label tree, and the zero-shot labels: with
    ``zero_shot`` (and a corpus with label texts), a label that has a text but no training
    document joins the label index, gets its text TF-IDF as its label features, a leaf of the
    tree (placed among the other labels' clusters) and a ranker made from its text
    (``xmc_core.linear.zero_shot``), so it can be predicted before any document carries it."""

    kind: Literal["pifa", "label_text", "pifa_label_text"] = "pifa"
    label_text_weight: float = Field(
        1.0, gt=0, description="weight of the label-text block in pifa_label_text"
    )
    zero_shot: bool = Field(
        True,
        description="labels with a text but no training document join the model (families "
        "that can: xr_linear, xr_transformer, x_transformer): placed in the tree by their "
        "text, scored by it until documents carry them",
    )


class TreeConfig(Section):
    """Hierarchical label tree: recursive balanced spherical 2-means over the label features.

    ``branching`` children per tree node (a power of two: each tree level is log2(branching)
    binary splits); leaves hold at most ``max_leaf_size`` labels.
    """

    branching: int = Field(16, ge=2)
    max_leaf_size: int = Field(100, ge=1)
    kmeans_iter: int = Field(20, ge=1)
    kmeans_restarts: int = Field(1, ge=1, description="seed pairs tried per split; best kept")
    seed: int = 0

    @model_validator(mode="after")
    def _power_of_two(self) -> TreeConfig:
        if self.branching & (self.branching - 1):
            raise ValueError(f"branching={self.branching} must be a power of two")
        return self


class RankerConfig(Section):
    """Per-level linear rankers (one binary problem per tree node, PECOS's XR-Linear defaults).

    ``negatives``: ``tfn`` teacher-forcing (documents of the true parents), ``man`` matcher-aware
    (the previous level's top ``matcher_topk`` predicted clusters), or both.
    """

    loss: Literal["squared_hinge", "logistic"] = "squared_hinge"
    Cp: float = Field(1.0, gt=0, description="cost of positive examples")
    Cn: float = Field(1.0, gt=0, description="cost of negative examples")
    max_iter: int = Field(20, ge=1, description="coordinate-descent epochs per problem")
    eps: float = Field(0.1, gt=0, description="stopping tolerance (projected gradient)")
    bias: float = Field(1.0, ge=0, description="value of the bias feature; 0 disables it")
    threshold: float = Field(0.1, ge=0, description="weights with |w| below it are pruned")
    negatives: Literal["tfn", "man", "tfn+man"] = "tfn"
    matcher_topk: int = Field(10, ge=1)
    importance_weights: bool = False
    leaf_cost_scales: list[float] = Field(
        [0.25, 0.5, 1.0, 2.0, 4.0],
        description="multipliers of Cp and Cn the leaf level may use, one chosen on held-out "
        "training documents (xmc_core.linear.leaf_cost); [1.0] keeps Cp and Cn",
    )
    leaf_cost_sample: float = Field(
        0.2, gt=0, le=1, description="share of the leaf level's work the cost search trains on"
    )
    seed: int = 0

    @field_validator("leaf_cost_scales")
    @classmethod
    def _scales_hold_one(cls, scales: list[float]) -> list[float]:
        if 1.0 not in scales or min(scales) <= 0:
            raise ValueError(f"leaf_cost_scales must be positive and hold 1.0, got {scales}")
        return scales


class PredictConfig(Section):
    """Beam search (``beam_size`` and ``topk`` can be overridden at predict time), the
    per-document cap on raw text at predict time, and the probability threshold of a calibrated
    model (``threshold``, overridden at predict time by ``--threshold`` or a request's
    ``threshold``): only the labels of at least that probability are returned, at most ``topk``
    of them (``at_least_one``: and each document's best, however low)."""

    beam_size: int = Field(10, ge=1)
    topk: int = Field(20, ge=1)
    post_processor: Literal["l3-hinge", "sigmoid", "noop"] = "l3-hinge"
    max_doc_chars: int | None = Field(
        1_000_000,
        ge=1,
        description="longer texts are cut to their first max_doc_chars characters when "
        "predicting (logged once per run); null: no cap",
    )
    threshold: float | None = Field(
        None, ge=0, le=1, description="a probability: return only the labels that reach it "
        "(a calibrated model); null: the topk best",
    )  # fmt: skip
    at_least_one: bool = Field(False, description="with threshold: each document's best label too")
    threshold_policy: Literal["fixed", "micro_f1", "macro_f1", "sum"] = Field(
        "fixed", description="fixed: threshold as given; else the threshold tuned on the "
        "calibration carve for micro-F1, macro-F1 or their sum",
    )  # fmt: skip
    threshold_per_label: bool = Field(
        False, description="a tuned policy: each label with calibration.label_min_docs relevant "
        "carve documents gets its own threshold too, the best for its F1",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_threshold(self) -> PredictConfig:
        if self.threshold_policy != "fixed" and self.threshold is not None:
            raise ValueError(
                f"threshold={self.threshold} with threshold_policy={self.threshold_policy}: "
                "a tuned policy chooses the threshold; set threshold_policy=fixed, or leave "
                "threshold unset"
            )
        return self

    @property
    def thresholded(self) -> bool:
        """Whether predictions are cut at a probability (given, or tuned on the carve)."""
        return self.threshold is not None or self.threshold_policy != "fixed"
