"""The run report: its metrics table and the sections of its Markdown."""

from __future__ import annotations

import base64

from xmc_core.evaluation.run_report import (
    MAX_EMBEDDED_PNG_BYTES,
    build_report,
    champion_metrics,
    metrics_table,
    percent_table,
    png_data_uri,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(20))

METRICS = {
    "train": {"P@1": 0.9, "P@3": 0.6, "nDCG@1": 0.9, "R@10": 0.95},
    "test": {"P@1": 0.8, "P@3": 0.5, "nDCG@1": 0.8, "PSP@1": 0.4},
}
DECISION = {
    "model_name": "xmc",
    "alias": "champion",
    "version": "3",
    "previous": "2",
    "metric": "P@1",
    "new_value": 0.8,
    "champion_value": 0.75,
    "margin": 0.001,
    "promoted": True,
    "reason": "P@1 0.8000 >= champion 0.7500 + 0.0010",
}
MANIFEST = {
    "kind": "text",
    "splits": {"train": {"rows": 400, "label_assignments": 900}, "test": {"rows": 120}},
    "n_labels": 54,
    "unseen_test_labels": 2,
    "fingerprint": "abcdef0123456789ffff",
    "created_at": "2026-11-21T00:00:00Z",
}


def test_metrics_table_one_row_per_metric() -> None:
    table = metrics_table(METRICS, {"P@1": 0.75})
    assert [row["metric"] for row in table] == ["P@1", "P@3", "nDCG@1", "R@10", "PSP@1"]
    assert table[0] == {"metric": "P@1", "train": 0.9, "test": 0.8, "champion": 0.75}
    assert table[3] == {"metric": "R@10", "train": 0.95, "test": None, "champion": None}
    assert table[4]["train"] is None


def test_metrics_table_orders_families_then_k() -> None:
    metrics = {"test": {"PSP@1": 0.2, "P@10": 0.1, "P@3": 0.3, "P@1": 0.5, "nDCG@3": 0.4}}
    table = metrics_table(metrics)
    assert [row["metric"] for row in table] == ["P@1", "P@3", "P@10", "nDCG@3", "PSP@1"]


def test_champion_metrics_from_decision() -> None:
    assert champion_metrics(DECISION) == {"P@1": 0.75}
    assert champion_metrics(None) == {}
    assert champion_metrics({**DECISION, "champion_value": None}) == {}


def test_full_report() -> None:
    report = build_report(
        "xmc run report",
        METRICS,
        manifest=MANIFEST,
        timings={"evaluate": 1.5, "train-level-0": 3.25, "label-tree": 0.0},
        decision=DECISION,
        plots=[
            {"title": "P@k", "image": png_data_uri(PNG), "local": "/w/plots/k_curves.png"},
            {"title": "big", "image": "", "local": "/w/plots/big.png"},
        ],
        run={"run_id": "r1", "experiment_id": "7", "url": "http://h/#/experiments/7/runs/r1"},
        diagnostics={
            "beam_size": 10,
            "loss": "squared_hinge",
            "beam_recall": {"test": [1.0, 0.5], "train": [1.0, 0.75]},
            "training_loss": {"train": [0.25, 0.125]},
        },
    )
    md = report.markdown
    assert md.startswith("# xmc run report\n")
    assert report.table[0]["champion"] == 0.75
    assert "| P@1 | 90.00 | 80.00 | 75.00 | +5.00 |" in md
    assert "| R@10 | 95.00 | - | - | - |" in md
    assert "| test documents | 120 |" in md and "`abcdef0123456789`" in md
    assert "Version 3 of `xmc`: **promoted** to `@champion`." in md
    assert "| required margin | 0.10 |" in md
    assert "| level | beam recall train (%) | beam recall test (%) | squared_hinge train |" in md
    assert "| 1 | 75.00 | 50.00 | 0.1250 |" in md
    timings = md.split("## Stage timings")[1]
    assert timings.index("train-level-0") < timings.index("evaluate") < timings.index("label-tree")
    assert "| **total** | **4.75** |" in md
    embedded = "![P@k](data:image/png;base64," + base64.b64encode(PNG).decode() + ")"
    assert f"### P@k\n\n{embedded}\n\nFile: `/w/plots/k_curves.png`" in md
    assert "### big\n\nFile: `/w/plots/big.png`" in md and md.count("![") == 1
    assert "| run | [r1](http://h/#/experiments/7/runs/r1) |" in md
    assert "mlflow ui" not in md  # a tracking server: the link is enough


def test_local_store_gets_the_command_to_see_the_run() -> None:
    run = {"run_id": "r1", "experiment_id": "7", "tracking_uri": "sqlite:////w/mlflow.db"}
    md = build_report("r", {"test": {}}, run=run).markdown
    assert "| run | `r1` |" in md
    assert (
        "To see the run: `mlflow ui --backend-store-uri sqlite:////w/mlflow.db`, then open "
        "http://127.0.0.1:5000/#/experiments/7/runs/r1" in md
    )


def test_percent_table_and_data_uri() -> None:
    rows = percent_table(metrics_table(METRICS, {"P@1": 0.75}))
    assert rows[0] == {"metric": "P@1", "train (%)": 90.0, "test (%)": 80.0, "champion (%)": 75.0}
    assert rows[1] == {"metric": "P@3", "train (%)": 60.0, "test (%)": 50.0, "champion (%)": None}
    third = percent_table([{"metric": "P@1", "train": 1 / 3, "test": 0.79333, "champion": None}])
    assert third[0]["train (%)"] == 33.33 and third[0]["test (%)"] == 79.33
    assert png_data_uri(PNG) == "data:image/png;base64,iVBORw0KGgoAAQIDBAUGBwgJCgsMDQ4PEBESEw=="
    assert png_data_uri(b"x" * (MAX_EMBEDDED_PNG_BYTES + 1)) == ""


def test_report_without_registry_tracking_or_extras() -> None:
    report = build_report("r", {"test": {"P@1": 0.5}})
    assert (
        "## Promotion\n\nModel registry disabled: no version registered, nothing promoted.\n"
        in (report.markdown)
    )
    why = build_report("r", {}, no_decision="not registered: tracking disabled").markdown
    assert "## Promotion\n\nNot registered: tracking disabled.\n" in why
    assert "Tracking disabled." in report.markdown
    assert "champion" not in report.markdown.split("## Metrics")[1].split("##")[0]
    assert "## Stage timings" not in report.markdown and "## Plots" not in report.markdown
    assert report.table == [{"metric": "P@1", "train": None, "test": 0.5, "champion": None}]


def test_pipes_in_cells_are_escaped() -> None:
    report = build_report("r", {"test": {}}, decision={**DECISION, "reason": "a | b"})
    assert "a \\| b" in report.markdown


def test_an_ensembles_members_are_shown_beside_it() -> None:
    members = [
        {"member": "xr_linear tree.seed=0", "metrics": {"P@1": 0.79, "P@5": 0.385}},
        {"member": "xr_linear tree.seed=1", "metrics": {"P@1": 0.8}},
    ]
    report = build_report("t", {"test": {"P@1": 0.81, "P@5": 0.39}}, members=members).markdown
    section = report.split("## Ensemble members\n\nTest split.\n\n")[1].split("\n\n")[0]
    assert section.splitlines() == [
        "| member | P@1 (%) | P@5 (%) |",
        "|---|---|---|",
        "| 0: xr_linear tree.seed=0 | 79.00 | 38.50 |",
        "| 1: xr_linear tree.seed=1 | 80.00 | - |",
        "| **ensemble** | 81.00 | 39.00 |",
    ]
    assert "## Ensemble members" not in build_report("t", {"test": {"P@1": 0.8}}).markdown
