"""``xmc ingest`` on broken corpora: exit status 2 and one "error:" message, never a traceback.

Drawn inputs run through ``xmc_core.app.cli.main`` in-process (fast); a few known breakers also run
through a real ``python -m xmc_core.app.cli`` process, where an escaped exception would print one.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

if TYPE_CHECKING:
    from tests.reliability.conftest import FuzzStats

from tests.reliability.fuzz_bytes import byte_corruptions
from tests.reliability.fuzz_corpora import TextCorpus, encode_text, parquet_bytes, text_corpora
from tests.reliability.fuzz_model import Fails, expect
from tests.reliability.fuzz_property import fuzz, source_folder
from tests.reliability.fuzz_xc import XcCorpus, encode_xc, xc_corpora
from xmc_core.app.cli import main

pytestmark = pytest.mark.reliability

REPO_ROOT = Path(__file__).resolve().parents[2]


def _args(corpus: TextCorpus | XcCorpus) -> list[str]:
    p = corpus.policies
    args = ["--on-empty", p.on_empty, "--on-unlabeled", p.on_unlabeled]
    return args + (["--label-sep", corpus.sep] if isinstance(corpus, TextCorpus) else [])


def check_cli(
    stats: FuzzStats, fmt: str, files: dict[str, bytes], args: list[str], must_fail: bool | None
) -> None:
    """Run ``xmc ingest`` in-process; check the exit status, stderr and the destination."""
    with source_folder(files) as work:
        out, err = io.StringIO(), io.StringIO()
        outcome = "tracebacks"
        try:
            with redirect_stdout(out), redirect_stderr(err):
                status = main(["ingest", fmt, str(work / "src"), str(work / "ds"), *args])
            outcome = "partial_outputs"
            left = sorted(p.name for p in work.iterdir())
            assert left == (["src"] if status else ["ds", "src"]), left
            outcome = "unclear_errors"
            text = err.getvalue()
            assert "Traceback" not in text and "Traceback" not in out.getvalue()
            errors = [line for line in text.splitlines() if line.startswith("error: ")]
            if status:
                assert status == 2 and len(errors) == 1 and "\n  fix: " in text, text
                assert any(name in errors[0] for name in files) or "src" in errors[0], text
            else:
                assert not errors and "fingerprint: " in out.getvalue()
            assert must_fail is None or bool(status) == must_fail, (status, text)
            outcome = "clear_errors" if status else "accepted"
        finally:
            stats.record(f"cli-{fmt}", outcome)


@pytest.mark.parametrize("fmt", ["lines", "xc", "jsonl", "csv", "parquet"])
@fuzz(15)
@given(data=st.data(), corrupt=st.booleans(), corruption=byte_corruptions)
def test_cli_broken_inputs(
    fuzz_stats: FuzzStats, fmt: str, data: st.DataObject, corrupt: bool, corruption
) -> None:
    corpus = data.draw(xc_corpora() if fmt == "xc" else text_corpora(fmt))
    files = encode_xc(corpus) if fmt == "xc" else encode_text(corpus)
    must_fail: bool | None = isinstance(expect(corpus), Fails)
    if corrupt:
        corruption.apply(files)
        must_fail = None
    check_cli(fuzz_stats, fmt, files, _args(corpus), must_fail)


def _table(text: pa.Array) -> bytes:
    labels = pa.array([["a"]] * len(text))
    ids = pa.array([f"d{i}" for i in range(len(text))])
    return parquet_bytes(pa.Table.from_arrays([ids, text, labels], ["doc_id", "text", "labels"]))


BREAKERS = {
    "jsonl-surrogate": (
        "jsonl",
        {
            "train.jsonl": b'{"doc_id": "d", "text": "\\ud800", "labels": ["a"]}\n',
            "test.jsonl": b'{"doc_id": "t", "text": "x", "labels": ["a"]}\n',
        },
    ),
    "parquet-invalid-utf8": (
        "parquet",
        {
            "train.parquet": _table(pa.array([b"caf\xe9"], pa.binary()).view(pa.string())),
            "test.parquet": _table(pa.array(["x"])),
        },
    ),
    "lines-utf16": (
        "lines",
        {
            "train_texts.txt": "doc\n".encode("utf-16"),
            "train_labels.txt": b"a\n",
            "test_texts.txt": b"doc\n",
            "test_labels.txt": b"a\n",
        },
    ),
}


@pytest.mark.parametrize("case", sorted(BREAKERS))
def test_cli_process_prints_no_traceback(fuzz_stats: FuzzStats, case: str) -> None:
    fmt, files = BREAKERS[case]
    with source_folder(files) as work:
        proc = subprocess.run(
            [sys.executable, "-m", "xmc_core.app.cli", "ingest", fmt, "src", "ds"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        ok = proc.returncode == 2 and "Traceback" not in proc.stderr
        stats_outcome = "clear_errors" if ok else "tracebacks"
        fuzz_stats.record(f"cli-{fmt}", stats_outcome)
        assert ok, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "row 1" in errors[0] and "fix:" in proc.stderr
        assert sorted(p.name for p in work.iterdir()) == ["src"]
