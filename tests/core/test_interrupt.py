"""Ctrl-C of a command (``xmc_core.interrupt``), with real SIGINTs to a process group: the
helper processes it started take none, the first stops it cleanly with one line and exit
status 130, a second during a clean-up that hangs exits at once and kills what is left."""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.cli_helpers import press_ctrl_c
from xmc_core.interrupt import Interrupted, interrupted_line

COMMAND = """
import subprocess, sys, time
from xmc_core.app.entry import run_command
from xmc_core.interrupt import on_ctrl_c, shielded_children

def command():
    with shielded_children():
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with on_ctrl_c(lambda: "demo stopped at step 2", last=helper.kill):
        try:
            print("working", flush=True)
            time.sleep(60)
        finally:
            print("cleaning up, helper", "running" if helper.poll() is None else "gone")
            if sys.argv[1] == "hang":
                time.sleep(60)
            helper.terminate()
            helper.wait()

sys.exit(run_command(command))
"""


def test_first_ctrl_c_stops_cleanly_with_one_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", COMMAND, "clean"]
    stopped = press_ctrl_c(cmd, dict(os.environ), tmp_path / "log", lambda out: "working" in out)
    assert stopped.returncode == 130
    # the helper took no Ctrl-C: the command stopped it in its clean-up
    assert stopped.after == "cleaning up, helper running\ninterrupted: demo stopped at step 2\n"


def test_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", COMMAND, "hang"]
    stopped = press_ctrl_c(
        cmd, dict(os.environ), tmp_path / "log",
        lambda out: "working" in out, again=lambda out: "cleaning up" in out,
    )  # fmt: skip
    assert stopped.returncode == 130  # not 60 s later; the helper is gone (press_ctrl_c)
    assert stopped.after == "cleaning up, helper running\ninterrupted: demo stopped at step 2\n"


SWALLOWED = """
import ctypes, signal, sys, time
from xmc_core.app.entry import run_command
from xmc_core.interrupt import on_ctrl_c

@ctypes.CFUNCTYPE(None)
def callback():  # as numba's compiler calls back into Python through llvmlite
    signal.raise_signal(signal.SIGINT)  # the handler runs in here, where ctypes drops errors
    print("the rest of the callback", flush=True)

def command():
    with on_ctrl_c(lambda: "demo stopped in a callback"):
        callback()
        time.sleep(5)  # the Ctrl-C lands here, once the callback has returned
        print("finished anyway", flush=True)

sys.exit(run_command(command))
"""


def test_a_ctrl_c_inside_a_ctypes_callback_stops_the_command_after_it() -> None:
    """A Ctrl-C during numba's compilation once raised inside llvmlite's ctypes callback, which
    prints the error and drops it: the run went on to the end (seen in the flow test)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True)
    assert time.monotonic() - start < 4.5  # not after its 5 s of work
    assert (done.returncode, done.stdout) == (130, "")
    assert done.stderr == "interrupted: demo stopped in a callback\n"


def test_a_ctrl_c_during_a_python_codec_keeps_its_one_line() -> None:
    # the interpreter wraps an exception a codec function raises (CI, 2026-12-02: Ctrl-C while
    # something decoded cp437 printed "interrupted: decoding with 'cp437' codec failed (...)")
    def decode(_data: bytes, _errors: str = "strict") -> tuple[str, int]:
        raise Interrupted("train flow stopped at label-tree")

    def search(name: str) -> codecs.CodecInfo | None:
        return codecs.CodecInfo(None, decode, name=name) if name == "xmc_test_boom" else None

    codecs.register(search)
    try:
        b"x".decode("xmc_test_boom")
    except Interrupted as err:
        assert str(err).startswith("decoding with 'xmc_test_boom' codec failed")  # the wrapping
        assert interrupted_line(err) == "interrupted: train flow stopped at label-tree"
    else:
        raise AssertionError("the codec did not raise")
    finally:
        codecs.unregister(search)
    assert interrupted_line(KeyboardInterrupt()) == "interrupted (Ctrl-C)"
