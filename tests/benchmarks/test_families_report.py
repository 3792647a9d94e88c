"""benchmarks/families_report.py: the targets from hand-made results, the Markdown report and
the merge of results files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import families_report as fr
import pytest

STATS = {"n_train": 10, "n_test": 4, "n_features": 7, "n_labels": 3, "featurize_s": 0.5}


def ok_run(p1: float, train_s: float) -> dict[str, Any]:
    """One successful run with every metric at ``p1`` (fractions)."""
    metrics = {f"{m}@{k}": p1 for m in ("P", "nDCG", "PSP", "R") for k in (1, 3, 5)}
    return {
        "status": "ok", "train_s": train_s, "predict_ms_per_1k_docs": 250.0,
        "predict_again_ms_per_1k_docs": 240.0, "peak_rss_mb": 300.0, "model_mb": 1.25,
        "metrics": metrics,
    }  # fmt: skip


def method(*runs: dict[str, Any]) -> dict[str, Any]:
    return fr.summarize(list(runs), {"runner": "test"})


def datasets() -> dict[str, Any]:
    """reuters: our XML-CNN beats LibMultiLabel's, faster; debian-deps: it loses on both, and
    trains past 45 minutes; the ensemble beats Omikuji on reuters only."""
    return {
        "reuters21578-modapte": {"stats": STATS, "methods": {
            "xml-cnn": method(ok_run(0.80, 100.0)),
            "libmultilabel-xml-cnn": method(ok_run(0.78, 120.0)),
            "ensemble": method(ok_run(0.85, 10.0)),
            "omikuji": method(ok_run(0.84, 5.0)),
            "xr-transformer": method(ok_run(0.86, 300.0)),
            "x-transformer": method(ok_run(0.85, 400.0)),
        }},
        "debian-deps": {"stats": STATS, "methods": {
            "xml-cnn": method(ok_run(0.60, 3000.0)),
            "libmultilabel-xml-cnn": method(ok_run(0.62, 2000.0)),
            "ensemble": method(ok_run(0.70, 50.0)),
            "omikuji": method(ok_run(0.71, 20.0)),
            "x-transformer": method({"status": "skipped", "reason": "preset missing"}),
            "xr-transformer": method(ok_run(0.70, 1500.0)),
        }},
    }  # fmt: skip


def test_targets_met_and_not_met_with_their_margins() -> None:
    t = fr.targets(datasets())
    reuters, debian = t["xml_cnn_vs_libmultilabel"]
    assert reuters["P@1_points"] == pytest.approx(2.0)
    assert reuters["train_ratio"] == pytest.approx(100 / 120)
    assert reuters["met"] is True
    assert debian["P@1_points"] == pytest.approx(-2.0)
    assert debian["train_ratio"] == pytest.approx(1.5)
    assert debian["met"] is False
    xr_reuters, xr_debian = t["xr_transformer_vs_x_transformer"]
    assert xr_reuters["P@1_points"] == pytest.approx(1.0)
    assert xr_reuters["train_ratio"] == pytest.approx(0.75)
    assert xr_reuters["met"] is True
    assert xr_debian == {
        "dataset": "debian-deps", "met": None,
        "why": "not evaluated: x-transformer did not run",
    }  # fmt: skip
    assert [(r["dataset"], r["met"]) for r in t["ensemble_vs_omikuji"]] == [
        ("reuters21578-modapte", True),
        ("debian-deps", False),
    ]
    times = {r["method"]: r for r in t["debian_deps_train_time"]}
    assert times["xml-cnn"]["margin_s"] == pytest.approx(-300.0)
    assert times["xml-cnn"]["met"] is False
    assert times["ensemble"]["met"] is True
    assert times["x-transformer"]["met"] is None


def test_report_prints_tables_published_figures_and_targets() -> None:
    report = {"datasets": datasets()}
    report["datasets"]["debian-deps"]["methods"]["x-transformer"]["status"] = "skipped"
    fr.resummarize(report)
    text = fr.markdown(report)
    assert "#### reuters21578-modapte" in text
    assert "10 train / 4 test docs, 7 features, 3 labels." in text
    row = "| xml-cnn | 100.00 | 250 | 300 | 1.2 | 80.00 | 80.00 | 80.00 | 80.00 |"
    assert row in text
    assert "| x-transformer | skipped |" in text
    assert "- x-transformer: skipped: preset missing" in text
    assert "### Other datasets (published)" in text
    assert "| XML-CNN | EUR-Lex | 76.38 | 62.81 | 51.41 | Liu et al. 2017 |" in text
    assert "| XR-Transformer (8x V100) | Wiki-500K | 79.40 | - | - | Zhang et al. 2021 |" in text
    assert (
        "- XML-CNN vs LibMultiLabel's XML-CNN on debian-deps: P@1 -2.00 points (>= 0), "
        "train time 1.50x (<= 1.0x): NOT met"
    ) in text
    assert "- ensemble >= Omikuji on every dataset: NOT met" in text
    assert "- xml-cnn train time on debian-deps: 3000 s (<= 2700 s, margin -300 s): NOT met" in text
    assert (
        text.index("#### debian-deps")
        < text.index("### Other datasets")
        < text.index("### Targets")
    )


def test_published_figures_on_our_own_datasets_sit_under_their_table() -> None:
    report = {"datasets": datasets()}
    fr.resummarize(report)
    result = report["datasets"]["reuters21578-modapte"]
    bibtex = fr.dataset_table("bibtex-bow", result)
    note = "- published on this dataset: NeuralXC (approx., read from plots) P@1 14.00"
    assert [line for line in bibtex if line.startswith("- published")] == [
        note + " (Srinivasan, Rao, Agarwal)"
    ]
    assert not [
        line for line in fr.dataset_table("reuters21578-modapte", result) if "published" in line
    ]
    text = fr.markdown(report)
    assert "| NeuralXC (approx., read from plots) | Delicious | 53.00 | - | - |" in text
    assert "- HierarchicalXC (Srinivasan, Rao, Agarwal): the reference predicts hard 0/1" in text


def test_ensemble_on_every_dataset_waits_for_all_four() -> None:
    report = {"datasets": {"reuters21578-modapte": datasets()["reuters21578-modapte"]}}
    fr.resummarize(report)
    assert (
        "- ensemble >= Omikuji on every dataset: not evaluated (not run on bibtex-bow, "
        "delicious-bow, debian-deps)"
    ) in fr.markdown(report)


def results_file(path: Path, head: str, methods: dict[str, Any], stats: dict = STATS) -> Path:
    report = {
        "command": f"python benchmarks/families.py --out {path.name}",
        "date": "2026-11-24T00:00:00+00:00",
        "machine": {"cpu_model": "cpu", "nproc": 2, "memory_gb": 8.0},
        "git_start": {"head": head, "xmc_core_digest": "d1"},
        "datasets": {"reuters21578-modapte": {"stats": stats, "methods": methods}},
    }
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_merge_pools_methods_and_records_a_different_commit(tmp_path: Path) -> None:
    a = results_file(tmp_path / "a.json", "c1", {"xml-cnn": method(ok_run(0.80, 100.0))})
    b = results_file(
        tmp_path / "b.json", "c2",
        {"xml-cnn": method(ok_run(0.70, 300.0)),
         "libmultilabel-xml-cnn": method(ok_run(0.78, 120.0))},
        STATS | {"featurize_s": 0.7},  # timings may differ, sizes may not
    )  # fmt: skip
    merged = fr.merge([a, b], "merge command")
    methods = merged["datasets"]["reuters21578-modapte"]["methods"]
    assert sorted(methods) == ["libmultilabel-xml-cnn", "xml-cnn"]
    assert methods["xml-cnn"]["n_ok_runs"] == 2  # pooled as repeats: medians of both
    assert methods["xml-cnn"]["train_s_median"] == pytest.approx(200.0)
    assert methods["xml-cnn"]["metrics"]["P@1"] == pytest.approx(0.75)
    assert merged["provenance_mismatch"] == [f"commit differs: a.json: {json.dumps('c1')}; "
                                             f"b.json: {json.dumps('c2')}"]  # fmt: skip
    assert [m["file"] for m in merged["merged_from"]] == [str(a), str(b)]
    assert merged["targets"]["xml_cnn_vs_libmultilabel"][0]["met"] is False  # 75.00 < 78.00
    assert "**Merged runs differ in machine or commit:**" in fr.markdown(merged)


def test_merge_with_replace_keeps_the_later_files_runs(tmp_path: Path) -> None:
    a = results_file(
        tmp_path / "a.json", "c1",
        {"astec": method(ok_run(0.80, 100.0)), "frequency": method(ok_run(0.30, 0.1))},
    )  # fmt: skip
    b = results_file(tmp_path / "b.json", "c2", {"astec": method(ok_run(0.70, 300.0))})
    merged = fr.merge([a, b], "merge command", replace=True)
    methods = merged["datasets"]["reuters21578-modapte"]["methods"]
    assert methods["astec"]["n_ok_runs"] == 1 and methods["astec"]["train_s_median"] == 300.0
    assert methods["frequency"]["n_ok_runs"] == 1
    assert merged["replaced"] == ["reuters21578-modapte astec: the runs of b.json"]
    assert "- reuters21578-modapte astec: the runs of b.json" in fr.markdown(merged)
    assert fr.merge([a, b], "merge command")["replaced"] == []


def test_merge_refuses_two_different_datasets_under_one_name(tmp_path: Path) -> None:
    a = results_file(tmp_path / "a.json", "c1", {"xml-cnn": method(ok_run(0.80, 100.0))})
    b = results_file(
        tmp_path / "b.json", "c1", {"omikuji": method(ok_run(0.8, 1.0))}, STATS | {"n_test": 5}
    )
    with pytest.raises(ValueError, match="dataset reuters21578-modapte differs"):
        fr.merge([a, b], "merge command")


def test_merge_refuses_a_merged_file_and_names_its_sources(tmp_path: Path) -> None:
    a = results_file(tmp_path / "a.json", "c1", {"xml-cnn": method(ok_run(0.80, 100.0))})
    merged = tmp_path / "merged.json"
    merged.write_text(json.dumps(fr.merge([a], "merge command")), encoding="utf-8")
    with pytest.raises(ValueError, match=f"merged.json is itself a merge: .*{a}"):
        fr.merge([merged, a], "merge command")


def test_second_families_targets_astec_speed_and_the_frequency_floor() -> None:
    def run(p1: float, predict_ms: float) -> dict[str, Any]:
        return ok_run(p1, 60.0) | {"predict_ms_per_1k_docs": predict_ms}

    data = {
        "bibtex-bow": {"stats": STATS, "methods": {
            "xr-linear": method(run(0.60, 100.0)), "frequency": method(run(0.10, 1.0)),
            "astec": method(run(0.55, 300.0)), "neural-xc": method(run(0.20, 50.0)),
            "hierarchical-xc": method(run(0.08, 80.0)),
        }},
        "debian-deps": {"stats": STATS, "methods": {
            "xr-linear": method(run(0.68, 400.0)), "frequency": method(run(0.37, 1.0)),
            "astec": method(run(0.66, 300.0)),
        }},
    }  # fmt: skip
    t = fr.targets(data)
    bibtex, debian = t["astec_vs_xr_linear"]
    assert bibtex["met"] is None and bibtex["predict_ratio"] == pytest.approx(3.0)
    assert bibtex["P@1_points"] == pytest.approx(-5.0)
    assert debian["met"] is True and debian["predict_ratio"] == pytest.approx(0.75)
    rows = {(r["method"], r["dataset"]): r for r in t["beats_frequency"]}
    assert rows["neural-xc", "bibtex-bow"]["vs_frequency"] == pytest.approx(10.0)
    assert rows["neural-xc", "bibtex-bow"]["vs_xr_linear"] == pytest.approx(-40.0)
    assert rows["neural-xc", "bibtex-bow"]["met"] is True
    assert rows["hierarchical-xc", "bibtex-bow"]["met"] is False
    assert rows["hierarchical-xc", "debian-deps"]["met"] is None
    text = "\n".join(fr.target_lines(t))
    assert (
        "- Astec vs XR-Linear on debian-deps: P@1 -2.00 points; predict 300 vs 400 ms per 1k "
        "docs (0.75x, <= 1.0x): met" in text
    )
    assert "- Astec vs XR-Linear on bibtex-bow: P@1 -5.00 points; predict 300 vs 100" in text
    assert (
        "- hierarchical-xc vs the label-frequency baseline on bibtex-bow: P@1 8.00, -2.00 "
        "points (> 0); -52.00 vs XR-Linear: NOT met" in text
    )
    assert "- neural-xc vs the label-frequency baseline on debian-deps: not evaluated" in text
