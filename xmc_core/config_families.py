"""Config sections of the model families beyond XR-Linear and XR-Transformer (issue 15):
XML-CNN, X-Transformer and ensembles. Part of the one typed configuration
(:class:`xmc_core.config.XmcConfig` holds them as ``xml_cnn``, ``x_transformer`` and
``ensemble``); defaults are declared here and nowhere else."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from xmc_core.config_errors import mistakes
from xmc_core.config_io import apply_override
from xmc_core.config_section import Section
from xmc_core.errors import InputError


class XmlCnnConfig(Section):
    """XML-CNN (Liu et al. 2017): word ids -> embeddings -> convolutions of widths
    ``filter_sizes`` -> dynamic max pooling into ``pool_chunks`` chunks per feature map ->
    a bottleneck layer (``hidden_dim``, ReLU, dropout) -> one sigmoid output per label (BCE).

    ``placement``: ``flat`` (one output per label, the paper), ``xr`` (the CNN is the matcher
    encoder of an XR tree, trained on the clusters of the tree level with at most
    ``xr_max_clusters`` nodes, with the XR-Linear ranker on ``[TF-IDF, embedding_weight *
    unit CNN features]`` on top), or ``auto`` (flat when the corpus has at most
    ``flat_max_labels`` labels, xr otherwise). ``embedding_init``: ``minilm`` (the packaged
    all-MiniLM-L6-v2's WordPiece embeddings, averaged over each word's pieces: pretrained, and
    offline, the nearest thing to the paper's GloVe), ``corpus`` (word vectors from the training
    corpus: SVD of its positive PMI co-occurrence matrix) or ``random``.

    Added for the family's parts: ``beam_size`` (xr: the CNN's top clusters per training
    document, the ranker's matcher-aware negatives; its own field, as the CNN is not the
    transformer matcher of the ``matcher`` section) and ``refit_epochs`` (the flat ranker's
    ``fit``, which refits the output layer alone on fixed features). The defaults are the
    reference settings (LibMultiLabel's EUR-Lex config: 128 filters, strides 2/1/1, lr 5e-4,
    batch 64, 50 epochs with early stopping); ``configs/xml-cnn.yaml`` sizes them for a CPU.
    """

    placement: Literal["auto", "flat", "xr"] = "auto"
    flat_max_labels: int = Field(10_000, ge=1, description="auto: flat up to this many labels")
    xr_max_clusters: int = Field(512, ge=2, description="xr: the matcher's cluster resolution")
    vocab_size: int = Field(30_000, ge=2, description="most frequent training words kept")
    min_count: int = Field(1, ge=1, description="words seen in fewer documents are dropped")
    max_length: int = Field(500, ge=8, description="words per document, truncated")
    embedding_init: Literal["minilm", "corpus", "random"] = "minilm"
    embedding_dim: int = Field(300, ge=2, description="corpus / random only (minilm: 384)")
    filter_sizes: list[int] = Field(default_factory=lambda: [2, 4, 8])
    num_filters: int = Field(128, ge=1, description="feature maps per filter size")
    strides: list[int] = Field(default_factory=lambda: [2, 1, 1])
    dynamic_pooling: bool = Field(True, description="False: one max over time per map")
    pool_chunks: int = Field(8, ge=1, description="p: chunks per feature map")
    bottleneck: bool = Field(True, description="False: outputs straight on the pooled maps")
    hidden_dim: int = Field(512, ge=1)
    dropout: float = Field(0.5, ge=0, lt=1)
    embedding_dropout: float = Field(0.25, ge=0, lt=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    epochs: int = Field(50, ge=1, description="at most; early stopping ends sooner")
    patience: int = Field(5, ge=1, description="epochs without a better validation P@1")
    val_fraction: float = Field(0.1, gt=0, lt=1, description="of train, for early stopping")
    val_max_docs: int = Field(5000, ge=1)
    time_budget_s: float | None = Field(None, gt=0, description="stop after this many seconds")
    embedding_weight: float = Field(1.0, gt=0, description="xr: weight of the CNN block")
    beam_size: int = Field(10, ge=1, description="xr: the CNN's top clusters as negatives")
    refit_epochs: int = Field(3, ge=1, description="flat ranker's fit(): Adam epochs")
    eval_batch_size: int = Field(256, ge=1)
    device: str = Field("auto", description="auto (CUDA if present), cpu, cuda, cuda:N")
    threads: int | None = Field(None, ge=1, description="torch threads (None: torch's choice)")
    seed: int = 0

    @model_validator(mode="after")
    def _one_stride_per_filter(self) -> XmlCnnConfig:
        if len(self.strides) != len(self.filter_sizes):
            raise ValueError(
                f"strides {self.strides} needs one value per filter size {self.filter_sizes}"
            )
        if not self.filter_sizes or min(self.filter_sizes) < 1 or min(self.strides) < 1:
            raise ValueError("filter_sizes and strides must be positive")
        if max(self.filter_sizes) > self.max_length:
            raise ValueError(f"a filter of {max(self.filter_sizes)} > max_length")
        return self


class XTransformerConfig(Section):
    """X-Transformer (Chang et al. 2020), a preset on XR-Transformer's parts.

    ``indexing``: the label features of the semantic label index, ``pifa_tfidf`` (PIFA over
    TF-IDF), ``pifa_neural`` (PIFA over the pretrained encoder's document embeddings) or
    ``label_text`` (TF-IDF of the label names); the tree (``tree`` section) is cut at its
    finest cluster level (clusters of at most ``tree.max_leaf_size`` labels). The matcher
    (``encoder`` and ``matcher`` sections: steps, batch, learning rates) is fine-tuned once at
    that resolution, from the pretrained encoder, without head bootstrapping or importance
    weights (``matcher.min_clusters``/``max_clusters``, ``bootstrap`` and
    ``importance_weights`` are not read). The ranker (``ranker`` section) is linear on
    ``[TF-IDF, embedding]``, trained on the labels of the true clusters (``negatives`` tfn),
    of the matcher's top ``matcher.beam_size`` clusters (man) or both; it scores only the
    labels of the matcher's top ``predict.beam_size`` clusters (``predict.post_processor``
    noop: the ranker's score alone, as the reference).
    """

    indexing: Literal["pifa_tfidf", "pifa_neural", "label_text"] = "pifa_tfidf"


SHARED_SECTIONS = {
    "tokenizer": "the members share one vectorizer; set it for the whole ensemble",
    "tfidf": "the members share one vectorizer; set it for the whole ensemble",
    "data": "the members train on one corpus; set it for the whole ensemble",
    "work_dir": "the members share the run's work_dir; set it for the whole ensemble",
    "model": "give the member's family as its kind",
    "ensemble": "a member is not an ensemble",
}
"""Config keys an ensemble member's ``set`` may not change, and why."""


class EnsembleMember(Section):
    """One member: a family (``kind``) and the ``--set`` overrides applied to the whole config
    for it (e.g. ``["tree.seed=1"]``, ``["label_features.kind=label_text"]``); the
    featurization (``tokenizer``, ``tfidf``, ``data``) is the ensemble's, not a member's."""

    kind: str = "xr-linear"
    set: list[str] = Field(default_factory=list)

    @field_validator("kind")
    @classmethod
    def _not_nested(cls, kind: str) -> str:
        if kind == "ensemble":
            raise ValueError("an ensemble member cannot be an ensemble")
        return kind

    @field_validator("set")
    @classmethod
    def _not_shared(cls, items: list[str]) -> list[str]:
        for item in items:
            key, sep, _ = item.partition("=")
            section = key.strip().split(".")[0]
            if not sep or not key.strip():
                raise ValueError(f"{item!r} is not KEY=VALUE (e.g. tree.seed=1)")
            if section in SHARED_SECTIONS:
                shared = section not in ("model", "ensemble")
                raise ValueError(
                    f"{item!r} changes {section}, which a member cannot change: "
                    f"{SHARED_SECTIONS[section]}" + (f" (--set {item.strip()})" if shared else "")
                )
        return items


class EnsembleConfig(Section):
    """An ensemble of N members (any families but ``ensemble``), each trained on the shared
    featurization with its own config (the whole config with the member's ``set`` applied and
    ``model.kind`` its ``kind``), as separate cached stages.

    Each member predicts its top ``member_topk`` labels (at least the requested top-k); a label
    a member did not rank counts 0 for it. For document d and label l, with N members and
    member i's scores s_i(d, l) over its ranked labels R_i(d):

    - ``average``: (1/N) sum_i s_i(d, l);
    - ``rank_average``: (1/N) sum_i 1 / rank_i(d, l), rank 1 the member's best label (ties:
      the lower label id first);
    - ``softmax_average``: (1/N) sum_i exp(s_i(d, l) / T) / sum_{j in R_i(d)} exp(s_i(d, j) / T),
      T = ``temperature``.

    The ensemble keeps the ``predict.topk`` best labels of the combined scores (ties: the lower
    label id)."""

    members: list[EnsembleMember] = Field(
        default_factory=lambda: [
            EnsembleMember(kind="xr-linear", set=[f"tree.seed={seed}"]) for seed in range(3)
        ],
        min_length=1,
    )
    combine: Literal["average", "rank_average", "softmax_average"] = "rank_average"
    member_topk: int = Field(100, ge=1)
    temperature: float = Field(1.0, gt=0)

    def member_configs(self, cfg: Any) -> list[Any]:
        """Each member's whole config (an ``XmcConfig`` like ``cfg``): ``cfg`` with the member's
        ``set`` applied and ``model.kind`` its ``kind``. A member whose config is invalid is a
        ValueError naming it and each mistake."""
        out = []
        for i, member in enumerate(self.members):
            raw = cfg.model_dump(mode="json")
            given = f"ensemble.members[{i}] (kind {member.kind}, set {member.set})"
            try:
                for item in member.set:
                    apply_override(raw, item)
                raw["model"] = {**raw["model"], "kind": member.kind}
                out.append(type(cfg).model_validate(raw))
            except InputError as err:  # an override that does not fit the config's shape
                raise ValueError(f"{given}: {err.problem}") from None
            except ValidationError as err:
                found = "; ".join(m.text for m in mistakes(type(cfg), err))
                raise ValueError(f"{given}: {found}") from None
        return out
