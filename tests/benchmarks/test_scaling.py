"""benchmarks/scaling.py: sizes, the label-space calibration, the power-law fits and estimates,
and a tiny end-to-end run with ``ours`` only (no peers venv needed): one size runs, one cannot
(too few documents for its labels), one is skipped by its estimated time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scaling
import scaling_report


def test_sizes_are_labels_by_documents() -> None:
    assert scaling.parse_size("100kx1M") == (100_000, 1_000_000)
    assert scaling.parse_size("2.5kx300") == (2500, 300)
    with pytest.raises(ValueError, match="LABELSxDOCS"):
        scaling.parse_size("100k")
    with pytest.raises(SystemExit):
        scaling.parse_args(["--sizes", "10kx10k,1G"])


def test_label_space_is_calibrated_to_the_labels_asked_for() -> None:
    space = scaling.spec_labels_for(10_000, 10_000)
    assert space is not None and 13_000 < space < 14_200  # measured: 15,040 gave 10,523
    assert scaling.expected_labels(space, 10_000) == pytest.approx(10_000, rel=0.006)
    assert scaling.spec_labels_for(100_000, 1_000_000) < 101_000  # 30 draws a label: all seen
    assert scaling.spec_labels_for(1_000_000, 10_000) is None  # 36,500 draws, 1M labels


def _size(name: str, labels: int, docs: int, **steps: float) -> dict:
    """A finished size whose steps took the given values (train_s and peak_rss_mb)."""
    run = {"status": "ok", "train_s": steps["t"], "peak_rss_mb": steps["m"]}
    return {"name": name, "n_labels": labels, "n_train": docs, "methods": {"ours": run}}


def test_fit_recovers_the_exponents_in_labels_and_documents() -> None:
    # train s = 2e-3 * L^0.3 * D^1.0; peak RSS = 200 MB + 4 MB per 1k labels + 8 per 1k docs
    grid = {"10kx10k": (1e4, 1e4), "100kx100k": (1e5, 1e5), "100kx1M": (1e5, 1e6)}
    grid["10kx100k"] = (1e4, 1e5)
    sizes = [
        _size(name, int(n), int(d), t=2e-3 * n**0.3 * d, m=200 + 4e-3 * n + 8e-3 * d)
        for name, (n, d) in grid.items()
    ]
    f = scaling_report.fit(scaling_report.points(sizes, "ours", "train_s"))
    assert f["labels_exponent"] == pytest.approx(0.3) and f["docs_exponent"] == pytest.approx(1.0)
    value, how = scaling_report.estimate(sizes, "ours", "train_s", 1_000_000, 1_000_000)
    assert value == pytest.approx(2e-3 * 1e6**0.3 * 1e6) and how.startswith("power-law")
    rss, how = scaling_report.estimate(sizes, "ours", "peak_rss_mb", 1_000_000, 1_000_000)
    assert rss == pytest.approx(200 + 4000 + 8000) and how.startswith("base + per label")
    linear = scaling_report.fits(sizes)["linear"]["ours peak RSS MB"]
    assert [linear[k] for k in ("base", "per_1k_labels", "per_1k_docs")] == pytest.approx(
        [200, 4, 8]
    )
    diagonal = scaling_report.fit(scaling_report.points(sizes[:2], "ours", "train_s"))
    assert diagonal["along_line_exponent"] == pytest.approx(1.3)  # 0.3 + 1.0, not separable
    pairs = scaling_report.fits(sizes)["pairs"]["ours train s"]
    assert {(p["vary"], p["from"], p["to"]) for p in pairs} == {
        ("docs", "100kx100k", "100kx1M"),
        ("docs", "10kx10k", "10kx100k"),
        ("labels", "10kx100k", "100kx100k"),
    }
    assert {round(p["exponent"], 6) for p in pairs} == {1.0, 0.3}


def test_estimate_without_a_fit_grows_with_the_larger_ratio() -> None:
    sizes = [_size("1kx2k", 1000, 2000, t=10.0, m=500.0)]
    rss, how = scaling_report.estimate(sizes, "ours", "peak_rss_mb", 10_000, 4000)
    assert rss == pytest.approx(200 + 300 * 10)  # the 200 MB base is not scaled
    assert how == "500 at 1000 labels/2000 docs x 10"
    wall, _ = scaling_report.estimate(sizes, "ours", "train_s", 2000, 8000)
    assert wall == pytest.approx(40.0)
    assert scaling_report.estimate([], "ours", "train_s", 10, 10) == (
        None,
        "no earlier size to estimate from",
    )


def test_tiny_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scaling.json"
    argv = [
        "--sizes", "300x600,50kx600,100kx200k", "--methods", "ours", "--test-docs", "200",
        "--timeout", "120",
        "--workdir", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    assert scaling.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"] == "python benchmarks/scaling.py " + " ".join(argv)
    assert report["git_start"]["head"] and "peers_venv" not in report["machine"]
    ran, cannot, skipped = report["sizes"]
    assert ran["status"] == "ok" and (ran["n_train"], ran["n_test"]) == (600, 200)
    assert 270 <= ran["n_labels"] <= 330  # about the 300 asked for
    assert ran["spec"]["zipf_exponent"] == 0.75 and ran["spec"]["vectorized"] is True
    assert ran["generate"]["status"] == "ok" and ran["generate"]["docs_per_s"] > 0
    assert ran["featurize"]["featurize_s"] > 0 and ran["nnz_train"] > 600 * 20
    ours = ran["methods"]["ours"]
    assert ours["status"] == "ok" and 0 < ours["train_s"] < ours["process_wall_s"]
    assert 0.2 < ours["metrics"]["P@1"] <= 1.0 and ours["peak_rss_mb"] > 50
    assert cannot["status"] == "cannot run" and "distinct labels" in cannot["reason"]
    assert skipped["status"] == "skipped"
    assert "ours: estimated" in skipped["reason"] and "> timeout 120 s" in skipped["reason"]
    assert report["largest_ok"] == {"ours": "300x600"}
    assert report["fits"]["ours train s"] is None  # one size: nothing to fit
    assert Path(report["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "| 300x600 | " in printed and "- 100kx200k: skipped: " in printed
    assert not list((tmp_path / "work").iterdir())  # corpora and features removed
    assert scaling.main(["--report", str(out)]) == 0  # refit and replot from the JSON alone
    assert json.loads(out.read_text())["sizes"] == report["sizes"]


def test_fit_ignores_failed_sizes() -> None:
    sizes = [_size("a", 10, 10, t=1.0, m=1.0), _size("b", 100, 100, t=10.0, m=1.0)]
    sizes.append({"name": "c", "n_labels": 1000, "n_train": 1000, "methods": {"ours": {}}})
    pts = scaling_report.points(sizes, "ours", "train_s")
    np.testing.assert_array_equal(pts, [[10, 10, 1.0], [100, 100, 10.0]])
