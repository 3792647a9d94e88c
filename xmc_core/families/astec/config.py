"""The ``astec`` config section: DeepXML / Astec (Dahiya et al., WSDM 2021). Part of the one
typed configuration (:class:`xmc_core.config.XmcConfig` holds it as ``astec``); defaults are
declared here and nowhere else. Imports only pydantic (no torch, no faiss)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from xmc_core.config_section import Section


class AstecConfig(Section):
    """DeepXML / Astec's four modules on the TF-IDF rows of the documents.

    **Encoder**: ``z = dropout(relu(X E))`` (the TF-IDF-weighted sum of one ``embedding_dim``
    vector per TF-IDF feature), then a residual block ``z + g * dropout(relu(SN(A) z + a))``
    (``SN``: spectral normalisation, ``A`` initialised to the identity as Astec's, ``g`` a
    scalar gate initialised to 0, so the block is exactly the identity at initialisation).

    (1) **Surrogate task**: the labels are clustered into meta-labels (the leaves of a
    balanced 2-means tree over the label features, about ``labels_per_meta_label`` labels
    each, a power of two of them, at most ``max_meta_labels``; EURLex-4K's 3,993 labels give
    Astec's 1,024) and the encoder is trained with a one-vs-all layer over them (BCE, Adam,
    ``surrogate_epochs``). (2) **Shortlists**: each label's vector is the unit mean of the
    unit encodings of its training documents; an ANN index over them (``ann``: ``hnsw``,
    faiss's HNSW with ``hnsw_m`` links, ``ef_construction`` and ``ef_search``; ``flat``:
    exact) gives each document its ``shortlist_size`` nearest labels. Merged in, as the
    reference does, an instance kNN: a second index over the training documents, whose
    ``n_neighbours`` nearest vote for their labels (cosine-weighted; each document keeps its
    ``shortlist_size`` best-voted labels). While training, each document's positives and
    ``n_random`` random labels join its shortlist. (3) **Transfer**: the encoder is kept frozen (as
    Astec's default); a fresh residual block is learned on top of it. (4) **Classifier**: one
    vector and bias per label (initialised from the label vectors), trained with BCE over each
    document's shortlist only (``classifier_epochs``). Both loops use ``batch_size``, ``lr``
    (Adam; lazy Adam for the embedding and label rows) and keep their best epoch on a
    validation split carved from train (``val_fraction``, at most ``val_max_docs``, from
    ``seed``; those documents train nothing; never the test split).

    **Prediction**: encode, query the index (``shortlist_size`` labels), score the shortlist:
    ``beta * sigmoid(w . z' + b) + (1 - beta) * sigmoid(s)``, ``s`` the ANN similarity (the
    neighbours' vote, in [0, 1]; with ``n_neighbours`` 0, the cosine to the label vector),
    ``beta`` the value of ``beta_grid`` with the best validation P@1.

    The defaults are the reference settings (Astec's code: 300-d embeddings, HNSW M=100,
    efC=300, efS=400, 500-label shortlists, about 200 random labels per document while
    training); ``n_neighbours``, ``lr`` and the gate are ours (the reference's instance kNN
    size and learning rates were not found; with ``configs/astec.yaml``, ``lr`` 0.01 beat 0.005
    and 0.02 on a validation split carved from debian-deps' train split, BENCHMARKS.md).
    ``configs/astec.yaml`` sizes them for 2 CPU cores. ``threads``: torch's and faiss's
    (OpenMP) threads while training (None: their own choice); ``predict_threads``:
    faiss's while predicting (torch is not used there, so its threads cannot contend). The HNSW
    graph is always built on one thread, so the same seed gives the same index; a query's
    result does not depend on the threads.
    """

    embedding_dim: int = Field(300, ge=2, description="D: one D-vector per TF-IDF feature")
    dropout: float = Field(0.5, ge=0, lt=1, description="after relu(X E)")
    block_dropout: float = Field(0.2, ge=0, lt=1, description="inside the residual blocks")
    labels_per_meta_label: int = Field(4, ge=1, description="surrogate: labels per cluster")
    max_meta_labels: int = Field(16384, ge=2, description="surrogate: at most this many")
    surrogate_epochs: int = Field(20, ge=1, description="module 1: epochs at most")
    classifier_epochs: int = Field(20, ge=1, description="module 4: epochs at most")
    batch_size: int = Field(256, ge=1)
    lr: float = Field(0.01, gt=0, description="Adam's learning rate, both loops")
    ann: Literal["hnsw", "flat"] = "hnsw"
    hnsw_m: int = Field(100, ge=4, description="HNSW: links per node")
    ef_construction: int = Field(300, ge=1, description="HNSW: candidates while building")
    ef_search: int = Field(400, ge=1, description="HNSW: candidates while querying")
    shortlist_size: int = Field(500, ge=1, description="ANN labels per document")
    n_random: int = Field(200, ge=0, description="random labels per training document")
    n_neighbours: int = Field(
        10, ge=0, description="instance kNN: training documents voting for their labels (0: none)"
    )
    beta_grid: list[float] = Field(
        default_factory=lambda: [round(0.1 * i, 1) for i in range(11)],
        description="candidate classifier weights of the score fusion",
    )
    val_fraction: float = Field(0.05, gt=0, lt=1, description="of train: early stopping, beta")
    val_max_docs: int = Field(2000, ge=1)
    time_budget_s: float | None = Field(None, gt=0, description="per training loop, seconds")
    eval_batch_size: int = Field(1024, ge=1, description="documents per encode/predict batch")
    threads: int | None = Field(None, ge=1, description="torch and faiss threads, training")
    predict_threads: int | None = Field(
        None, ge=1, description="faiss threads, prediction (None: faiss's own choice)"
    )
    seed: int = 0

    @field_validator("beta_grid")
    @classmethod
    def _betas_in_unit_interval(cls, grid: list[float]) -> list[float]:
        if not grid or any(not 0.0 <= b <= 1.0 for b in grid):
            raise ValueError(f"beta_grid {grid} needs one or more values in [0, 1]")
        return grid
