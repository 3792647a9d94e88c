"""The block a run ends with, in the terminal and the Prefect logs: what was trained on what, the
test figures (once), where the model is, and what the registry did with it.

    xmc run summary: xr_linear on synthetic-x1-seed0-08160ee4897c (38.2 s)
      data      6000 train / 1500 test docs, 957 labels
      test      P@1 79.33%  P@5 38.59%  nDCG@5 68.15%  PSP@5 48.61%
      model     data/models/c8cc6c66...  (xmc predict data/models/c8cc6c66... docs.txt out.jsonl)
      mlflow    run c52126dd...  http://127.0.0.1:5000/#/experiments/1/runs/c52126dd...
      registry  version 1 promoted to xmc-synthetic@champion (no champion before)

A rerun adds ``cache     15 of 15 stages reused from earlier runs (their inputs unchanged)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xmc_core.corpus import Corpus
from xmc_core.evaluation.metrics import metric_line, percent
from xmc_core.evaluation.report import corpus_line, read_json
from xmc_core.families.common import METRICS_FILE
from xmc_core.progress import duration
from xmc_core.wording import counted

SUMMARY_METRICS = ("P@1", "P@5", "nDCG@5", "PSP@5", "ECE@5")
"""The test figures a summary shows, in this order (those present)."""


@dataclass(frozen=True)
class RunSummary:
    """What a finished training run tells the person who started it.

    ``metrics``: test metrics as fractions (``{"P@1": 0.7933, ...}``); ``model``: a folder
    ``xmc predict`` loads; ``mlflow``, ``registry``: one line each, or "" when not tracked.
    """

    family: str
    dataset: str
    metrics: Mapping[str, float]
    model: str
    seconds: float | None = None
    data: str = ""
    mlflow: str = ""
    registry: str = ""
    cache: str = ""
    """How many stages an earlier run had computed already (:func:`cache_line`)."""
    extra: dict[str, str] = field(default_factory=dict)
    predict_args: str = "docs.txt out.jsonl"
    """What the model row's ``xmc predict`` hint passes after the model."""

    def format(self) -> str:
        """The block, a few lines, floats rounded (percent with two decimals)."""
        took = f" ({format_seconds(self.seconds)})" if self.seconds is not None else ""
        lines = [f"xmc run summary: {self.family} on {Path(self.dataset).name}{took}"]
        model = display_path(self.model)
        rows = [
            ("data", self.data),
            ("test", metric_line(self.metrics, SUMMARY_METRICS)),
            ("model", f"{model}  (xmc predict {model} {self.predict_args})"),
            ("mlflow", self.mlflow),
            ("registry", self.registry),
            ("cache", self.cache),
            *self.extra.items(),
        ]
        lines += [f"  {name:<9} {value}" for name, value in rows if value]
        return "\n".join(lines)


def flow_summary(
    outputs: Mapping[str, str], family: str, seconds: float | None = None
) -> RunSummary:
    """The summary of a ``train`` flow run from what it returns: ``corpus``, ``evaluation``
    (folder of the test ``metrics.json``), ``model``, ``stages`` and ``stages_cached``, and
    when tracked ``mlflow_run``, ``mlflow_url``, ``promotion_reason`` (``version 3 promoted to
    xmc-reuters@champion ...``), ``promotion_fix`` (a refusal's: its own row)."""
    corpus = Corpus(outputs["corpus"])
    mlflow = ""
    if outputs.get("mlflow_run"):
        mlflow = f"run {outputs['mlflow_run']}"
        if outputs.get("mlflow_url"):
            mlflow += f"  {outputs['mlflow_url']}"
    registry = outputs.get("promotion_reason", "")
    extra = {"fix": outputs["promotion_fix"]} if outputs.get("promotion_fix") else {}
    members = [
        read_json(Path(folder) / METRICS_FILE)
        for folder in json.loads(outputs.get("member_evaluations") or "[]")
    ]
    return RunSummary(
        family=family,
        dataset=str(corpus.path),
        metrics=read_json(Path(outputs["evaluation"]) / METRICS_FILE),
        model=outputs["model"],
        seconds=seconds,
        data=corpus_line(corpus.manifest),
        mlflow=mlflow,
        registry=registry,
        cache=cache_line(int(outputs.get("stages_cached") or 0), int(outputs.get("stages") or 0)),
        extra={**extra, "members": members_line(members)} if members else extra,
    )


def cache_line(reused: int, calls: int) -> str:
    """``12 of 15 stages reused from earlier runs (their inputs unchanged)``; "" when none was."""
    if not reused:
        return ""
    their = "its" if reused == 1 else "their"
    stages = counted(calls, "stage")
    return f"{reused:,} of {stages} reused from earlier runs ({their} inputs unchanged)"


def members_line(metrics: Sequence[Mapping[str, float]]) -> str:
    """An ensemble's members' test P@1, in member order: ``P@1 79.33% / 79.53% / 79.20%``
    ("" when there are none)."""
    if not metrics:
        return ""
    return "P@1 " + " / ".join(percent(m["P@1"]) if "P@1" in m else "-" for m in metrics)


def format_seconds(seconds: float) -> str:
    """``8.2 s`` under a minute (a run's time to a tenth), else :func:`~xmc_core.progress.duration`
    (``3m05s``, ``1h02m``)."""
    return f"{seconds:.1f} s" if seconds < 60 else duration(seconds)


def display_path(path: str | Path) -> str:
    """``path`` relative to the working folder when it lies under it (shorter to copy), else
    absolute."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(resolved)
