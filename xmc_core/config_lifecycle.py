"""Config sections of what follows training: MLflow tracking, the model registry and its gated
promotion, the retrain flow's landing folder, and ``xmc serve``. Part of the one typed
configuration (:class:`xmc_core.config.XmcConfig` holds them as ``tracking``, ``registry``,
``retrain`` and ``serve``); defaults are declared here and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from xmc_core.config_section import Section


class TrackingConfig(Section):
    """MLflow tracking of training runs.

    ``uri`` None: ``$MLFLOW_TRACKING_URI`` when set, else SQLite at
    ``<work_dir>/mlflow/mlflow.db`` with artifacts in ``<work_dir>/mlflow/artifacts``.
    """

    enabled: bool = True
    uri: str | None = None
    experiment: str = Field("xmc", min_length=1)
    run_name: str | None = None


DATASET_PLACEHOLDER = "{dataset}"
"""What ``registry.model_name`` replaces by the training corpus's lineage name."""


class RegistryConfig(Section):
    """The MLflow model registry and the gated promotion of a new version to ``alias``.

    ``model_name``: the registered model; ``{dataset}`` in it stands for the lineage name of the
    training corpus (``xmc_core.corpus.lineage``: ``xmc-reuters``, ``xmc-synthetic``), so each
    dataset gets its own model and champion by default. A new version takes the alias when it
    was trained on the holder's lineage and its ``metric`` on the held-out split is at least the
    holder's plus ``margin`` (both evaluated on the same documents), and, with
    ``max_ece_increase``, its ``ece_metric`` is at most the holder's plus that (a calibrated
    holder's alias never goes to an uncalibrated version then); the first version of a model
    takes it unconditionally; a version of another lineage is never compared.
    """

    enabled: bool = True
    model_name: str = Field(
        "xmc-" + DATASET_PLACEHOLDER, min_length=1, description="{dataset}: the lineage name"
    )
    alias: str = Field("champion", min_length=1)
    promote: bool = True
    metric: str = Field("P@1", pattern=r"^(P|nDCG|R|PSP)@\d+$")
    margin: float = Field(0.001, ge=0, description="required gain, as a fraction (0.001 = 0.1 pt)")
    eval_split: Literal["test"] = "test"
    ece_metric: str = Field("ECE@5", pattern=r"^ECE@\d+$", description="with max_ece_increase")
    max_ece_increase: float | None = Field(
        None, ge=0, description="calibration may not get worse by more (a fraction); null: "
        "not checked",
    )  # fmt: skip

    @field_validator("model_name")
    @classmethod
    def _only_the_placeholder(cls, name: str) -> str:
        if any(c in name.replace(DATASET_PLACEHOLDER, "") for c in "{}"):
            raise ValueError(f"{name!r}: no brace but those of {DATASET_PLACEHOLDER}")
        return name

    def for_dataset(self, lineage_name: str) -> RegistryConfig:
        """This section with ``{dataset}`` in ``model_name`` replaced by ``lineage_name``."""
        name = self.model_name.replace(DATASET_PLACEHOLDER, lineage_name)
        return self.model_copy(update={"model_name": name})


class RetrainConfig(Section):
    """The ``retrain`` flow: corpus drops in ``landing_dir`` -> validated, merged, retrained.

    Folders default to ``<work_dir>/landing``, ``<work_dir>/quarantine`` (bad drops, with the
    reason) and ``<work_dir>/landing-archive`` (ingested drops); nothing is deleted.

    ``warm_start``: a retrain starts from the champion of the corpus's lineage (the registry's
    alias holder; without a registry, the model the last retrain trained) when the family can
    (``xr_linear``) and the settings it was trained with are the same: its vocabulary, label ids
    and label tree are kept and extended (``xmc_core.families.warm``). Every ``cold_every``-th
    retrain of a lineage starts cold, which bounds how far the kept vocabulary and clusters
    drift from what the grown corpus would give (1: always cold).
    """

    landing_dir: Path | None = None
    quarantine_dir: Path | None = None
    archive_dir: Path | None = None
    mode: Literal["merge", "replace"] = "merge"
    on_empty: Literal["error", "drop"] = "error"
    on_unlabeled: Literal["error", "drop", "keep"] = "error"
    retrain_without_new_data: bool = False
    warm_start: bool = True
    cold_every: int = Field(5, ge=1, description="every cold_every-th retrain starts cold")


class ServeConfig(Section):
    """``xmc serve``: the address it binds, what one request may ask for (beyond it: 413 or 422)
    and what a connection may take: seconds to send the request head (then 408 and closed) and
    body (then closed), open connections (then 503); how often a served MLflow URI is looked up
    again. ``--host``, ``--port``, ``--header-timeout``, ``--body-timeout`` and
    ``--max-connections`` override them."""

    host: str = Field("127.0.0.1", min_length=1, description="a non-loopback host needs a token")
    port: int = Field(5005, ge=1, le=65535)
    max_texts: int = Field(1000, ge=1, description="texts per request")
    max_body_bytes: int = Field(4 << 20, ge=1, description="bytes per request body")
    max_topk: int = Field(1000, ge=1)
    max_beam_size: int = Field(1000, ge=1)
    header_timeout_s: float = Field(10.0, gt=0, le=3600)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)
    max_connections: int = Field(100, ge=1, le=10_000)
    reload_interval_s: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="seconds between checks whether a served models:/ URI names another version "
        "now (an alias moved), which is then loaded and swapped in; 0: never (POST /reload only)",
    )
