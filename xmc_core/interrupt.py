"""Ctrl-C: the first stops a command cleanly and says so in one line, a second exits at once.

A terminal's Ctrl-C sends SIGINT to every process of its foreground group. A command that starts
helper processes (a flow's Dask workers, its temporary Prefect server) starts them inside
:func:`shielded_children`: they begin with SIGINT blocked, so the command's own process alone
takes the Ctrl-C and stops them in order.

Inside :func:`on_ctrl_c` the first SIGINT raises :class:`Interrupted` where the command is,
its text saying what stopped and how a rerun resumes; the command unwinds (its ``finally``
clauses stop what it started) and :func:`~xmc_core.app.entry.run_command` prints that text as
the one line, exit status :data:`EXIT_INTERRUPTED`. A second SIGINT during that clean-up runs
``last`` (kill what is left) and ends the process at once. Where C code calling back into Python
drops the error (a ctypes callback: numba compiling through llvmlite), the Ctrl-C is raised
again once the callback has returned.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from multiprocessing import resource_tracker
from types import FrameType

EXIT_INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C: 128 + SIGINT, as a shell reports it."""

_STAGE: ContextVar[str | None] = ContextVar("xmc_running_stage", default=None)


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C; its text says what stopped and how a rerun resumes (one line)."""


def interrupted_line(err: KeyboardInterrupt) -> str:
    """The one line a command stopped by ``err`` prints. A Ctrl-C that came while a codec
    written in Python was decoding reaches here wrapped by the interpreter ("decoding with
    'cp437' codec failed (Interrupted: ...)", the same type, the original as its cause): the
    line is the original's."""
    if not isinstance(err, Interrupted):
        return "interrupted (Ctrl-C)"
    while isinstance(err.__cause__, Interrupted):
        err = err.__cause__
    return f"interrupted: {err}"


@contextmanager
def stage_running(label: str) -> Iterator[None]:
    """Name the stage the enclosed code runs: a Ctrl-C meanwhile says it stopped there."""
    token = _STAGE.set(label)
    try:
        yield
    finally:
        _STAGE.reset(token)


def running_stage() -> str | None:
    """The stage this thread runs now (see :func:`stage_running`), or None."""
    return _STAGE.get()


@contextmanager
def shielded_children() -> Iterator[None]:
    """Processes and threads started inside begin with SIGINT blocked (a blocked signal stays
    blocked across ``fork`` and ``exec``): the terminal's Ctrl-C reaches this process alone,
    which stops them itself. This process still takes it: its other threads leave SIGINT
    open, and Python runs the handler in the main thread.

    Multiprocessing's resource tracker is started first: started inside, it would unblock
    SIGINT in the thread that started it (it unblocks rather than restores the mask)."""
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def on_ctrl_c(
    describe: Callable[[], str],
    first: Callable[[], None] | None = None,
    last: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Within: the first SIGINT calls ``first`` and raises :class:`Interrupted` with
    ``describe()`` (what stopped, how to resume: read when the signal comes); a second calls
    ``last``, prints that line and exits at once (status :data:`EXIT_INTERRUPTED`). Outside
    the main thread (where Python takes no signal) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    said: list[str] = []
    dropped: list[bool] = []  # the Interrupted raised was dropped: raise it again
    timers: list[threading.Timer] = []

    def handle(_signum: int, _frame: FrameType | None) -> None:
        if dropped:
            dropped.clear()
            raise Interrupted(said[0])
        if not said:
            said.append(describe())
            if first is not None:
                first()
            raise Interrupted(said[0])
        try:
            if last is not None:
                last()
            # os.write, not print: the handler may run inside a write to stderr
            os.write(sys.stderr.fileno(), f"{interrupted_line(Interrupted(said[0]))}\n".encode())
        finally:
            os._exit(EXIT_INTERRUPTED)

    def unraisable(error: sys.UnraisableHookArgs) -> None:
        if not isinstance(error.exc_value, Interrupted):
            hook(error)
            return
        # raised inside a callback from C that drops errors: a SIGINT again, from another
        # thread (here the handler would run at once), once this thread is back in Python
        dropped.append(True)
        main = threading.main_thread().ident
        timers.append(threading.Timer(0.01, signal.pthread_kill, (main, signal.SIGINT)))
        timers[-1].start()

    previous, hook = signal.signal(signal.SIGINT, handle), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield
        if said:  # its Interrupted dropped, the command ended before it came again
            raise Interrupted(said[0])
    except BaseException as err:
        if said and not isinstance(err, Interrupted):  # what the unwinding raised after it
            raise Interrupted(said[0]) from err
        raise
    finally:  # None: a handler not set from Python
        for timer in timers:
            timer.cancel()
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
        sys.unraisablehook = hook
