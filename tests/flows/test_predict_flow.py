"""The predict flow: Parquet output equal to in-process predictions, for a dataset split (one
task per partition) and a text file (one task per chunk); a rerun is cached."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.predict import predict_pipeline
from flows.runtime import configured, prefect_api
from tests.flows.conftest import task_states
from xmc_core.app import commands
from xmc_core.app.predictions import PREDICTIONS_SCHEMA
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.model.xmc_model import XmcModel

pytestmark = pytest.mark.usefixtures("prefect_server")


@pytest.fixture(scope="module")
def model_dir(small_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("predict-model")
    sets = [f"work_dir={work}", "tree.branching=4", "tree.max_leaf_size=8"]
    commands.train(small_corpus, work / "model", XmcConfig.load(None, sets))
    return work / "model"


def run(
    model: Path, source: Path, output: Path, work: Path, parts: list[str], **kw: int
) -> tuple[str, dict[str, str]]:
    """Predict ``source`` (the train split of a dataset, or a text file) into ``output``; the
    states of its task runs, once the ``parts`` predicted and the stages after them exist."""
    cfg = XmcConfig.load(None, [f"work_dir={work}", "data.rows_per_group=50"])
    with prefect_api():
        flow = configured(predict_pipeline, cfg, use_dask=False)
        state = flow(str(model), str(source), str(output), "train", cfg, return_state=True, **kw)
    assert state.is_completed(), state.message
    expect = frozenset({*parts, "resolve-model", "assemble-predictions", "write-output"})
    if not source.is_dir():
        expect |= {"plan-chunks"}
    return state.result(), task_states(state.state_details.flow_run_id, expect=expect)


def assert_rows_equal(table: pa.Table, ids: list[str], want: list[list[tuple[str, float]]]) -> None:
    assert table.schema.equals(PREDICTIONS_SCHEMA, check_metadata=False)
    assert table.column("doc_id").to_pylist() == ids
    for labels, scores, expected in zip(
        table.column("labels").to_pylist(), table.column("scores").to_pylist(), want, strict=True
    ):
        assert labels == [name for name, _ in expected]
        assert scores == pytest.approx([s for _, s in expected], rel=1e-6)


def test_dataset_split_predictions_equal_in_process_and_rerun_is_cached(
    model_dir: Path, small_corpus: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out" / "train-predictions.parquet"
    parts = [f"predict-train-{i}" for i in range(3)]  # 400 rows, 150 a row group
    result, states = run(model_dir, small_corpus, output, tmp_path / "work", parts, topk=5)
    assert result == str(output)
    assert {n for n in states if n.startswith("predict-")} == set(parts), states
    assert all(states[n] == "Completed" for n in parts), states

    model = XmcModel.load(model_dir)
    feats = model.encode_split(Corpus(small_corpus), "train")
    want = model.top_labels(model.predict_features(feats.X, topk=5))
    assert_rows_equal(pq.read_table(output), feats.doc_ids.to_pylist(), want)

    output.unlink()
    _, states = run(model_dir, small_corpus, output, tmp_path / "work", parts, topk=5)
    assert all(states[n] == "Cached" for n in parts), states
    assert states["assemble-predictions"] == "Cached"
    assert states["write-output"] == "Completed" and output.is_file()


def test_text_file_predictions_in_chunks(
    model_dir: Path, small_corpus: Path, tmp_path: Path
) -> None:
    texts = Corpus(small_corpus).read_split("test", ["text"]).column("text").to_pylist()
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    output = tmp_path / "docs.parquet"
    parts = [f"predict-lines-{first}" for first in (1, 51, 101)]  # 120 lines, 50 a chunk
    _, states = run(model_dir, source, output, tmp_path / "work", parts)
    assert {n for n in states if n.startswith("predict-")} == set(parts), states

    model = XmcModel.load(model_dir)
    ids = [f"line-{i}" for i in range(1, len(texts) + 1)]
    assert_rows_equal(pq.read_table(output), ids, model.top_labels(model.predict(texts)))
