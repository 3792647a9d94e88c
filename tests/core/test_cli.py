"""The ``xmc`` command line, driven through a subprocess."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import yaml

from tests.cli_helpers import press_ctrl_c, write_lines, xmc

LABEL_FEATURES_DONE = re.compile(r"^label-features: ", re.M).search
STAGE_LINE = re.compile(r"[\w-]+: ")
"""A stage's line, which may race the Ctrl-C (the only other line allowed after it)."""


def test_ingest_then_info(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "src")
    out = xmc("ingest", "lines", str(src), str(tmp_path / "ds"))
    assert out.returncode == 0, out.stderr
    assert "train: 2 docs, 3 label assignments, 2 labels" in out.stdout
    fingerprint = out.stdout.split("fingerprint: ")[1].split()[0]
    assert out.stdout.endswith(f"lineage: ds (from {fingerprint[:12]})\n")  # named after DEST
    info = xmc("info", str(tmp_path / "ds"))
    assert info.returncode == 0 and info.stdout.startswith(out.stdout)
    assert "label frequencies (train, 2 docs, 2 labels):" in info.stdout


def test_bad_input_exits_2_with_file_row_and_fix(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "src", labels="a\n\n")
    out = xmc("ingest", "lines", str(src), str(tmp_path / "ds"))
    assert out.returncode == 2
    assert "train_labels.txt row 2: document has no label" in out.stderr
    assert "fix:" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "ds").exists()
    ok = xmc("ingest", "lines", str(src), str(tmp_path / "ds"), "--on-unlabeled", "drop")
    assert ok.returncode == 0 and "dropped unlabeled 1" in ok.stdout


def test_existing_destination_needs_overwrite(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "src")
    assert xmc("ingest", "lines", str(src), str(tmp_path / "ds")).returncode == 0
    again = xmc("ingest", "lines", str(src), str(tmp_path / "ds"))
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert xmc("ingest", "lines", str(src), str(tmp_path / "ds"), "--overwrite").returncode == 0


def test_synth_and_dump_config(tmp_path: Path) -> None:
    out = xmc("synth", str(tmp_path / "syn"), "--scale", "0.02", "--seed", "3")
    assert out.returncode == 0, out.stderr
    assert "train: 120 docs" in out.stdout
    dump = xmc("dump-config", "--set", "tfidf.min_df=2")
    assert dump.returncode == 0
    assert yaml.safe_load(dump.stdout)["tfidf"]["min_df"] == 2
    bad = xmc("dump-config", "--set", "tfidf.nope=1")
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_train_predict_evaluate(tmp_path: Path) -> None:
    assert xmc("synth", str(tmp_path / "ds"), "--scale", "0.1").returncode == 0
    model = tmp_path / "model"
    train_stopped_by_ctrl_c(tmp_path, model)
    out = xmc("train", str(tmp_path / "ds"), str(model), "--set", "tree.max_leaf_size=20")
    assert out.returncode == 0, out.stderr
    summary = out.stdout.splitlines()
    assert summary[0].startswith("xmc run summary: xr_linear on ds (") and len(summary) == 4
    assert summary[1] == "  data      600 train / 150 test docs, " + summary[1].split(", ")[1]
    assert summary[3] == f"  model     {model}  (xmc predict {model} docs.txt out.jsonl)"
    assert {"config.yaml", "metrics.json", "meta.json"} <= {p.name for p in model.iterdir()}
    texts = tmp_path / "in.txt"
    texts.write_text("first document\nsecond document\n")
    pred = xmc("predict", str(model), str(texts), str(tmp_path / "p.jsonl"), "--topk", "2")
    assert pred.returncode == 0, pred.stderr
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["doc_id"] for r in rows] == ["line-1", "line-2"]
    assert all(len(r["labels"]) == len(r["scores"]) <= 2 for r in rows)
    ev = xmc("evaluate", str(model), str(tmp_path / "ds"))
    assert ev.returncode == 0 and ev.stdout.splitlines()[0].split() == ["(%)", "@1", "@3", "@5"]
    p_row = next(row.split() for row in ev.stdout.splitlines() if row.startswith("P "))
    # the summary's figures are the evaluation's (same test split, same model), shown once
    assert summary[2].startswith(f"  test      P@1 {p_row[1]}%  P@5 {p_row[3]}%  nDCG@5 ")
    assert out.stdout.count("P@1") == 1
    again = xmc("train", str(tmp_path / "ds"), str(model))
    assert again.returncode == 2 and "exists" in again.stderr
    # the destination is checked before any work: the dataset is not even opened
    early = xmc("train", str(tmp_path / "no-such-dataset"), str(model))
    assert early.returncode == 2 and "already exists" in early.stderr, early.stderr


def test_model_commands_fail_clearly(tmp_path: Path) -> None:
    out = xmc("evaluate", str(tmp_path / "missing-model"), str(tmp_path))
    assert out.returncode == 2 and "no model at" in out.stderr
    assert "Traceback" not in out.stderr


def train_stopped_by_ctrl_c(tmp_path: Path, model: Path) -> None:
    """``xmc train`` stopped by Ctrl-C once its features are built: within seconds, exit status
    130, one line saying where it stopped, no traceback, no model folder (the rerun that
    follows writes it)."""
    cmd = [sys.executable, "-m", "xmc_core.app.cli", "train", str(tmp_path / "ds"), str(model)]
    cmd += ["--set", f"work_dir={tmp_path / 'work'}"]
    stopped = press_ctrl_c(cmd, dict(os.environ), tmp_path / "stopped.log", LABEL_FEATURES_DONE)
    assert stopped.returncode == 130, stopped.after
    *raced, line = stopped.after.splitlines()
    assert re.fullmatch(
        r"interrupted: xmc train stopped( at [\w-]+)?; rerun the same command to train again "
        rf"\(stages with checkpoints resume from {re.escape(str(tmp_path / 'work'))}/artifacts\)",
        line,
    ), stopped.after
    assert all(STAGE_LINE.match(x) for x in raced) and not model.exists(), stopped.after
