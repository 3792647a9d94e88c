"""Hostile writes, part 2: atomic files aimed at links, devices, FIFOs, ``/dev/stdout`` and
folders are written through or refused, never renamed over
(``xmc_core.storage.atomic.atomic_file``).

Suite "hostile-writes", with ``test_hostile_writes.py``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.reliability.test_hostile_writes import ROOT, hidden
from xmc_core.errors import XmcError
from xmc_core.storage.atomic import atomic_file, write_bytes, write_text

pytestmark = pytest.mark.reliability


def test_a_symlink_keeps_pointing_at_the_file_it_names(tmp_path: Path) -> None:
    real = tmp_path / "data" / "out.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link, dangling = tmp_path / "out.jsonl", tmp_path / "later.jsonl"
    link.symlink_to(real)
    dangling.symlink_to(tmp_path / "data" / "later-real.jsonl")
    write_text(link, "new\n")
    write_text(dangling, "later\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new\n"
    assert (
        dangling.is_symlink() and (tmp_path / "data" / "later-real.jsonl").read_text() == "later\n"
    )
    assert hidden(tmp_path) == [] and hidden(real.parent) == []


def test_a_character_device_is_written_into_not_replaced(tmp_path: Path) -> None:
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a twin of /dev/null
    except PermissionError as err:  # pragma: no cover - depends on the machine
        pytest.skip(f"cannot create a device node here: {err}")
    write_bytes(null, b"discarded\n")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert hidden(tmp_path) == []


def test_a_fifo_receives_the_bytes_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_bytes(fifo, b"line 1\nline 2\n")
    reader.join(60)
    assert got == [b"line 1\nline 2\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert hidden(tmp_path) == []


STDOUT_WRITER = """
import sys
from xmc_core.storage.atomic import atomic_file
with atomic_file(sys.argv[1]) as tmp, open(tmp, "w") as fh:
    fh.write("record 1\\nrecord 2\\n")
print("wrote 2 records")
"""


@pytest.mark.parametrize("stdout", ["pipe", "file"])
def test_a_link_to_stdout_streams_into_it(tmp_path: Path, stdout: str) -> None:
    """``/dev/stdout`` is a link to ``/proc/self/fd/1``: a link of ours to the same place, so a
    broken run replaces only our link, never the system's."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    cmd = [sys.executable, "-c", STDOUT_WRITER, str(link)]
    if stdout == "pipe":
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    else:
        with open(tmp_path / "captured.txt", "w") as fh:
            subprocess.run(cmd, cwd=ROOT, stdout=fh, timeout=120)
        out = (tmp_path / "captured.txt").read_text()
    assert out == "record 1\nrecord 2\nwrote 2 records\n"
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert hidden(tmp_path) == []


def test_a_folder_is_never_an_atomic_file_target(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    with pytest.raises(XmcError) as excinfo, atomic_file(folder) as tmp:
        tmp.write_text("x")
    assert str(folder) in str(excinfo.value) and "folder" in str(excinfo.value)
    assert (folder / "keep.txt").read_text() == "keep"
    assert hidden(tmp_path) == []
