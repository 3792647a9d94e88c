"""A warm XR-Linear start in process: from its own corpus it gives the champion back; from a
grown corpus it keeps the champion's columns, label ids and clusters, records what it reused,
and predicts as well as a cold start."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.corpus.helpers import parquet_drop
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import ingest
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import XmcError
from xmc_core.families.train import train_in_process
from xmc_core.families.warm import WarmBase
from xmc_core.model.xmc_model import XmcModel

SETS = ["model.kind=xr_linear", "tree.branching=4", "tree.max_leaf_size=6"]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> tuple[Corpus, Corpus]:
    """(first 200 training documents, all 400): the same test split, doc ids and label texts."""
    root = tmp_path_factory.mktemp("warm")
    spec = SyntheticSpec(n_train=400, n_test=100, n_domains=3, topics_per_domain=3)
    full = root / "full"
    write_synthetic_dataset(full, spec, rows_per_group=100)
    train = pq.read_table(full / "train.parquet")
    test = pq.read_table(full / "test.parquet")
    drop = parquet_drop(root / "drops", "half", train.slice(0, 200), test)
    ingest("parquet", drop, root / "half")
    return Corpus(root / "half"), Corpus(full)


def trained(corpus: Corpus, work: Path, warm: WarmBase | None = None) -> dict:
    cfg = XmcConfig.load(None, [*SETS, f"work_dir={work}"])
    return train_in_process(corpus, cfg, warm)


def saved(out: dict, folder: Path) -> WarmBase:
    out["model"].save(folder)
    return WarmBase(str(folder), "the champion")


def test_a_warm_start_on_the_champions_own_corpus_gives_the_champion_back(
    corpora: tuple[Corpus, Corpus], tmp_path: Path
) -> None:
    half, _ = corpora
    cold = trained(half, tmp_path / "cold")
    warm = trained(half, tmp_path / "warm", saved(cold, tmp_path / "champion"))
    a, b = cold["model"], warm["model"]
    assert a.ranker.leaf_cost_scale_ == b.ranker.leaf_cost_scale_ is not None
    for Wa, Wb in zip(a.ranker.weights_, b.ranker.weights_, strict=True):
        assert (Wa != Wb).nnz == 0
    texts = Corpus(half.path).read_split("test", ["text"]).column("text").to_pylist()
    assert a.top_labels(a.predict(texts)) == b.top_labels(b.predict(texts))
    assert a.start is None
    reused = b.start["reused"]
    assert b.start["kind"] == "warm" and b.start["from"] == "the champion"
    assert b.start["warm_in_a_row"] == 1
    assert reused["new_columns"] == 0 and reused["new_labels"] == 0
    assert reused["tree_leaves_kept"] == reused["tree_leaves"] == a.ranker.tree_.C[-1].shape[1]


def test_a_warm_start_on_a_grown_corpus_keeps_the_champions_columns_labels_and_clusters(
    corpora: tuple[Corpus, Corpus], tmp_path: Path
) -> None:
    half, full = corpora
    champion = trained(half, tmp_path / "champion-work")["model"]
    base = saved({"model": champion}, tmp_path / "champion")
    warm = trained(full, tmp_path / "warm", base)
    cold = trained(full, tmp_path / "cold")
    model: XmcModel = warm["model"]
    n_features, n_labels = champion.vectorizer.n_features, len(champion.labels)
    vocabulary = model.vectorizer.vocabulary_.to_pylist()
    assert vocabulary[:n_features] == champion.vectorizer.vocabulary_.to_pylist()
    assert model.labels.names.to_pylist()[:n_labels] == champion.labels.names.to_pylist()
    reused = model.start["reused"]
    assert reused["vocabulary_columns"] == n_features
    assert reused["new_columns"] == model.vectorizer.n_features - n_features
    assert reused["labels"] == n_labels and reused["new_labels"] == len(model.labels) - n_labels
    assert reused["leaf_cost_scale"] == champion.ranker.leaf_cost_scale_
    assert 0 < reused["tree_leaves_kept"] <= reused["tree_leaves"]
    assert len(model.labels) == len(cold["model"].labels)  # the same labels, other ids
    p1_warm, p1_cold = warm["evaluation"].values["P@1"], cold["evaluation"].values["P@1"]
    assert p1_warm >= p1_cold - 0.05, (p1_warm, p1_cold)
    saved_again = XmcModel.load(saved(warm, tmp_path / "warm-model").model_dir)
    assert saved_again.start == model.start
    assert saved_again.ranker.leaf_cost_scale_ == champion.ranker.leaf_cost_scale_


def test_a_family_that_cannot_start_warm_refuses_to(
    corpora: tuple[Corpus, Corpus], tmp_path: Path
) -> None:
    cfg = XmcConfig.load(None, ["model.kind=xml_cnn", f"work_dir={tmp_path}"])
    with pytest.raises(XmcError, match="xml_cnn cannot start warm: retrain it cold"):
        train_in_process(corpora[0], cfg, WarmBase(str(tmp_path), "x"))
