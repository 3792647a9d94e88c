"""The run report of a training run, built from what the lifecycle stages produced (corpus
manifest, metrics of both splits, diagnostics with their plots, the MLflow run, the promotion)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xmc_core.config import XmcConfig
from xmc_core.evaluation.outcome import promotion_outcome
from xmc_core.evaluation.plots import TITLES
from xmc_core.evaluation.report import read_json
from xmc_core.evaluation.run_report import RunReport, build_report, png_data_uri
from xmc_core.families.configured import trained_families


def report_plots(diagnostics: Path) -> list[dict[str, str]]:
    """The plots of a diagnostics folder in the report's order: ``{"title", "image" (a data
    URI, "" when the file is missing), "local" (its path from the folder holding
    ``diagnostics``, where ``report.md`` is)}``."""
    summary = read_json(diagnostics / "diagnostics.json")
    order = [*TITLES]
    named = summary.get("plots", {})
    plots = []
    for name in sorted(named, key=lambda n: (order.index(n) if n in order else len(order), n)):
        local = diagnostics / "plots" / named[name]
        image = png_data_uri(local.read_bytes()) if local.is_file() else ""
        shown = str(local.relative_to(diagnostics.parent))  # beside report.md wherever it goes
        plots.append({"title": TITLES.get(name, name), "image": image, "local": shown})
    return plots


def member_metrics(cfg: XmcConfig, members: Sequence[Mapping[str, float]]) -> list[dict[str, Any]]:
    """An ensemble's members' test metrics (in member order), each with the member's label;
    [] for other families."""
    if not members:
        return []
    labels = [member.label for member, _ in trained_families(cfg)]
    return [
        {"member": label, "metrics": dict(metrics)}
        for label, metrics in zip(labels, members, strict=True)
    ]


def gather_report(
    cfg: XmcConfig,
    title: str,
    corpus_dir: Path,
    metrics: Mapping[str, Mapping[str, float]],
    diagnostics: Path,
    timings: Mapping[str, float],
    tracking: Mapping[str, Any] | None,
    decision: Mapping[str, Any] | None,
    intake: Mapping[str, Any] | None = None,
    members: Sequence[Mapping[str, float]] = (),
) -> RunReport:
    """The report of a training run: ``metrics`` ``{split: {name: value}}``; ``diagnostics``: a
    folder with ``diagnostics.json`` and ``plots/``; ``tracking``: the MLflow run (None: not
    tracked); ``decision``: the promotion decision (None: none taken); ``intake``: what the
    retrain flow's intake did (None outside it); ``members``: an ensemble's members' test
    metrics."""
    manifest_file = Path(corpus_dir) / "manifest.json"
    run = dict(tracking) if tracking else None
    if run is not None:
        run.setdefault("tracking_uri", cfg.tracking_uri())
        run["url"] = run.get("run_url")
    return build_report(
        title,
        {split: dict(values) for split, values in metrics.items()},
        manifest=read_json(manifest_file) if manifest_file.is_file() else None,
        timings=timings,
        decision=decision,
        plots=report_plots(diagnostics),
        run=run,
        diagnostics=read_json(diagnostics / "diagnostics.json"),
        intake=intake,
        no_decision=promotion_outcome(cfg, None)[1] if decision is None else "",
        members=member_metrics(cfg, members),
    )
