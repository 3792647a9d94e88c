"""The report of one training run, built from plain data: Markdown for people, a table for UIs.

Sections: dataset (the corpus manifest), metrics per split against the registered champion,
the promotion decision, diagnostics per tree level, stage timings, plots and the MLflow run.
Figures are in percent with two decimals. Plots are embedded as ``data:image/png`` images, so
the report shows them wherever Markdown is rendered (the Prefect UI included) with no server.
Nothing here reads files or talks to a server; the caller gathers the data.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SPLITS = ("train", "test")
FAMILIES = ("P", "nDCG", "R", "PSP")
"""Order of the metric families in tables (others follow, in the order first seen)."""
_METRIC = re.compile(r"(.+)@(\d+)")
MAX_EMBEDDED_PNG_BYTES = 300_000
"""Larger plots are not embedded in the report (its local file is still named)."""
MEMBER_METRICS = ("P@1", "P@3", "P@5", "nDCG@5", "PSP@5")
"""The test metrics shown for each member of an ensemble (those present)."""
MLFLOW_UI = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves by default (for the command the report prints)."""


@dataclass(frozen=True)
class RunReport:
    """``markdown``: the whole report; ``table``: one row per metric (metric, train, test,
    champion), values fractions in [0, 1] or None."""

    markdown: str
    table: list[dict[str, Any]]


def metrics_table(
    metrics: Mapping[str, Mapping[str, float]],
    champion: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """One row per metric name: ``{"metric", "train", "test", "champion"}`` (None if absent).

    ``metrics``: ``{split: {"P@1": 0.8, ...}}``; ``champion``: the champion's metrics on the
    same held-out documents. Rows are ordered by metric family (first seen), then k.
    """
    names: list[str] = []
    for split_metrics in metrics.values():
        names += [n for n in split_metrics if n not in names]
    names += [n for n in champion or {} if n not in names]
    families = list(dict.fromkeys([*FAMILIES, *(_family(n)[0] for n in names)]))
    names.sort(key=lambda n: (families.index(_family(n)[0]), _family(n)[1]))
    return [
        {
            "metric": name,
            **{split: _get(metrics.get(split), name) for split in SPLITS},
            "champion": _get(champion, name),
        }
        for name in names
    ]


def percent_table(table: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`metrics_table` rows for people: ``{"metric", "train (%)", "test (%)",
    "champion (%)"}``, values in percent rounded to two decimals (None if absent)."""
    return [
        {
            "metric": row["metric"],
            **{f"{col} (%)": _rounded_pct(row[col]) for col in (*SPLITS, "champion")},
        }
        for row in table
    ]


def png_data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` of a PNG, or "" when it is over
    :data:`MAX_EMBEDDED_PNG_BYTES`."""
    if len(png) > MAX_EMBEDDED_PNG_BYTES:
        return ""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def champion_metrics(decision: Mapping[str, Any] | None) -> dict[str, float]:
    """What a promotion decision says about the champion: ``{metric: champion_value}``."""
    if not decision or decision.get("champion_value") is None:
        return {}
    return {str(decision["metric"]): float(decision["champion_value"])}


def build_report(
    title: str,
    metrics: Mapping[str, Mapping[str, float]],
    manifest: Mapping[str, Any] | None = None,
    timings: Mapping[str, float] | None = None,
    decision: Mapping[str, Any] | None = None,
    plots: Sequence[Mapping[str, str]] = (),
    run: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    champion: Mapping[str, float] | None = None,
    intake: Mapping[str, Any] | None = None,
    no_decision: str = "",
    members: Sequence[Mapping[str, Any]] = (),
) -> RunReport:
    """The report of one run.

    ``metrics``: ``{split: {name: value}}``; ``manifest``: the corpus ``manifest.json``;
    ``timings``: wall seconds per stage; ``decision``: the promotion decision (keys model_name,
    alias, version, previous, metric, new_value, champion_value, margin, promoted, reason), None
    when the registry is off; ``plots``: ``[{"title", "image", "local"}]``: its title, the PNG
    as a data URI (:func:`png_data_uri`, "" to show only the path) and its local path;
    ``run``: MLflow run fields (run_id, experiment_id, model_uri, version, tracking_uri, url:
    the run's page on a tracking server, else None), None when tracking is off;
    ``diagnostics``: ``diagnostics.json``;
    ``champion``: the champion's metrics (default: the decision's champion value);
    ``intake``: what the retrain flow's intake did (``IntakeResult.to_dict()``), None outside it;
    ``no_decision``: why there is no decision (default: the registry is off);
    ``members``: an ensemble's members, ``[{"member": label, "metrics": test metrics}]``.
    """
    table = metrics_table(metrics, champion if champion is not None else champion_metrics(decision))
    sections = [
        f"# {title}",
        intake_section(intake),
        _dataset_section(manifest),
        _metrics_section(table),
        _members_section(members, metrics.get("test") or {}),
        _decision_section(decision, no_decision),
        _diagnostics_section(diagnostics),
        _timings_section(timings),
        _plots_section(plots),
        _run_section(run),
    ]
    return RunReport("\n\n".join(s for s in sections if s) + "\n", table)


def intake_section(intake: Mapping[str, Any] | None) -> str:
    """``## Intake``: the drops ingested, and each refused one with where it went and why."""
    if not intake:
        return ""
    lines = ["## Intake", "", f"- ingested: {', '.join(intake.get('ingested') or []) or 'none'}"]
    if intake.get("start"):  # how the training started (the retrain flow's start plan)
        lines.append(f"- start: {intake['start']}")
    if intake.get("resumed"):
        lines.append(f"- finished the interrupted batch of: {', '.join(intake['resumed'])}")
    quarantined, stuck = intake.get("quarantined") or [], intake.get("stuck") or []
    if not quarantined and not stuck:
        return "\n".join(lines)
    lines += ["", f"**{len(quarantined) + len(stuck)} drop(s) refused**: fix and drop them again."]
    for q in quarantined:
        lines += _refused(q["name"], f"moved to {q['to']}", q["reason"])
    for q in stuck:
        lines += _refused(q["name"], f"left in the landing folder ({q['error']})", q["reason"])
    return "\n".join(lines)


def _refused(name: str, where: str, reason: str) -> list[str]:
    body = [f"drop:   {name!r}", f"status: {where}", *reason.splitlines()]
    return ["", "```text", *(line.replace("`", "'") for line in body), "```"]


def _dataset_section(manifest: Mapping[str, Any] | None) -> str:
    if not manifest:
        return ""
    splits = manifest.get("splits", {})
    rows = [
        ("kind", manifest.get("kind")),
        *((f"{s} documents", splits.get(s, {}).get("rows")) for s in SPLITS),
        *((f"{s} label assignments", splits.get(s, {}).get("label_assignments")) for s in SPLITS),
        ("labels", manifest.get("n_labels")),
        ("test labels unseen in train", manifest.get("unseen_test_labels")),
        ("features (bag of words)", manifest.get("n_features")),
        ("fingerprint", _code(str(manifest.get("fingerprint", ""))[:16])),
        ("created", manifest.get("created_at")),
    ]
    body = _table(["", "value"], [[name, value] for name, value in rows if value is not None])
    return f"## Dataset\n\n{body}"


def _metrics_section(table: list[dict[str, Any]]) -> str:
    if not table:
        return "## Metrics\n\nNo metrics."
    show_champion = any(row["champion"] is not None for row in table)
    header = ["metric (%)", *SPLITS] + (["champion", "test - champion"] if show_champion else [])
    rows = []
    for row in table:
        cells = [row["metric"], *(_pct(row[s]) for s in SPLITS)]
        if show_champion:
            delta = None
            if row["test"] is not None and row["champion"] is not None:
                delta = row["test"] - row["champion"]
            cells += [_pct(row["champion"]), _pct(delta, signed=True)]
        rows.append(cells)
    return f"## Metrics\n\n{_table(header, rows)}"


def _members_section(members: Sequence[Mapping[str, Any]], ensemble: Mapping[str, float]) -> str:
    """``## Ensemble members``: each member's test metrics beside the ensemble's."""
    if not members:
        return ""
    found = [*ensemble, *(n for m in members for n in m["metrics"])]
    names = [n for n in MEMBER_METRICS if n in found]
    rows = [
        [f"{i}: {m['member']}", *(_pct(_get(m["metrics"], n)) for n in names)]
        for i, m in enumerate(members)
    ]
    rows.append(["**ensemble**", *(_pct(_get(ensemble, n)) for n in names)])
    body = _table(["member", *(f"{n} (%)" for n in names)], rows)
    return f"## Ensemble members\n\nTest split.\n\n{body}"


def _decision_section(decision: Mapping[str, Any] | None, no_decision: str = "") -> str:
    if decision is None:
        why = no_decision or "model registry disabled: no version registered, nothing promoted"
        return f"## Promotion\n\n{why[0].upper()}{why[1:]}."
    name, alias = decision.get("model_name"), decision.get("alias")
    verdict = "**promoted**" if decision.get("promoted") else "**not promoted**"
    verdict += " (refused: not compared)" if decision.get("refused") else ""
    head = f"Version {decision.get('version')} of `{name}`: {verdict} to `@{alias}`."
    rows = [
        ["metric", decision.get("metric")],
        ["new version", _pct(decision.get("new_value"))],
        ["champion", _pct(decision.get("champion_value"))],
        ["required margin", _pct(decision.get("margin"))],
        ["previous champion version", decision.get("previous") or "none"],
        ["reason", decision.get("reason")],
    ]
    if decision.get("fix"):
        rows.append(["fix", decision.get("fix")])
    return f"## Promotion\n\n{head}\n\n{_table(['', 'value (%)'], rows)}"


def _diagnostics_section(diagnostics: Mapping[str, Any] | None) -> str:
    if not diagnostics:
        return ""
    beam = diagnostics.get("beam_recall", {})
    loss = diagnostics.get("training_loss", {})
    columns = [(f"beam recall {s} (%)", beam[s], True) for s in _splits_first(beam)]
    loss_name = diagnostics.get("loss", "loss")
    columns += [(f"{loss_name} {s}", loss[s], False) for s in _splits_first(loss)]
    if not columns:
        return ""
    depth = max(len(values) for _, values, _ in columns)
    rows = [
        [t, *(_level_value(values, t, pct) for _, values, pct in columns)] for t in range(depth)
    ]
    beam_size = diagnostics.get("beam_size")
    note = f"Beam size {beam_size}; losses over teacher-forced pairs.\n\n" if beam_size else ""
    return f"## Per tree level\n\n{note}{_table(['level', *(c for c, _, _ in columns)], rows)}"


def _timings_section(timings: Mapping[str, float] | None) -> str:
    if not timings:
        return ""
    ordered = sorted(timings.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = [[name, f"{seconds:.2f}"] for name, seconds in ordered]
    rows.append(["**total**", f"**{sum(timings.values()):.2f}**"])
    return (
        f"## Stage timings\n\nCached stages take about 0 s.\n\n{_table(['stage', 'seconds'], rows)}"
    )


def _plots_section(plots: Sequence[Mapping[str, str]]) -> str:
    if not plots:
        return ""
    parts = ["## Plots"]
    for plot in plots:
        title = plot.get("title", "")
        parts.append(f"### {title}")
        if plot.get("image"):
            parts.append(f"![{title}]({plot['image']})")
        if plot.get("local"):
            parts.append(f"File: {_code(plot['local'])}")
    return "\n\n".join(parts)


def _run_section(run: Mapping[str, Any] | None) -> str:
    if not run:
        return "## MLflow\n\nTracking disabled."
    run_id, url = run.get("run_id"), run.get("url")
    rows = [
        ["run", _link(url, run_id) if url else _code(run_id)],
        ["experiment", run.get("experiment_id")],
        ["tracking URI", _code(run.get("tracking_uri"))],
        ["model", _code(run.get("model_uri"))],
        ["registered version", run.get("version")],
    ]
    body = _table(["", "value"], [r for r in rows if r[1] not in (None, "", "``")])
    if url or not run.get("tracking_uri"):
        return f"## MLflow\n\n{body}"
    page = f"{MLFLOW_UI}/#/experiments/{run.get('experiment_id')}/runs/{run_id}"
    see = f"To see the run: `mlflow ui --backend-store-uri {run['tracking_uri']}`, then open {page}"
    return f"## MLflow\n\n{body}\n\n{see}"


def _splits_first(per_split: Mapping[str, Any]) -> list[str]:
    """Keys of ``per_split``: train, test, then any other split."""
    return [s for s in SPLITS if s in per_split] + [s for s in per_split if s not in SPLITS]


def _family(name: str) -> tuple[str, int]:
    match = _METRIC.fullmatch(name)
    return (match[1], int(match[2])) if match else (name, 0)


def _get(values: Mapping[str, float] | None, name: str) -> float | None:
    if values is None or values.get(name) is None:
        return None
    return float(values[name])


def _pct(value: Any, signed: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):
        return f"{100 * value:+.2f}" if signed else f"{100 * value:.2f}"
    return str(value)


def _rounded_pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def _level_value(values: Sequence[float], t: int, pct: bool) -> str:
    if t >= len(values):
        return "-"
    return _pct(values[t]) if pct else f"{values[t]:.4f}"


def _code(text: Any) -> str:
    return "" if text in (None, "") else f"`{text}`"


def _link(target: str, text: Any = None) -> str:
    return f"[{text or target}]({target})" if target else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; ``|`` in cells is escaped."""

    def cell(value: Any) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
