"""The ``xml_cnn`` config section (:class:`XmlCnnConfig`): pydantic only, no torch, so the
config loads without the network's dependencies. Defaults are declared here and nowhere else."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from xmc_core.config_section import Section


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
