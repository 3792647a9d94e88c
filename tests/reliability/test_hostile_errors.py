"""Hostile machines: a full disk, an unreadable model file, a read-only work dir, bad options.

Every entry point must answer ``error: ...`` and ``  fix: ...`` on stderr with exit status 2, no
traceback, and leave nothing half-written. Each case runs a real ``python -m ...`` process.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from xmc_core.model.xmc_model import XmcModel

pytestmark = pytest.mark.reliability

SUITE = "hostile-errors"
REPO_ROOT = Path(__file__).resolve().parents[2]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PYTHONPATH=str(REPO_ROOT), DO_NOT_TRACK="true", MLFLOW_DISABLE_TELEMETRY="true")
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", HF_HUB_OFFLINE="1")
    return env | extra


def run(
    args: list[str], cwd: Path | None = None, user: list[str] | None = None, **kw: object
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the repository's environment (as ``user`` if given)."""
    cmd = [*(user or []), sys.executable, *args]
    kw.setdefault("env", _env())
    return subprocess.run(
        cmd, cwd=cwd or REPO_ROOT, capture_output=True, text=True, timeout=600, **kw
    )  # type: ignore[call-overload]


def assert_clear_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit status 2, one ``error:`` line, a ``fix:``, every needle, and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    assert "\n  fix: " in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """A ``size`` tmpfs mounted at ``path`` (read-only if asked), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size},mode=0777" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def xmc(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run(["-m", "xmc_core.app.cli", *args], **kw)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small trained XR-Linear model (synthetic corpus)."""
    root = tmp_path_factory.mktemp("model")
    assert xmc("synth", str(root / "ds"), "--scale", "0.1").returncode == 0
    trained = xmc("train", str(root / "ds"), str(root / "model"), "--set", "tree.max_leaf_size=20")
    assert trained.returncode == 0, trained.stderr
    return root / "model"


def _words(n_lines: int, per_line: int = 8) -> str:
    """Deterministic, hardly compressible text: ``n_lines`` lines of hex words."""
    lines = []
    for i in range(n_lines):
        digest = hashlib.sha256(str(i).encode()).hexdigest()
        lines.append(" ".join(digest[j * 8 : j * 8 + 8] for j in range(per_line)))
    return "\n".join(lines) + "\n"


# --- config errors and bad options: refused before any work starts ---------------------------

FLOW_ARGS = {
    "train": [],
    "featurize": ["no-such-dataset"],
    "predict": ["no-such-model", "no-such-source", "out.parquet"],
}


@pytest.mark.parametrize("flow", sorted(FLOW_ARGS))
def test_flow_config_error(flow: str, tmp_path: Path) -> None:
    args = ["-m", f"flows.{flow}", *FLOW_ARGS[flow], "--set", "tree.branching=3"]
    proc = run(args, cwd=tmp_path, env=_env(PREFECT_HOME=str(tmp_path / "prefect")))
    assert_clear_error(proc, "branching=3 must be a power of two", "--set")
    assert "Starting temporary server" not in proc.stderr  # refused before Prefect starts


@pytest.mark.parametrize(
    "command,option,value",
    [("predict", "--topk", "-1"), ("predict", "--beam-size", "0"), ("evaluate", "--topk", "0")],
)
def test_bad_counts_refused_at_argument_time(
    tmp_path: Path, command: str, option: str, value: str
) -> None:
    paths = [str(tmp_path / "model"), str(tmp_path / "src")]
    if command == "predict":
        paths.append(str(tmp_path / "out.jsonl"))
    proc = xmc(command, *paths, option, value)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"argument {option}: must be a whole number >= 1, got {value!r}" in proc.stderr
    assert sorted(tmp_path.iterdir()) == []


def test_flow_predict_refuses_bad_counts_and_a_missing_model_before_prefect(tmp_path: Path) -> None:
    args = ["-m", "flows.predict", str(tmp_path / "m"), str(tmp_path / "s"), "out.parquet"]
    proc = run([*args, "--topk", "-3"], cwd=tmp_path, env=_env(PREFECT_HOME=str(tmp_path / "p")))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "argument --topk: must be a whole number >= 1, got '-3'" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["p"]  # Prefect's home, made on import
    proc = run([*args, "--topk", "3"], cwd=tmp_path, env=_env(PREFECT_HOME=str(tmp_path / "p")))
    assert_clear_error(proc, f"no model at {tmp_path / 'm'} (no such folder)", "`xmc train`")
    assert "Starting temporary server" not in proc.stderr  # refused before Prefect starts


# --- a full disk: ingest, train, the featurize flow, predict ---------------------------------


def _lines_corpus(src: Path, n_lines: int) -> Path:
    src.mkdir()
    for split in ("train", "test"):
        (src / f"{split}_texts.txt").write_text(_words(n_lines))
        (src / f"{split}_labels.txt").write_text("".join(f"l{i % 7}\n" for i in range(n_lines)))
    return src


def test_disk_full_ingest(tmp_path: Path) -> None:
    src = _lines_corpus(tmp_path / "src", 4000)
    with tmpfs(tmp_path / "small", "64k") as disk:
        proc = xmc("ingest", "lines", str(src), str(disk / "ds"))
        assert_clear_error(proc, "no space left on the device", str(disk))
        assert sorted(disk.iterdir()) == []  # no half-written dataset, no temporary folder


def test_disk_full_train(tmp_path: Path, model_dir: Path) -> None:
    dataset = model_dir.parent / "ds"
    with tmpfs(tmp_path / "small", "256k") as disk:
        proc = xmc("train", str(dataset), str(disk / "model"), "--set", "tree.max_leaf_size=20")
        assert_clear_error(proc, "no space left on the device", str(disk))
        assert sorted(disk.iterdir()) == []


@pytest.mark.usefixtures("prefect_server")
def test_disk_full_flow_raises_the_disk_error_not_an_unfinished_run(
    tmp_path: Path, model_dir: Path
) -> None:
    """The featurize flow on a full disk ended on Prefect's ``UnfinishedRun`` (rc 1, 9
    tracebacks): a task that never ran because the one it waited on failed hid the full disk.
    Now the flow raises the disk's error, naming the artifact folder, which its command line
    prints as ``error:``/``fix:`` (rc 2; no tracebacks: ``tests/flows/test_console.py``)."""
    from flows.featurize import featurize_pipeline
    from flows.runtime import configured, prefect_api
    from xmc_core.app.entry import error_text
    from xmc_core.config import XmcConfig

    with tmpfs(tmp_path / "small", "256k") as disk:
        cfg = XmcConfig.load(None, [f"work_dir={disk / 'work'}"])
        with prefect_api(), pytest.raises(OSError) as excinfo:
            configured(featurize_pipeline, cfg, use_dask=False)(str(model_dir.parent / "ds"), cfg)
    assert excinfo.value.errno == errno.ENOSPC, repr(excinfo.value)
    text = error_text(excinfo.value)
    assert text is not None and text.startswith("no space left on the device"), text
    assert str(disk / "work" / "artifacts") in text and "\n  fix: " in text, text


def test_disk_full_predict_keeps_old_output(tmp_path: Path, model_dir: Path) -> None:
    texts = tmp_path / "docs.txt"
    texts.write_text(_words(3000))
    with tmpfs(tmp_path / "small", "64k") as disk:
        old = disk / "predictions.jsonl"
        old.write_text('{"doc_id": "old"}\n')
        proc = xmc("predict", str(model_dir), str(texts), str(old))
        assert_clear_error(proc, "no space left on the device", str(old))
        assert old.read_text() == '{"doc_id": "old"}\n'  # the previous output is intact
        assert sorted(disk.iterdir()) == [old]


# --- a model file this user may not read ------------------------------------------------------


@pytest.mark.parametrize("locked", ["meta.json", "ranker/W0.npz", "vectorizer/vocabulary.parquet"])
def test_unreadable_model_file(model_dir: Path, locked: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="xmc-eacces-"))  # pytest's tmp_path is private to root
    try:
        root.chmod(0o777)
        model = root / "model"
        shutil.copytree(model_dir, model)
        for folder in [model, *(p for p in model.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)
        (model / locked).chmod(0o600)
        texts = root / "docs.txt"
        texts.write_text("first doc\n")
        out = root / "out.jsonl"
        env = _env(HOME=str(root), NUMBA_CACHE_DIR=str(root / "numba"))
        proc = xmc("predict", str(model), str(texts), str(out), cwd=root, user=NOBODY, env=env)
        if "setpriv" in proc.stderr and proc.returncode != 2:
            pytest.skip(f"cannot run as another user here: {proc.stderr.strip()}")
        assert_clear_error(proc, "permission denied", str(model / locked))
        assert not out.exists()
    finally:
        shutil.rmtree(root)


# --- a read-only work dir: xmc promote and the flows ------------------------------------------


def test_read_only_work_dir_promote(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "64k", read_only=True) as work:
        proc = xmc("promote", "1", "--set", f"work_dir={work}")
        assert_clear_error(proc, "read-only file system", str(work))


def test_read_only_work_dir_flow(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "64k", read_only=True) as work:
        env = _env(PREFECT_HOME=str(tmp_path / "prefect"))
        args = ["-m", "flows.train", "-v", "--set", f"work_dir={work}"]  # -v: server lines shown
        proc = run(args, cwd=tmp_path, env=env)
        assert_clear_error(proc, "read-only file system", str(work))
        assert "Starting temporary server" not in proc.stderr


# --- stdin/stdout, and one huge line ----------------------------------------------------------


def test_predict_stdin_to_stdout(model_dir: Path, tmp_path: Path) -> None:
    proc = xmc("predict", str(model_dir), "-", "-", "--topk", "2", input="first doc\nsecond\n")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]  # nothing but JSON lines
    assert [r["doc_id"] for r in rows] == ["line-1", "line-2"]
    assert all(len(r["labels"]) == len(r["scores"]) <= 2 for r in rows)
    assert "wrote predictions of 2 documents to stdout" in proc.stderr.splitlines()[-1]
    assert sorted(tmp_path.iterdir()) == [] and not (REPO_ROOT / "-").exists()


def test_long_document_capped_and_logged_once(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = XmcModel.load(model_dir)
    cfg = model.ranker.predict_cfg
    model.ranker.predict_cfg = cfg.model_copy(update={"max_doc_chars": 200})
    long_doc = _words(100).replace("\n", " ")
    texts = ["short doc", long_doc, long_doc[::-1]]
    with caplog.at_level(logging.WARNING):
        capped = model.predict(texts)
        again = model.predict(texts)
    expected = model.predict([t[:200] for t in texts])
    assert (capped != expected).nnz == 0 and (again != expected).nnz == 0
    warnings = [r.getMessage() for r in caplog.records if "predict.max_doc_chars" in r.getMessage()]
    assert len(warnings) == 1 and "200" in warnings[0], warnings


def test_error_text_sorts_expected_failures_from_bugs() -> None:
    from xmc_core.app.entry import error_text

    arrow_style = OSError("Error writing bytes to file. Detail: No space left on device")
    assert error_text(arrow_style, Path("out.parquet")) == (
        "no space left on the device (while writing out.parquet)\n"
        "  fix: free space on that disk, or write the output to another one"
    )
    denied = PermissionError(13, "Permission denied", "/m/meta.json")
    assert error_text(denied).startswith("permission denied (/m/meta.json)\n  fix: ")
    exists = FileExistsError("/m already exists (pass overwrite to replace it)")
    assert error_text(exists) == str(exists)
    assert error_text(FileNotFoundError(2, "No such file", "/x")) is None  # a bug: traceback
    assert error_text(KeyError("x")) is None


def test_capped_lines_skip_the_rest_of_a_huge_line() -> None:
    import io

    from xmc_core.corpus.importers.textio import iter_doc_lines

    huge = "é" * 50 + "x" * 5000  # cut after 4 * 10 + 4 bytes: 22 whole "é" (2 bytes each)
    data = f"short\n{huge}\r\nlast é\n".encode()
    lines = list(iter_doc_lines(io.BytesIO(data), "docs.txt", max_chars=10))
    assert lines == [(1, "short"), (2, "é" * 22), (3, "last é")]
    assert list(iter_doc_lines(io.BytesIO(data), "docs.txt", None))[1] == (2, huge)


def test_predict_stdout_reader_stops(model_dir: Path) -> None:
    """``xmc predict M - - | head -1``: far more output than a pipe holds, so the write fails."""
    cmd = [sys.executable, "-m", "xmc_core.app.cli", "predict", str(model_dir), "-", "-"]
    with subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(_words(5000).encode())  # ~1 MB of predictions, a pipe holds 64 KiB
        proc.stdin.close()
        assert json.loads(proc.stdout.readline())["doc_id"] == "line-1"
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        status = proc.wait(timeout=600)
    done = subprocess.CompletedProcess(cmd, status, "", stderr)
    assert_clear_error(done, "stdout: its reader stopped")
