"""A flow run's return value read back from ``work_dir``, and a hostile one that runs no code.

When the Prefect API answers a flow run's final state change with its own copy of the state
(the client retried after the server's SQLite was busy, and the first try had landed), the
state the caller gets holds only the result's metadata, and ``state.result()`` reads the value
back from the flow's result storage. The flows write their values there as JSON
(``flows.runtime.configured``, ``tasks.outcome.completed``) and ``tasks.cache_records`` serves
them back, checked: a value file rewritten to a pickle, to a record naming a pickle, or to JSON
naming a class for Prefect's decoder to build is refused and builds nothing.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect.results import ResultRecord, ResultRecordMetadata
from prefect.serializers import JSONSerializer, PickleSerializer
from prefect.states import Completed, State

from flows.featurize import featurize, featurize_pipeline
from flows.runtime import configured, prefect_api
from tasks.cache_records import (
    CacheRecords,
    RecordRejected,
    is_flow_result,
    results_root,
)
from tests.prefect_db import seeded_harness
from tests.reliability.test_hostile_cache import TouchOnInit, TouchOnLoad, pickle_record
from xmc_core.config import XmcConfig
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def prefect_server(prefect_template: Path) -> Iterator[None]:
    with seeded_harness(prefect_template):
        yield


@pytest.fixture(scope="module")
def runs(
    prefect_server: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, State, State]:
    """The featurize flow (top level, as ``xmc``'s command runs it) and its pipeline flow (as
    the train flow runs it) on a tiny corpus: ``work_dir`` and their final states."""
    base = tmp_path_factory.mktemp("flow-results")
    corpus = base / "synthetic"
    spec = SyntheticSpec(n_train=60, n_test=20, n_domains=2, topics_per_domain=2)
    write_synthetic_dataset(corpus, spec, rows_per_group=100)
    work = base / "work"
    sets = [f"work_dir={work}"]
    cfg = XmcConfig.load(None, sets)
    with prefect_api():
        top = featurize(str(corpus), None, sets, return_state=True)
        inner = configured(featurize_pipeline, cfg, use_dask=False)(
            str(corpus), cfg, return_state=True
        )
    assert top.is_completed() and inner.is_completed(), (top.message, inner.message)
    return work.resolve(), top, inner


def as_the_api_answers(state: State) -> State:
    """``state`` as the API's own copy: the result's metadata, not the value."""
    data = state.data  # the value, in this process (unless the API already answered)
    metadata = data.metadata if isinstance(data, ResultRecord) else data
    assert isinstance(metadata, ResultRecordMetadata), data
    return Completed(message=state.message, data=metadata)


@pytest.mark.parametrize("which", ["top", "pipeline"])
def test_the_value_of_a_state_the_api_answered_is_read_back(
    runs: tuple[Path, State, State], which: str
) -> None:
    work, top, inner = runs
    state = top if which == "top" else inner
    value = state.result()
    assert set(value) == {"vectorizer", "label_index", "label_features", "train", "test"}
    answered = as_the_api_answers(state)
    assert answered.result() == value  # read from the file, verified, rebuilt
    key = answered.data.storage_key
    assert is_flow_result(results_root(work), key)
    assert json.loads((results_root(work) / Path(key).name).read_text()) == value  # JSON


def pickled_value(marker: Path) -> bytes:
    return base64.encodebytes(pickle.dumps(TouchOnLoad(marker)))


def built(marker: Path) -> dict[str, Any]:
    """What Prefect's JSON decoder builds an object of (creating ``marker``)."""
    return {"__class__": f"{TouchOnInit.__module__}.TouchOnInit", "data": {"path": str(marker)}}


HOSTILE = {
    # a pickle where the value was: what the API's metadata would name for a default flow
    "pickle": lambda marker: pickled_value(marker),
    # JSON naming a class Prefect's decoder imports and builds
    "json-class": lambda marker: json.dumps({"a": [built(marker)]}).encode(),
    "json-exception": lambda marker: json.dumps(
        {"__exc_type__": "builtins.SystemExit", "message": str(marker)}
    ).encode(),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_flow_value_is_refused_and_builds_nothing(
    runs: tuple[Path, State, State], tmp_path: Path, kind: str
) -> None:
    work, top, _ = runs
    answered = as_the_api_answers(top)
    file = results_root(work) / Path(answered.data.storage_key).name
    original = file.read_bytes()
    marker = tmp_path / "marker"
    file.write_bytes(HOSTILE[kind](marker))
    try:
        for serializer in (JSONSerializer(), PickleSerializer()):  # whatever the API names
            meta = ResultRecordMetadata(
                storage_key=answered.data.storage_key,
                serializer=serializer,
                storage_block_id=answered.data.storage_block_id,
            )
            with pytest.raises(RecordRejected, match=r"flow result rejected \(") as excinfo:
                Completed(data=meta).result()
            assert str(file) in str(excinfo.value)
    finally:
        file.write_bytes(original)
    assert not marker.exists(), f"{kind}: the flow's result ran code"
    assert as_the_api_answers(top).result() == top.result()


@pytest.mark.parametrize("kind", ["data-pickle", "pickle-record"])
def test_a_record_shaped_flow_value_is_served_as_plain_data(
    runs: tuple[Path, State, State], tmp_path: Path, kind: str
) -> None:
    """``{"data": <pickle>}`` (an old-style record) and ``{"metadata": <naming pickle>,
    "result": <pickle>}`` (a record) are unpickled by Prefect's own reader, whatever serializer
    the API names: served, each is the plain dict it is, and nothing is unpickled."""
    work, top, _ = runs
    answered = as_the_api_answers(top)
    file = results_root(work) / Path(answered.data.storage_key).name
    original, marker = file.read_bytes(), tmp_path / "marker"
    hostile = (
        {"data": pickled_value(marker).decode()}
        if kind == "data-pickle"
        else json.loads(pickle_record(b"", marker, marker))
    )
    file.write_text(json.dumps(hostile))
    try:
        assert Completed(data=answered.data).result() == hostile
    finally:
        file.write_bytes(original)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("key", "served"),
    [
        ("0123456789abcdef0123456789abcdef", True),
        ("vocabulary/0123456789abcdef/prefect-result.json", False),  # a stage's record
        ("0123456789ABCDEF", False),
        ("../0123456789abcdef", False),
        ("notes.txt", False),
    ],
)
def test_which_keys_are_flow_results(tmp_path: Path, key: str, served: bool) -> None:
    root = tmp_path / "artifacts"
    assert is_flow_result(root, key) is served
    assert is_flow_result(root, str(root / key)) is served


def test_a_flow_value_that_could_not_be_read_back_is_refused_when_written(
    tmp_path: Path,
) -> None:
    """A value Prefect's JSON encoder wrote as a class (a Path, a numpy number) would only fail
    on the rare read back: it fails when written. A failed run's exception is kept."""
    storage, key = CacheRecords(basepath=str(tmp_path)), "ab" * 16
    encoded: dict[str, Any] = {"__class__": "pathlib.PosixPath", "data": "/tmp"}
    with pytest.raises(ValueError, match=r"must be plain JSON .*'__class__'"):
        storage.write_path(key, json.dumps({"model": encoded}).encode())
    assert not (tmp_path / key).exists()
    failure = json.dumps({"__exc_type__": "builtins.RuntimeError", "message": "x"}).encode()
    storage.write_path(key, failure)
    storage.write_path(key + "0", b'{"model": "/tmp"}')
    assert json.loads((tmp_path / (key + "0")).read_text()) == {"model": "/tmp"}
