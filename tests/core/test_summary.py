"""The block a run ends with (xmc_core/app/summary.py): hand-made inputs, exact lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from xmc_core.app.summary import SUMMARY_METRICS, RunSummary, cache_line, format_seconds
from xmc_core.evaluation.metrics import metric_line, percent


def test_summary_block_exact_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    summary = RunSummary(
        family="xr_linear",
        dataset="/data/datasets/reuters",
        metrics={"P@1": 0.79333, "P@3": 0.5, "P@5": 0.385949, "nDCG@5": 0.68149, "R@5": 0.6},
        model=str(tmp_path / "models" / "m"),
        seconds=66.4,
        data="6000 train / 1500 test docs, 957 labels",
        mlflow="run abc123  http://127.0.0.1:5000/#/experiments/1/runs/abc123",
        registry="xmc version 3: promoted to xmc@champion (no champion before)",
    )
    assert summary.format().splitlines() == [
        "xmc run summary: xr_linear on reuters (1m06s)",
        "  data      6000 train / 1500 test docs, 957 labels",
        "  test      P@1 79.33%  P@5 38.59%  nDCG@5 68.15%",
        "  model     models/m  (xmc predict models/m docs.txt out.jsonl)",
        "  mlflow    run abc123  http://127.0.0.1:5000/#/experiments/1/runs/abc123",
        "  registry  xmc version 3: promoted to xmc@champion (no champion before)",
    ]


def test_summary_says_how_many_stages_came_from_the_cache() -> None:
    rerun = RunSummary("xr_linear", "ds", {"P@1": 1.0}, "/m", cache=cache_line(15, 15))
    assert rerun.format().splitlines()[-1] == (
        "  cache     15 of 15 stages reused from earlier runs (their inputs unchanged)"
    )
    assert cache_line(1, 1) == "1 of 1 stage reused from earlier runs (its inputs unchanged)"
    assert cache_line(0, 15) == ""  # a run that computed everything: nothing to say


def test_summary_leaves_out_what_the_run_did_not_do() -> None:
    lines = RunSummary("xr_linear", "ds", {"P@1": 1.0}, "/abs/model").format().splitlines()
    assert lines == [
        "xmc run summary: xr_linear on ds",
        "  test      P@1 100.00%",
        "  model     /abs/model  (xmc predict /abs/model docs.txt out.jsonl)",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"), [(8.24, "8.2 s"), (59.94, "59.9 s"), (185, "3m05s"), (3725, "1h02m")]
)
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_metric_line_rounds_to_two_decimals_in_percent() -> None:
    line = metric_line({"PSP@5": 0.123456, "P@1": 0.5}, SUMMARY_METRICS)
    assert line == "P@1 50.00%  PSP@5 12.35%"
    described = metric_line({"P@5": 0.25, "P@1": 1.0}, ("P@1", "P@5"), sep=", ")
    assert described == "P@1 100.00%, P@5 25.00%"
    assert metric_line({"R@3": 0.5}, SUMMARY_METRICS) == ""
    assert [percent(0.79333), percent(None), percent(float("nan"))] == ["79.33%", "n/a", "n/a"]
