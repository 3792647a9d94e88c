"""The growing-corpus benchmark's drops (seeded slices of the training split, each with the whole
test split and the label texts) and its verdicts per step, on hand-made figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from retrain import report_lines, targets
from retrain_drops import read_lines, slice_rows, write_drops


def test_slices_cover_the_rows_once_in_file_order_and_follow_the_seed() -> None:
    parts = slice_rows(10, 4, seed=0)
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert all((np.diff(p) > 0).all() for p in parts)
    assert [p.tolist() for p in slice_rows(10, 4, seed=0)] == [p.tolist() for p in parts]
    assert [p.tolist() for p in slice_rows(10, 4, seed=1)] != [p.tolist() for p in parts]


def test_drops_hold_their_slice_the_test_split_and_the_label_texts(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for split, n in (("train", 5), ("test", 2)):
        (src / f"{split}_texts.txt").write_text("".join(f"{split} text {i}\n" for i in range(n)))
        (src / f"{split}_labels.txt").write_text("".join(f"l{i}\n" for i in range(n)))
    (src / "label_map.txt").write_text("0\tl0\t1\tthe first label\n")
    drops = write_drops(src, tmp_path / "drops", 2, seed=0, prefix="toy")
    assert [d.name for d in drops] == ["toy-1", "toy-2"]
    texts = [read_lines(d / "train_texts.txt") for d in drops]
    assert sorted(texts[0] + texts[1]) == [f"train text {i}" for i in range(5)]
    for d in drops:
        assert read_lines(d / "test_texts.txt") == ["test text 0", "test text 1"]
        assert (d / "label_map.txt").read_text() == "0\tl0\t1\tthe first label\n"
        assert len(read_lines(d / "train_labels.txt")) == len(read_lines(d / "train_texts.txt"))
        assert not (d / "train_ids.txt").exists()


def step(name: str, train_s: float, model_s: float, p1: float) -> dict:
    return {"step": name, "train_s": train_s, "model_s": model_s, "labels_known": 10,
            "metrics": {"P@1": p1, "P@5": 0.5, "PSP@5": 0.4}}  # fmt: skip


def test_each_step_after_the_first_is_judged_against_the_targets() -> None:
    cold = {"status": "ok", "steps": [step("a", 10, 5, 0.9), step("b", 20, 10, 0.9)]}
    warm = {"status": "ok", "steps": [step("a", 10, 5, 0.9), step("b", 11, 5, 0.8985)]}
    verdicts = targets({"ours-cold": cold, "ours-warm": warm}, "xr_linear")
    assert len(verdicts) == 1
    v = verdicts[0]
    assert v["step"] == "b" and v["train_s_ratio"] == 0.55 and v["model_s_ratio"] == 0.5
    assert v["time_met"] and v["model_time_met"] and v["p1_met"]
    assert round(v["p1_gap_pt"], 2) == -0.15
    warm["steps"][1]["metrics"]["P@1"] = 0.897
    assert not targets({"ours-cold": cold, "ours-warm": warm}, "xr_linear")[0]["p1_met"]
    # XR-Transformer's time target is 0.35x: 0.55x misses it
    xrt = targets({"ours-cold": cold, "ours-warm": warm}, "xr_transformer")[0]
    assert xrt["time_target"] == 0.35 and not xrt["time_met"] and not xrt["model_time_met"]
    lines = report_lines({"datasets": {"toy": {"methods": {"ours-cold": cold}, "targets": []}}})
    assert "| ours-cold | b | 10 | 0 | 20.0 | 10.0 | 90.00 | 50.00 | 40.00 | - |" in lines
