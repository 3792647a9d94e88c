"""The artifacts the lifecycle stages read and write (each a ``save(folder)`` /
``load(folder)`` pair, as every stage output): a model folder and a text file read as they are,
JSON records (the MLflow run, the promotion decision), the run report and predictions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from xmc_core.app.predictions import read_predictions, write_predictions
from xmc_core.evaluation.report import read_json
from xmc_core.storage.artifacts import read_meta, write_meta
from xmc_core.storage.atomic import write_json
from xmc_core.storage.paths import require_model_folder

PREDICTIONS_FILE = "predictions.parquet"
REPORT_FILE = "report.md"
TABLE_FILE = "table.json"


@dataclass(frozen=True)
class ModelFolder:
    """A saved model folder (``xmc train``'s, or one the flow published), read where it is: the
    tracking stage logs its files."""

    path: Path

    @classmethod
    def load(cls, folder: str | Path) -> ModelFolder:
        require_model_folder(Path(folder))
        return cls(Path(folder))


@dataclass(frozen=True)
class TextFile:
    """A text file of documents, one a line, read where it is (its chunks key the stages)."""

    path: Path

    @classmethod
    def load(cls, path: str | Path) -> TextFile:
        return cls(Path(path))


@dataclass(frozen=True)
class Record:
    """A JSON object as ``<FILE>`` beside a ``meta.json`` naming the class."""

    values: dict[str, Any]
    FILE: ClassVar[str] = "record.json"

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / self.FILE, self.values)
        write_meta(folder, type(self).__name__, {})

    @classmethod
    def load(cls, folder: str | Path) -> Any:
        read_meta(folder, cls.__name__)
        return cls(read_json(Path(folder) / cls.FILE))


@dataclass(frozen=True)
class TrackedRun(Record):
    """The MLflow run of a training run (``run_id``, ``experiment_id``, ``model_uri``,
    ``version``: the registered version or None, ``artifact_uri``, ``tracking_uri``,
    ``run_url``)."""

    FILE: ClassVar[str] = "tracked.json"


@dataclass(frozen=True)
class GateDecision(Record):
    """The gated promotion's decision (``xmc_core.serving.registry.store.Decision`` as a dict)."""

    FILE: ClassVar[str] = "decision.json"


@dataclass(frozen=True)
class RunReportFiles:
    """The run report: ``report.md`` and the metrics table (rows of ``metric``, ``train``,
    ``test``, ``champion``) of a folder the report stage wrote."""

    markdown: str
    table: list[dict[str, Any]]
    folder: Path

    @classmethod
    def load(cls, folder: str | Path) -> RunReportFiles:
        folder = Path(folder)
        read_meta(folder, cls.__name__)
        markdown = (folder / REPORT_FILE).read_text(encoding="utf-8")
        return cls(markdown, read_json(folder / TABLE_FILE), folder)


@dataclass(frozen=True)
class Predictions:
    """Predictions of documents: a table ``doc_id, labels, scores`` (best first), saved as
    ``predictions.parquet``."""

    table: pa.Table

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_predictions(self.table, folder / PREDICTIONS_FILE)
        write_meta(folder, "Predictions", {"n_docs": self.table.num_rows})

    @classmethod
    def load(cls, folder: str | Path) -> Predictions:
        read_meta(folder, "Predictions")
        return cls(read_predictions([Path(folder) / PREDICTIONS_FILE]))
