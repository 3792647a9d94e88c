"""benchmarks/end_to_end.py: a tiny run of ours end to end, the cold run and the order of the
runs, the target, re-summarizing, and the PECOS runner's parsing of the raw files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import end_to_end
import end_to_end_runner as runner
import numpy as np
import pytest

from xmc_core.corpus.synthetic import SyntheticSpec, generate_split


def write_lines_dataset(dest: Path) -> Path:
    """A small synthetic corpus in the ``lines`` layout (``{split}_texts.txt``, labels)."""
    spec = SyntheticSpec(n_train=200, n_test=60, n_domains=2, topics_per_domain=2)
    dest.mkdir(parents=True)
    for split in ("train", "test"):
        docs = list(generate_split(spec, split))
        (dest / f"{split}_texts.txt").write_text("".join(d.text + "\n" for d in docs))
        (dest / f"{split}_labels.txt").write_text("".join(",".join(d.labels) + "\n" for d in docs))
    return dest


def test_tiny_run_of_ours_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_lines_dataset(tmp_path / "data" / "tiny")
    out = tmp_path / "results.json"
    argv = [
        "--datasets-root", str(tmp_path / "data"), "--datasets", "tiny", "--methods", "ours",
        "--repeats", "1", "--no-cold", "--out", str(out),
    ]  # fmt: skip
    assert end_to_end.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/end_to_end.py --datasets-root")
    result = report["datasets"]["tiny"]
    assert (result["stats"]["n_train"], result["stats"]["n_test"]) == (200, 60)
    ours = result["methods"]["ours"]
    assert ours["status"] == "ok" and "cold" not in result
    run = ours["runs"][0]
    assert list(run["stages_s"]) == ["ingest", "featurize", "train", "predict"]
    assert run["total_s"] == pytest.approx(sum(run["stages_s"].values()))
    assert run["stages_s"]["train"] == pytest.approx(
        sum(v for k, v in run["steps_s"].items() if k.startswith("train."))
    )
    assert set(run["steps_cpu_s"]) == set(run["steps_s"])
    assert run["label_space_equal"] and run["label_order_equal"]  # our index is the reference
    assert run["numba_cache_dir"] is None
    assert run["metrics"]["P@1"] > 0.5
    assert result["target"] == {"available": False}
    printed = capsys.readouterr().out
    assert "| ours | " in printed and "target: not evaluated" in printed
    # --report re-summarizes the file and prints the same table
    assert end_to_end.main(["--report", str(out)]) == 0
    assert "| ours | " in capsys.readouterr().out


def fake_run(total: float) -> dict[str, Any]:
    stages = {"ingest": 0.1, "featurize": 0.2, "train": total - 0.4, "predict": 0.1}
    return {
        "status": "ok", "stages_s": stages, "steps_s": {"train.fit": total - 0.4},
        "total_s": total, "total_cpu_s": total, "untimed_s": 0.5, "process_wall_s": total + 1,
        "peak_rss_mb": 100.0,
        "metrics": {"P@1": 0.5, "P@5": 0.2}, "label_space_equal": True,
    }  # fmt: skip


def test_cold_run_first_then_warm_rounds_sharing_its_numba_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Path | None]] = []
    totals = {"ours-cold": 30.0, "ours": 8.0, "pecos": 9.0}

    def run_method(method: str, src: Path, workdir: Path, ref: Any, args: Any, cache: Any) -> Any:
        calls.append((method, cache))
        return fake_run(totals[method] + 0.1 * len(calls))

    monkeypatch.setattr(end_to_end, "run_method", run_method)
    monkeypatch.setattr(end_to_end, "reference", lambda src, workdir: {"stats": {}})
    args = end_to_end.parse_args(["--repeats", "2"])
    result = end_to_end.bench_dataset(tmp_path / "src", tmp_path, args)
    assert [m for m, _ in calls] == ["ours-cold", "ours", "pecos", "ours", "pecos"]
    assert {c for _, c in calls} == {tmp_path / "numba-cache"}
    assert result["cold"]["total_s"] == pytest.approx(30.1)
    ours = result["methods"]["ours"]
    assert ours["total_s_median"] == pytest.approx((8.2 + 8.4) / 2)  # the cold run left out
    target = result["target"]
    assert target["ratio"] == pytest.approx(8.3 / 9.4) and target["met"] is False
    assert target["ratio_per_repeat"] == pytest.approx([8.2 / 9.3, 8.4 / 9.5])
    text = end_to_end.markdown(
        "src", result | {"stats": {"n_train": 1, "n_test": 1, "n_labels": 1}}
    )
    assert "| ours, cold (first process, empty numba cache) | 0.10 | 0.20 | 29.70 |" in text
    assert "(target <= 0.8x): NOT met" in text


def test_no_cold_run_and_its_own_cache_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        end_to_end, "run_method", lambda m, s, w, r, a, c: calls.append((m, c)) or fake_run(8.0)
    )
    monkeypatch.setattr(end_to_end, "reference", lambda src, workdir: {"stats": {}})
    args = end_to_end.parse_args(["--repeats", "1", "--no-cold", "--methods", "ours"])
    end_to_end.bench_dataset(tmp_path / "src", tmp_path, args)
    assert calls == [("ours", None)]


def test_pecos_side_reads_the_raw_files_as_the_importer_does(tmp_path: Path) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes("first\rline\r\nsecond\u2028line\nlast, no newline".encode())
    assert runner.read_lines(path) == ["first\rline", "second\u2028line", "last, no newline"]
    lists = runner.label_lists(["b, a ,b", "", "c,,a"])
    assert lists == [["b", "a"], [], ["c", "a"]]
    Y = runner.label_matrix(lists, {"a": 0, "b": 1})  # "c": not a label of the train split
    assert Y.toarray().tolist() == [[1, 1], [0, 0], [1, 0]]
    assert Y.dtype == np.float32 and Y.has_sorted_indices
