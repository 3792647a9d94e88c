"""Shared fixtures: quiet, offline settings before anything imports prefect; the ``slow`` mark.

The fast tier (``make check``: ``pytest -m "not slow"``) is every test not marked ``slow``. A test
is slow when it starts servers or flows (it uses a fixture of :data:`SLOW_FIXTURES`), when its
module is listed in :data:`SLOW_MODULES` (each listed for what makes it cost), or when it is
marked ``@pytest.mark.slow`` itself. ``make test`` runs every test.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from xmc_core.env import apply_quiet_defaults

apply_quiet_defaults()


@pytest.fixture(scope="session")
def prefect_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty Prefect database (:mod:`tests.prefect_db`), made once for the run: the
    pytest-xdist workers' temporary folders share their parent."""
    from tests.prefect_db import migrated_template
    from tests.shared_tmp import shared_root

    return migrated_template(shared_root(tmp_path_factory))


@pytest.fixture(scope="session")
def prefect_server(prefect_template: Path) -> Iterator[None]:
    """One Prefect test server for every test that runs a flow (flows, the contract suite)."""
    from tests.prefect_db import seeded_harness

    with seeded_harness(prefect_template):
        yield


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its schema created and nothing in it, for tests to copy
    where their store's creation is not what they test (creating the schema costs seconds)."""
    import mlflow

    db = tmp_path_factory.mktemp("empty-store") / "mlflow.db"
    with contextlib.chdir(db.parent):  # the Default experiment's artifacts: beside it
        client = mlflow.MlflowClient(f"sqlite:///{db}", registry_uri=f"sqlite:///{db}")
        assert client.search_registered_models() == [] and len(client.search_experiments()) == 1
    return db


TESTS = Path(__file__).resolve().parent

SLOW_FIXTURES = frozenset({"prefect_server"})
"""Fixtures that run flows: a Prefect test server (tens of seconds to start) and flow runs."""

SLOW_MODULES = {
    "integration/test_lifecycle.py": "Prefect, MLflow and worker servers; three deployed retrains",
    "ui": "a Prefect server with its UI, a flow run and Chromium",
    "flows": "flow runs (the Prefect test server, or a server of their own)",
    "model/test_contract.py": "every family trained in-process, through the CLI and the flow",
    "transformer/test_onnx_int8.py": "ONNX export and int8 quantization of the encoder",
    "transformer/test_int8_graph.py": "ONNX export and int8 quantization of the encoder",
    "benchmarks": "the benchmark scripts end to end on tiny corpora (training, ONNX, subprocesses)",
    "reliability": "hostile inputs through the command line, fuzzing, the crash campaign",
    "serving": "MLflow stores and registries, the HTTP server in subprocesses",
    "app/test_matrix_cli.py": "xmc train/predict/evaluate through the command line",
    "app/test_describe.py": "trained models and datasets described through the command line",
    "core/test_cli.py": "xmc train/predict/evaluate through the command line",
    "model/test_ensemble.py": "ensembles of several trained members",
    "model/test_ensemble_members.py": "ensembles of several trained members",
}
"""Modules (or folders) under ``tests/`` whose every test is slow, with why."""

LONGEST_FIRST = (
    "model/test_contract.py",
    "integration/test_lifecycle.py",
    "reliability/test_crash_safety.py",
    "flows/test_train_flow.py",
    "flows/test_retrain_warm.py",
    "flows/test_train_main.py",
    "ui/test_report_in_browser.py",
    "benchmarks/test_int8_predict.py",
    "reliability/test_hostile_errors.py",
    "reliability/test_hostile_registry.py",
    "reliability/test_hostile_cache.py",
    "flows/test_transformer_flow.py",
    "serving/test_registry.py",
    "flows/test_retrain_flow.py",
    "app/test_matrix_cli.py",
    "core/test_cli.py",
    "reliability/test_hostile_serving.py",
)
"""The modules that take longest (``--durations=0`` of the whole suite), longest first. ``make
test`` runs the suite on two workers, a module at a time each (pytest-xdist ``--dist loadfile``):
these start first, so that the workers do not end with one long module running alone."""


def in_slow_module(path: Path) -> bool:
    """Whether ``path`` (a test file or folder) is, or is inside, one of :data:`SLOW_MODULES`."""
    rel = path.resolve().relative_to(TESTS).as_posix()
    return any(rel == m or rel.startswith(m + "/") for m in SLOW_MODULES)


def is_slow(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the slow tier (see the module docstring)."""
    if item.get_closest_marker("slow") or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return in_slow_module(Path(str(item.path)))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast tier (``-m "not slow"``) does not even import the slow modules (their imports
    alone take seconds)."""
    if config.getoption("markexpr", "") != "not slow" or not collection_path.is_relative_to(TESTS):
        return None
    return True if in_slow_module(collection_path) else None


def run_order(item: pytest.Item) -> int:
    """Where ``item``'s module comes in :data:`LONGEST_FIRST` (the others after, as collected)."""
    rel = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
    return LONGEST_FIRST.index(rel) if rel in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tier ``slow``, so that ``-m "not slow"`` is the fast one; put the longest
    modules first (a stable sort: tests keep their order within a module)."""
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=run_order)


_BUILDERS: list[subprocess.Popen[bytes]] = []
"""The process :func:`pytest_sessionstart` started."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """``make test`` (pytest-xdist workers, the slow tier included): the Prefect template
    database (:func:`prefect_template`) starts being made now, in a process of its own, while
    the workers start and collect; the first of them to need it waits for it (a file lock)."""
    config = session.config
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", 0):
        return
    if config.getoption("markexpr", "") == "not slow":
        return
    root = config._tmp_path_factory.getbasetemp()  # the workers' temporary folders' parent
    cmd = [sys.executable, "-m", "tests.prefect_db", str(root)]
    _BUILDERS.append(subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1]))


def pytest_sessionfinish() -> None:
    for builder in _BUILDERS:  # long finished by now
        builder.wait(timeout=600)
