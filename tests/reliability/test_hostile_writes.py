"""Hostile writes: two writers of one destination, a SIGKILL in the middle of ``--overwrite``,
and a folder written over a link or a file (``xmc_core.storage.atomic.atomic_dir``,
``xmc_core.storage.folder_swap``); files aimed at links and devices:
``test_hostile_write_targets.py``.

The folder cases run where the filesystem offers ``renameat2`` (ext4, tmpfs) and, through the
``rename_mode`` fixture, where it does not (the portable fallback with its swap journal).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_helpers import write_lines, xmc
from xmc_core.corpus import Corpus
from xmc_core.errors import ArtifactError, XmcError
from xmc_core.stages.store import ArtifactStore
from xmc_core.storage import folder_swap
from xmc_core.storage.artifacts import read_meta, write_meta
from xmc_core.storage.atomic import atomic_dir

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
SUITE = "hostile-writes"


def hidden(parent: Path) -> list[str]:
    """Hidden names (temporaries, locks, journals) left in ``parent``."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


@pytest.fixture(params=["renameat2", "fallback"])
def rename_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``fallback``: renameat2 fails as on a filesystem without it (EINVAL)."""
    if request.param == "fallback":

        def unsupported(src: Path, dst: Path, flags: int) -> None:
            raise OSError(errno.EINVAL, "renameat2 flags not supported here")

        monkeypatch.setattr(folder_swap, "_renameat2", unsupported)
    return request.param


# --- item 2: a second writer never replaces a folder it did not mean to --------------------


@pytest.mark.parametrize("intruder", ["empty", "full"])
def test_a_folder_that_appears_during_the_write_is_not_replaced(
    tmp_path: Path, rename_mode: str, intruder: str
) -> None:
    target = tmp_path / "ds"
    with pytest.raises(FileExistsError) as excinfo, atomic_dir(target) as tmp:
        (tmp / "mine.txt").write_text("mine")
        target.mkdir()  # another program made the folder meanwhile
        if intruder == "full":
            (target / "theirs.txt").write_text("theirs")
    assert str(target) in str(excinfo.value)
    assert sorted(os.listdir(target)) == ([] if intruder == "empty" else ["theirs.txt"])
    assert hidden(tmp_path) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_second_writer_fails_fast_while_the_first_writes(
    tmp_path: Path, rename_mode: str, overwrite: bool
) -> None:
    target = tmp_path / "model"
    with atomic_dir(target, overwrite=True) as tmp:
        (tmp / "first.txt").write_text("first")
        with pytest.raises(XmcError) as excinfo, atomic_dir(target, overwrite=overwrite):
            pytest.fail("the second writer entered while the first held the target")
    message = str(excinfo.value)
    assert str(target) in message and "another" in message and "fix:" in message
    assert os.listdir(target) == ["first.txt"]
    assert hidden(tmp_path) == []


def test_a_waiting_writer_replaces_only_after_the_first_finished(
    tmp_path: Path, rename_mode: str
) -> None:
    target = tmp_path / "artifact"
    entered, errors = threading.Event(), []

    def second() -> None:
        try:
            with atomic_dir(target, overwrite=True, wait=True) as tmp:
                entered.set()
                assert (target / "v.txt").read_text() == "first"  # the first is complete
                (tmp / "v.txt").write_text("second")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    with atomic_dir(target) as tmp:
        (tmp / "v.txt").write_text("first")
        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.3), "the waiting writer entered while the first held it"
    thread.join(60)
    assert not thread.is_alive() and errors == []
    assert (target / "v.txt").read_text() == "second"
    assert hidden(tmp_path) == []


def test_two_ingests_into_one_destination_the_second_exits_2(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "src")
    dest = tmp_path / "ds"
    holder = (  # the first writer: holds the destination until told to finish
        "import sys\nfrom xmc_core.storage.atomic import atomic_dir\n"
        "with atomic_dir(sys.argv[1], overwrite=True) as tmp:\n"
        "    (tmp / 'first.txt').write_text('first')\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", holder, str(dest)], cwd=ROOT, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert first.stdout is not None and first.stdout.readline() == "ready\n"
        for extra in ([], ["--overwrite"]):
            out = xmc("ingest", "lines", str(src), str(dest), *extra)
            assert out.returncode == 2, out.stderr
            assert out.stderr.startswith("error: ") and str(dest) in out.stderr
            assert "another" in out.stderr and "Traceback" not in out.stderr
    finally:
        first.communicate("go\n", timeout=60)
    assert first.returncode == 0
    assert os.listdir(dest) == ["first.txt"]
    assert xmc("ingest", "lines", str(src), str(dest), "--overwrite").returncode == 0
    assert Corpus(dest).manifest.splits["train"].rows == 2
    assert hidden(tmp_path) == []


def test_leftovers_of_a_dead_writer_are_cleared_by_the_next(tmp_path: Path) -> None:
    target = tmp_path / "key"
    (tmp_path / ".key.abcd1234.tmp").mkdir()  # a killed writer's temporary
    (tmp_path / ".key.abcd1234.tmp" / "X.npz").write_bytes(b"half")
    (tmp_path / ".key.lock").write_text("")  # its lock file, no longer held
    (tmp_path / ".key.efgh5678.dead").mkdir()  # a removal cut short
    (tmp_path / ".key2.abcd1234.tmp").mkdir()  # another target's: left alone
    with atomic_dir(target) as tmp:
        (tmp / "X.npz").write_bytes(b"whole")
    assert (target / "X.npz").read_bytes() == b"whole"
    assert hidden(tmp_path) == [".key2.abcd1234.tmp"]


# --- item 3: --overwrite leaves the old or the new folder, or a swap the next open repairs --

KILLER = """
import errno, os, signal, sys
from pathlib import Path
from xmc_core.storage import folder_swap
from xmc_core.storage.artifacts import write_meta
from xmc_core.storage.atomic import atomic_dir

mode, at, target = sys.argv[1], sys.argv[2], Path(sys.argv[3])
native, rename = folder_swap._renameat2, os.rename

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def renameat2(src, dst, flags):
    if mode == "fallback":
        raise OSError(errno.EINVAL, "not supported here")
    if at == "before":
        die()
    native(src, dst, flags)
    if at == "after":
        die()

def os_rename(src, dst):  # the fallback's two renames: die once the old folder moved away
    rename(src, dst)
    if Path(src) == target:
        die()

folder_swap._renameat2, os.rename = renameat2, os_rename
with atomic_dir(target, overwrite=True) as tmp:
    (tmp / "v.txt").write_text("new")
    write_meta(tmp, "Thing", {})
"""


def old_folder(target: Path) -> None:
    target.mkdir(parents=True)
    (target / "v.txt").write_text("old")
    write_meta(target, "Thing", {})


@pytest.mark.parametrize(
    ("mode", "at", "expect"),
    [("native", "before", "old"), ("native", "after", "new"), ("fallback", "between", "new")],
)
@pytest.mark.parametrize("repair", ["open", "rerun"])
def test_a_sigkill_during_overwrite_leaves_old_or_new(
    tmp_path: Path, mode: str, at: str, expect: str, repair: str
) -> None:
    target = tmp_path / "model"
    old_folder(target)
    proc = subprocess.run([sys.executable, "-c", KILLER, mode, at, str(target)], cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    if mode == "native":  # renameat2: the path held a whole folder all along
        assert (target / "v.txt").read_text() == expect
    if repair == "open":
        read_meta(target, "Thing")  # a load finishes a half-done swap
        assert (target / "v.txt").read_text() == expect
        assert ".model.swap" not in hidden(tmp_path)
    with atomic_dir(target, overwrite=True) as tmp:  # a rerun repairs before it writes
        assert (target / "v.txt").read_text() == expect
        (tmp / "v.txt").write_text("rerun")
    assert (target / "v.txt").read_text() == "rerun"
    assert hidden(tmp_path) == []


def test_a_dataset_open_finishes_an_interrupted_swap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The state a kill between the fallback's two renames leaves, made by hand: ``xmc info``
    (which printed nothing, rc 0) and a library open each finish it, and say so."""
    src = write_lines(tmp_path / "src", labels="a\n", texts="one\n")
    store = tmp_path / "store"
    store.mkdir()
    assert xmc("ingest", "lines", str(src), str(store / "ds")).returncode == 0

    def interrupt() -> None:
        os.rename(store / "ds", store / ".ds.new12345.tmp")
        journal = {"new": ".ds.new12345.tmp", "old": ".ds.old12345.tmp"}
        (store / ".ds.swap").write_text(json.dumps(journal))

    interrupt()
    info = xmc("info", str(store / "ds"))
    assert info.returncode == 0 and "train" in info.stdout and "1" in info.stdout, info
    said = [line for line in info.stderr.splitlines() if str(store / "ds") in line]
    assert len(said) == 1 and "interrupted" in said[0] and "new copy" in said[0], info.stderr
    assert hidden(store) == []
    interrupt()
    with caplog.at_level(logging.WARNING, logger="xmc_core.storage.folder_swap"):
        assert Corpus(store / "ds").manifest.splits["train"].rows == 1
    assert caplog.messages == [said[0]]
    assert hidden(store) == []


def test_an_unreadable_swap_journal_is_reported(tmp_path: Path) -> None:
    (tmp_path / ".model.swap").write_text("{not json")
    with pytest.raises(ArtifactError) as excinfo:
        read_meta(tmp_path / "model", "Thing")
    message = str(excinfo.value)
    assert str(tmp_path / ".model.swap") in message and "fix:" in message
    assert (tmp_path / ".model.swap").read_text() == "{not json"  # kept for the person to read


def test_an_open_that_may_not_repair_reports_the_swap() -> None:
    """A reader without write access (a serving user) gets a clear error, not a half state."""
    base = Path(tempfile.mkdtemp(prefix="xmc-hostile-", dir="/tmp"))  # traversable by others
    try:
        base.chmod(0o755)
        old_folder(base / ".model.new12345.tmp")
        (base / ".model.swap").write_text(
            '{"new": ".model.new12345.tmp", "old": ".model.old12345.tmp"}'
        )
        code = (
            "import sys\nfrom xmc_core.storage.artifacts import read_meta\n"
            "read_meta(sys.argv[1], 'Thing')"
        )
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        cmd = [*as_nobody, sys.executable, "-c", code, str(base / "model")]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        if "setpriv" in out.stderr and out.returncode != 1:  # pragma: no cover - machine
            pytest.skip(f"cannot run as another user here: {out.stderr.strip()}")
        assert out.returncode == 1 and "ArtifactError" in out.stderr, out.stderr
        assert str(base / ".model.swap") in out.stderr and "cannot be finished here" in out.stderr
        assert "fix:" in out.stderr
        read_meta(base / "model", "Thing")  # the owner's next open finishes it
        assert (base / "model" / "v.txt").read_text() == "old"  # the copy the journal names new
        assert hidden(base) == []
    finally:
        shutil.rmtree(base)


# --- item 7 (folders; files in test_hostile_write_targets.py) ------------------------------


@pytest.mark.parametrize("what", ["symlink", "file"])
def test_atomic_dir_refuses_a_link_or_a_file(tmp_path: Path, rename_mode: str, what: str) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_text("keep")
    target = tmp_path / "model"
    if what == "symlink":
        target.symlink_to(real)
    else:
        target.write_text("a file")
    with pytest.raises(XmcError) as excinfo, atomic_dir(target, overwrite=True) as tmp:
        (tmp / "v.txt").write_text("new")
    assert str(target) in str(excinfo.value)
    assert target.is_symlink() if what == "symlink" else target.read_text() == "a file"
    assert (real / "keep.txt").read_text() == "keep"
    assert hidden(tmp_path) == []


@pytest.fixture(params=["disk", "tmpfs"])
def fs_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A folder on the test disk (ext4 here and in CI) or on a fresh tmpfs mount."""
    if request.param == "disk":
        yield tmp_path
        return
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)])
    if mount.returncode != 0:  # pragma: no cover - depends on the machine
        pytest.skip("mounting a tmpfs was refused here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_renameat2_swaps_and_refuses_on_this_filesystem(fs_dir: Path) -> None:
    """The native path really runs here: not the fallback behind the tests' backs."""
    tmp_path = fs_dir
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "in-a").write_text("a")
    folder_swap._renameat2(a, b, folder_swap.RENAME_EXCHANGE)
    assert os.listdir(b) == ["in-a"] and os.listdir(a) == []
    with pytest.raises(FileExistsError):
        folder_swap._renameat2(a, b, folder_swap.RENAME_NOREPLACE)
    folder_swap._renameat2(a, tmp_path / "c", folder_swap.RENAME_NOREPLACE)
    assert sorted(os.listdir(tmp_path)) == ["b", "c"]


def test_two_runs_producing_one_stage_at_once_share_the_first_result(tmp_path: Path) -> None:
    """Two flows on one work_dir computing the same stage: the second waits for the first and
    reuses its folder (it neither fails on the writer lock nor writes the folder again)."""
    log = logging.getLogger("test")
    inside, release, got = threading.Event(), threading.Event(), []

    def first() -> None:
        with ArtifactStore(tmp_path).produce("stage", "key", log) as tmp:
            assert tmp is not None
            (tmp / "out.txt").write_text("first")
            inside.set()
            release.wait(30)

    def second() -> None:
        with ArtifactStore(tmp_path).produce("stage", "key", log) as tmp:
            got.append(tmp)

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(30)
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.5)
    assert t2.is_alive() and got == []  # waiting on the first writer, not failing
    release.set()
    t1.join(30)
    t2.join(30)
    assert got == [None]  # reused the first run's folder
    out = tmp_path / "artifacts" / "stage" / "key"
    assert (out / "out.txt").read_text() == "first"
    assert hidden(out.parent) == []
