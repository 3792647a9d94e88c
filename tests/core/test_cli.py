"""The ``xmc`` command line, driven through a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def xmc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xmc_core.cli", *args], capture_output=True, text=True, timeout=120
    )


def write_lines(src: Path, labels: str = "a,b\nb\n") -> Path:
    src.mkdir()
    for split in ("train", "test"):
        (src / f"{split}_texts.txt").write_text("first doc\nsecond doc\n")
        (src / f"{split}_labels.txt").write_text(labels)
    return src


def test_ingest_then_info(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "src")
    out = xmc("ingest", "lines", str(src), str(tmp_path / "ds"))
    assert out.returncode == 0, out.stderr
    assert "train: 2 docs, 3 label assignments, 2 labels" in out.stdout
    info = xmc("info", str(tmp_path / "ds"))
    assert info.returncode == 0 and info.stdout == out.stdout


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
