"""A migrated, empty Prefect database, made once per test run and copied wherever a test starts
a Prefect server on a database of its own (the session's test server, a fresh ``PREFECT_HOME``):
creating one runs Prefect's migrations, about 20 s of CPU each time, which the copy skips. The
server still runs its start-up (its migration check finds nothing to do)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import prefect
from prefect.events.worker import EventsWorker

from tests.shared_tmp import held

CREATE = (
    "import asyncio\n"
    "from prefect.server.database import provide_database_interface\n"
    "asyncio.run(provide_database_interface().create_db())\n"
)
"""What Prefect runs on a new database: its migrations, in a process of its own (its settings)."""


def migrated_template(root: Path) -> Path:
    """The migrated database under ``root`` (a folder every test process of the run shares),
    made by the first process that asks; the others wait for it (a file lock)."""
    target = root / f"prefect-{prefect.__version__}-migrated.db"
    with held(root / "prefect-template.lock"):
        if not target.exists():
            partial = root / "prefect-template.partial.db"
            partial.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env["PREFECT_HOME"] = str(root / "prefect-template-home")
            env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{partial}"
            subprocess.run([sys.executable, "-c", CREATE], env=env, check=True, timeout=600)
            os.replace(partial, target)
    return target


def seed_home(home: Path, template: Path) -> Path:
    """``home`` (a ``PREFECT_HOME`` not used yet) holding a copy of ``template`` as the
    database its server opens (``prefect.db``); returns ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "prefect.db").exists():
        shutil.copyfile(template, home / "prefect.db")
    return home


@contextmanager
def seeded_harness(template: Path) -> Iterator[None]:
    """Prefect's ``prefect_test_harness`` (a server subprocess on a temporary database) on a
    copy of ``template``: the harness names its database ``prefect-test.db`` in a folder from
    ``tempfile.mkdtemp``, which is seeded here before the server opens it."""
    from prefect.testing import utilities

    def seeded_folder() -> str:
        folder = tempfile.mkdtemp()
        shutil.copyfile(template, Path(folder) / "prefect-test.db")
        return folder

    with (
        mock.patch.object(utilities, "mkdtemp", seeded_folder),
        utilities.prefect_test_harness(server_startup_timeout=120),
    ):
        # A harness started while another runs (a module's own server inside the session's):
        # an events worker started before it would keep its client of the other server, fail
        # to look up this one's flows and drop their events (no task runs recorded). Stop the
        # workers, so that the next event starts one for this server.
        EventsWorker.drain_all(timeout=30)
        yield


if __name__ == "__main__":  # python -m tests.prefect_db ROOT (tests/conftest.py, at the start)
    migrated_template(Path(sys.argv[1]))
