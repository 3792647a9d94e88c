"""Hostile cache records: a ``prefect-result.json`` rewritten in ``work_dir`` never runs code.

Prefect reads a task's cache record with whatever serializer the record names. Each case takes
the featurize flow's ``work_dir`` (one run, copied back per case), rewrites the vocabulary
stage's record where the run put it (a pickle that creates a marker file when loaded, a JSON
record whose decoder is a function that creates it, a JSON record pointing at another folder,
an unknown serializer, a truncated file), reruns the flow, and checks: no marker, the run
succeeds with the same outputs, the finished artifact is reused (not recomputed, not replaced)
and the record is rewritten whole.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import pickle
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from dask.distributed import LocalCluster
from prefect.results import ResultRecordMetadata
from prefect.serializers import JSONSerializer
from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings
from prefect.states import Completed

from flows.featurize import featurize_pipeline
from flows.runtime import configured, prefect_api
from tasks.cache_records import (
    MAX_RECORD_BYTES,
    RESULT_FILE,
    CacheRecords,
    RecordRejected,
    results_root,
    verified_record,
)
from tests.flows.conftest import featurize_tasks, task_states
from tests.prefect_db import seeded_harness
from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import ArtifactError

pytestmark = pytest.mark.reliability

SUITE = "hostile-cache"
TASKS = featurize_tasks({"train": 1, "test": 1})  # 60 and 20 rows, 100 a row group


class TouchOnLoad:
    """Unpickling it creates ``path``: the stand-in for arbitrary code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


@dataclass
class TouchOnInit:
    """Building it creates ``path``: Prefect's JSON decoder builds any class a record names."""

    path: str

    def __post_init__(self) -> None:
        pathlib.Path(self.path).touch()


def touch_marker(obj: dict[str, Any]) -> dict[str, Any]:
    """A JSON ``object_decoder`` a hostile record can name: creates the marker file."""
    pathlib.Path(obj["marker"]).touch()
    return obj


def _json_serializer(**changes: Any) -> dict[str, Any]:
    return {
        "type": "json", "jsonlib": "json",
        "object_encoder": "prefect.serializers.prefect_json_object_encoder",
        "object_decoder": "prefect.serializers.prefect_json_object_decoder",
        "dumps_kwargs": {}, "loads_kwargs": {}, **changes,
    }  # fmt: skip


def _record(serializer: dict[str, Any], result: str) -> bytes:
    metadata = {"storage_key": None, "expiration": None, "serializer": serializer}
    return json.dumps({"metadata": metadata, "result": result}).encode()


def pickle_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    blob = base64.encodebytes(pickle.dumps(TouchOnLoad(marker))).decode()
    return _record({"type": "pickle", "picklelib": "pickle"}, blob)


def decoder_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    serializer = _json_serializer(object_decoder=f"{__name__}.touch_marker")
    return _record(serializer, json.dumps({"marker": str(marker)}))


def redirected_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    record = json.loads(original)
    record["result"] = json.dumps(str(elsewhere))
    return json.dumps(record).encode()


def class_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    payload = {"__class__": f"{__name__}.TouchOnInit", "data": {"path": str(marker)}}
    return _record(_json_serializer(), json.dumps(payload))


def unknown_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    return _record({"type": "xmc-hostile", "code": "touch"}, json.dumps(str(elsewhere)))


def truncated_record(original: bytes, marker: Path, elsewhere: Path) -> bytes:
    return original[: len(original) // 2]


DAMAGE = {
    "pickle": pickle_record,
    "json-decoder": decoder_record,
    "json-redirected": redirected_record,
    "json-class": class_record,
    "unknown-serializer": unknown_record,
    "truncated": truncated_record,
}


@pytest.fixture(scope="module")
def prefect_server(prefect_template: Path) -> Iterator[None]:
    with seeded_harness(prefect_template):
        yield


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("corpus") / "synthetic"
    spec = SyntheticSpec(
        n_train=60, n_test=20, n_domains=2, topics_per_domain=2, labels_per_topic=3
    )
    write_synthetic_dataset(dest, spec, rows_per_group=100)
    return dest


def run(corpus: Path, work: Path, dask: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """Featurize ``corpus`` into ``work`` in this process, or on the Dask cluster ``dask``."""
    cfg = XmcConfig.load(None, [f"work_dir={work}", f"dask.address={dask}"])
    with prefect_api():
        state = configured(featurize_pipeline, cfg, use_dask=bool(dask))(
            str(corpus), cfg, return_state=True
        )
    assert state.is_completed(), state.message
    return state.result(), task_states(state.state_details.flow_run_id, expect=TASKS)


def test_the_pickle_payload_runs_code_when_prefect_loads_it(tmp_path: Path) -> None:
    """The hostile record is live: Prefect's own reader would run it."""
    from prefect._internal.result_records import ResultRecord

    marker = tmp_path / "marker"
    ResultRecord.deserialize(pickle_record(b"", marker, tmp_path))
    assert marker.exists()


@pytest.fixture(scope="module")
def featurized(
    prefect_server: None, corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, dict[str, str]]:
    """One featurize run of ``corpus``: its ``work_dir``, a pristine copy of it, its outputs.
    Each case puts the copy back at the same path (the records name their folders by absolute
    path) instead of featurizing again."""
    base = tmp_path_factory.mktemp("featurized")
    first, _ = run(corpus, base / "work")
    shutil.copytree(base / "work", base / "pristine", symlinks=True)
    return base / "work", base / "pristine", first


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_hostile_cache_record_runs_no_code_and_the_rerun_succeeds(
    featurized: tuple[Path, Path, dict[str, str]],
    corpus: Path,
    tmp_path: Path,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    work, pristine, first = featurized
    shutil.rmtree(work)
    shutil.copytree(pristine, work, symlinks=True)  # as the first run left it
    folder = Path(first["vectorizer"])
    record = folder / RESULT_FILE
    meta_before = (folder / "meta.json").stat()
    marker, elsewhere = tmp_path / "marker", Path(first["label_index"])
    record.write_bytes(DAMAGE[damage](record.read_bytes(), marker, elsewhere))

    second, states = run(corpus, work)

    assert not marker.exists(), f"{damage}: the cache record ran code"
    assert f"{record}: cache record rejected (" in caplog.text  # said so, naming the file
    assert second == first  # not the redirected folder
    assert states["fit-vocabulary"] == "Completed", states  # a cache miss, not Cached
    assert states["label-index"] == "Cached", states  # untouched records still hit
    meta_after = (folder / "meta.json").stat()
    assert (meta_after.st_ino, meta_after.st_mtime_ns) == (
        meta_before.st_ino,
        meta_before.st_mtime_ns,
    )  # the verified artifact was reused, not recomputed
    rewritten = json.loads(record.read_text())
    assert rewritten["metadata"]["serializer"] == _json_serializer()
    assert json.loads(rewritten["result"]) == str(folder)


@pytest.mark.usefixtures("prefect_server")
def test_a_pickled_record_read_on_a_dask_worker_runs_no_code(corpus: Path, tmp_path: Path) -> None:
    """The tasks run on Dask workers, which get the flow's result storage from Prefect."""
    work, marker = tmp_path / "work", tmp_path / "marker"
    # one cluster for the three runs: its workers start with PREFECT_API_URL set, and keep
    # the code fingerprint they computed (the keys) from one run to the next
    with (
        prefect_api(),
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
    ):
        first, _ = run(corpus, work, cluster.scheduler_address)
        _, states = run(corpus, work, cluster.scheduler_address)
        assert set(states.values()) == {"Cached"}, states  # the worker read the records back
        record = Path(first["vectorizer"]) / RESULT_FILE
        record.write_bytes(pickle_record(record.read_bytes(), marker, tmp_path))
        second, states = run(corpus, work, cluster.scheduler_address)

    assert not marker.exists(), "a Dask worker unpickled the cache record"
    assert second == first
    assert states["fit-vocabulary"] == "Completed" and states["label-index"] == "Cached"
    assert json.loads(json.loads(record.read_text())["result"]) == first["vectorizer"]


def _deployment_run(
    monkeypatch: pytest.MonkeyPatch, work: Path, content: str
) -> Callable[[], list[str]]:
    """``run_matcher`` as the train flow calls it, with the matcher deployment's run faked: it
    returned its checkpoints as a JSON result file under ``work`` holding ``content``."""
    import flows.matcher
    from flows.stage_runner import PrefectRunner, Ref

    result = results_root(work) / "0123456789abcdef"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(content)
    metadata = ResultRecordMetadata(storage_key=str(result), serializer=JSONSerializer())
    state = Completed(data=metadata)  # as the API reports the deployment's run
    monkeypatch.setenv(flows.matcher.MATCHER_DEPLOYMENT_ENV, "matcher/xmc-matcher-gpu")
    monkeypatch.setattr(
        flows.matcher, "run_deployment", lambda *a, **k: SimpleNamespace(name="gpu", state=state)
    )
    cfg = XmcConfig.load(None, [f"work_dir={work}"])
    run, refs = PrefectRunner(work), [Ref(object, n) for n in ("tokens", "train", "tree")]

    def read() -> list[str]:
        got = flows.matcher.run_matcher(run, *refs, cfg.encoder, cfg.matcher)
        return [run.path(r) for r in got]

    return read


def test_a_hostile_matcher_deployment_result_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The train flow reads the matcher deployment's return value from ``work_dir``. Given
    ``{"data": ...}``, Prefect takes the file for an old-style record and unpickles the value,
    whatever serializer the API names: such a file is refused, naming it; a list of finished
    checkpoints is taken."""
    work, marker = tmp_path.resolve(), tmp_path / "marker"
    hostile = {"data": base64.encodebytes(pickle.dumps(TouchOnLoad(marker))).decode()}
    read = _deployment_run(monkeypatch, work, json.dumps(hostile))
    storage = {PREFECT_RESULTS_LOCAL_STORAGE_PATH: results_root(work)}  # as on the worker
    with temporary_settings(storage), pytest.raises(ArtifactError) as excinfo:
        read()
    assert not marker.exists(), "the matcher's result was unpickled"
    assert str(results_root(work) / "0123456789abcdef") in str(excinfo.value)

    level = results_root(work) / "matcher-level" / "0a1b"
    level.mkdir(parents=True)
    assert _deployment_run(monkeypatch, work, json.dumps([str(level)]))() == [str(level)]
    elsewhere = json.dumps([str(tmp_path)])  # not a matcher checkpoint of this work_dir
    with pytest.raises(ArtifactError, match="not a finished matcher-level folder"):
        _deployment_run(monkeypatch, work, elsewhere)()


@pytest.mark.parametrize("kind", ["link", "fifo", "oversized", "outside"])
def test_a_record_that_is_no_plain_small_file_of_its_folder_is_refused(
    tmp_path: Path, kind: str
) -> None:
    """A link to another stage's good record, a FIFO (a plain read would block), a huge file,
    a key outside the artifacts folder: refused before anything is parsed."""
    root = tmp_path / "artifacts"
    good, record = root / "label-index" / "a1", root / "vocabulary" / "b2" / RESULT_FILE
    good.mkdir(parents=True)
    record.parent.mkdir(parents=True)
    body = _record(_json_serializer(), json.dumps(str(good)))
    (good / RESULT_FILE).write_bytes(body)
    assert json.loads(verified_record(root, f"label-index/a1/{RESULT_FILE}"))  # the good one
    key = f"vocabulary/b2/{RESULT_FILE}"
    if kind == "link":
        record.symlink_to(good / RESULT_FILE)
    elif kind == "fifo":
        os.mkfifo(record)
    elif kind == "oversized":
        record.write_bytes(body[:-2] + b" " * MAX_RECORD_BYTES + b"}")
    else:
        key = f"../../{RESULT_FILE}"
    with pytest.raises(RecordRejected) as excinfo:
        verified_record(root, key)
    assert "cache record rejected" in str(excinfo.value)


def test_writing_a_record_replaces_a_planted_link_not_the_file_it_points_to(
    tmp_path: Path,
) -> None:
    """A link planted at a record's path must not make Prefect's write land outside the
    artifacts folder: the link itself is replaced by the record."""
    root, outside = tmp_path / "artifacts", tmp_path / "outside.txt"
    outside.write_text("keep me")
    record = root / "vocabulary" / "b2" / RESULT_FILE
    record.parent.mkdir(parents=True)
    record.symlink_to(outside)
    CacheRecords(basepath=str(root)).write_path(f"vocabulary/b2/{RESULT_FILE}", b"record")
    assert outside.read_text() == "keep me"
    assert not record.is_symlink() and record.read_bytes() == b"record"
