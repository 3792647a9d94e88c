"""Crash-test hook: hold a stage mid-write, audit reads of temporary folders.

Not imported by the tests: ``crash_services.start_services`` copies it as ``sitecustomize.py``
onto the ``PYTHONPATH`` of every flow process and Dask worker of the crash campaign
(``test_crash_safety.py``), where it acts only when ``XMC_CRASH_PLAN_FILE`` is set.
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

_PLAN_FILE = os.environ.get("XMC_CRASH_PLAN_FILE")


def _tmp_root(path):
    """(temporary artifact folder ``.../artifacts/<stage>/.<key>.*.tmp`` holding path, stage)."""
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        name = parts[i]
        if parts[i - 2] == "artifacts" and name.startswith(".") and name.endswith(".tmp"):
            return os.sep.join(parts[: i + 1]), parts[i - 1]
    return None, None


def _secede():
    """In a Dask worker, give the held task's slot back: the other stages still run."""
    if "distributed" in sys.modules:
        import distributed

        try:
            distributed.get_worker()
        except ValueError:
            return
        distributed.secede()


def _install(audit_log):
    own = set()
    busy = threading.local()

    def note(record):
        busy.on = True
        try:
            with open(audit_log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
        finally:
            busy.on = False

    def audit(event, args):
        if event == "tempfile.mkdtemp":
            own.add(os.path.abspath(args[0]))
            return
        if event not in ("open", "os.scandir", "os.listdir") or getattr(busy, "on", False):
            return
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, (str, os.PathLike)):
            return
        path = os.path.abspath(os.fspath(path))
        if ".tmp" not in path:
            return
        root, _ = _tmp_root(path)
        if root is not None and root not in own:
            note({"violation": event, "path": path, "pid": os.getpid()})

    sys.addaudithook(audit)
    note({"installed": os.getpid(), "argv": sys.argv[:2]})

    import xmc_core.storage.atomic as atomic

    original = atomic.atomic_file

    def hold(target):
        root, stage = _tmp_root(os.path.abspath(str(target)))
        if root is None:
            return
        with open(_PLAN_FILE, encoding="utf-8") as fh:
            plan = json.load(fh)
        if stage not in plan.get("holds", {}):
            return
        after, point = plan["holds"][stage]
        if point == "meta" and not (target.name == "meta.json" and str(target.parent) == root):
            return
        finished = [p for p in Path(root).parent.iterdir() if p.is_dir() and p.name[0] != "."]
        if len(finished) < after:
            return
        marker = os.path.join(plan["markers"], stage)
        try:
            os.close(os.open(marker + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # one held task per kill: the others go on
        info = {"stage": stage, "tmp": root, "target": str(target), "pid": os.getpid()}
        with open(marker + ".partial", "w", encoding="utf-8") as fh:
            fh.write(json.dumps(info))
        os.replace(marker + ".partial", marker)  # the test reads it whole once it exists
        _secede()
        while not os.path.exists(marker + ".release"):  # the test SIGKILLs the flow meanwhile
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)  # a Dask worker dies with its task

    @contextlib.contextmanager
    def atomic_file(target, *args, **kwargs):
        with original(target, *args, **kwargs) as tmp:
            yield tmp
        hold(Path(target))

    atomic.atomic_file = atomic_file


if _PLAN_FILE:
    with open(_PLAN_FILE, encoding="utf-8") as _fh:
        _install(json.load(_fh)["audit"])
