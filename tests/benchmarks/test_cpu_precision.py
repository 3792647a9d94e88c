"""benchmarks/cpu_precision.py: the packaged encoder's training step and embedding per mode, on
a few texts; float32 is the reference, the int8 ONNX encoder sits close to it."""

from __future__ import annotations

import json
from pathlib import Path

import cpu_precision
import pytest


def test_fp32_and_onnx_int8_rows_with_their_cosines(tmp_path: Path) -> None:
    data = tmp_path / "tiny"
    data.mkdir()
    words = ["package", "library", "tool", "parser", "server", "client", "daemon", "font"]
    texts = [" ".join(words[i % 8 :] + words[: i % 8]) * (1 + i % 3) for i in range(40)]
    (data / "train_texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "cp.json"
    argv = ["--dataset", str(data), "--lengths", "16", "--steps", "3", "--modes",
            "fp32,onnx-int8", "--out", str(out)]  # fmt: skip
    assert cpu_precision.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["command"] == "python benchmarks/cpu_precision.py " + " ".join(argv)
    fp32, int8 = report["rows"]
    assert (fp32["mode"], int8["mode"]) == ("fp32", "onnx-int8")
    assert fp32["train_step_s"] > 0 and int8["train_step_s"] is None  # embedding only
    assert fp32["min_cosine_to_fp32"] == pytest.approx(1.0, abs=1e-5)
    assert 0.95 < int8["min_cosine_to_fp32"] <= int8["mean_cosine_to_fp32"] < 1.0 + 1e-5
    assert int8["embed_ms_per_doc"] > 0


def test_modes_must_start_with_the_reference() -> None:
    with pytest.raises(SystemExit):
        cpu_precision.main(["--modes", "onnx-int8,fp32"])
