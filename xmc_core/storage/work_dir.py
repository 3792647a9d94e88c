"""The work-dir layout: every folder xmc keeps under ``work_dir``, decided here and only here.

::

    <work_dir>/artifacts/<stage>/<key>/   one finished stage output (content-addressed; also
                                          Prefect's result storage: its cache records live
                                          inside the artifact folders they point at)
    <work_dir>/models/<key>/              a trained model as the flows hand it out (the model
                                          stage's artifact, its config, metrics and dataset)
    <work_dir>/datasets/                  dataset folders made by the flows (synthetic corpus)
    <work_dir>/corpora/                   the retrain flow's training corpora (merged intake)
    <work_dir>/landing, quarantine, landing-archive
                                          the retrain flow's drop folders (defaults)
    <work_dir>/encoder-states/<digest>/   hidden states below a warm start's trainable encoder
                                          layers, per lineage (xmc_core.transformer.states)
    <work_dir>/mlflow/                    the default MLflow store (mlflow.db, artifacts/),
                  serving-cache/          and the registry models downloaded to serve
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESULT_FILE = "prefect-result.json"
"""Prefect's cache record inside an artifact folder (see ``tasks.cache_records``)."""


@dataclass(frozen=True)
class WorkDir:
    """Paths under one ``work_dir`` (absolute)."""

    root: Path

    @classmethod
    def of(cls, work_dir: str | Path) -> WorkDir:
        return cls(Path(work_dir).resolve())

    @property
    def artifacts(self) -> Path:
        """Root of the stage artifacts, and Prefect's result storage."""
        return self.root / "artifacts"

    def artifact(self, stage: str, key: str) -> Path:
        """Where the output of ``stage`` with cache key ``key`` lives."""
        return self.artifacts / stage / key

    def model(self, key: str) -> Path:
        """A model folder the flows publish: the model stage's artifact with its records
        (``xmc_core.model.model_folder``), content-addressed."""
        return self.root / "models" / key

    @property
    def datasets(self) -> Path:
        """Dataset folders the flows write (the synthetic corpus)."""
        return self.root / "datasets"

    @property
    def corpora(self) -> Path:
        """The retrain flow's training corpora."""
        return self.root / "corpora"

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def landing_archive(self) -> Path:
        return self.root / "landing-archive"

    @property
    def encoder_states(self) -> Path:
        """The encoder-state caches (:mod:`xmc_core.transformer.states`), one per lineage."""
        return self.root / "encoder-states"

    @property
    def mlflow(self) -> Path:
        """The default MLflow store: ``mlflow.db`` and ``artifacts/``."""
        return self.root / "mlflow"

    @property
    def serving_cache(self) -> Path:
        """Registry models downloaded to serve."""
        return self.mlflow / "serving-cache"
