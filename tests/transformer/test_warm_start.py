"""A warm XR-Transformer start in process: the champion's encoder starts the finest matcher
level for a step budget that follows the new documents, its ranker tree keeps its clusters, and
the model records what it reused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.corpus.helpers import parquet_drop
from xmc_core.config import MatcherConfig, XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.corpus.importers import ingest
from xmc_core.families.train import train_in_process
from xmc_core.families.warm import WarmBase, start_line
from xmc_core.families.xr_transformer.warm import warm_steps
from xmc_core.model.xmc_model import XmcModel
from xmc_core.storage.artifacts import read_meta
from xmc_core.transformer.shortlist import matcher_levels


def test_the_warm_step_budget_follows_the_share_of_new_documents() -> None:
    cfg = MatcherConfig(steps_per_level=150)
    assert warm_steps(cfg, 400, 200) == 75  # half the documents are new
    assert warm_steps(cfg, 300, 200) == 50
    assert warm_steps(cfg, 7, 6) == 22  # 150 / 7 = 21.4, rounded up
    assert warm_steps(cfg, 200, 200) == 0  # no new document: no step
    assert warm_steps(cfg, 100, 200) == 0  # fewer documents than the champion's
    assert warm_steps(cfg, 0, 0) == 0


@pytest.fixture(scope="module")
def half(tx_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The first 200 of the 400 training documents, the same test split."""
    root = tmp_path_factory.mktemp("xrt-warm")
    train = pq.read_table(tx_dataset / "train.parquet")
    test = pq.read_table(tx_dataset / "test.parquet")
    ingest("parquet", parquet_drop(root / "drops", "half", train.slice(0, 200), test),
           root / "half")  # fmt: skip
    return Corpus(root / "half")


def config(tx_config: XmcConfig, work: Path) -> XmcConfig:
    model = tx_config.model.model_copy(update={"kind": "xr_transformer"})
    return tx_config.model_copy(update={"model": model, "work_dir": work})


def test_a_warm_start_fine_tunes_the_champions_encoder_at_the_finest_level_only(
    half: Corpus, tx_dataset: Path, tx_config: XmcConfig, tmp_path: Path
) -> None:
    champion: XmcModel = train_in_process(half, config(tx_config, tmp_path / "c"))["model"]
    champion.save(tmp_path / "champion")
    base = WarmBase(str(tmp_path / "champion"), "the champion")
    cfg = config(tx_config, tmp_path / "w")
    out = train_in_process(Corpus(tx_dataset), cfg, base)
    model: XmcModel = out["model"]
    levels = matcher_levels(out["matcher_tree"], cfg.matcher)
    assert len(levels) > 1  # so that training only the finest one is visible
    assert len(out["matcher_levels"]) == 1 and out["matcher"].level == levels[-1]
    steps = cfg.matcher.steps_per_level
    assert steps == 6
    meta = read_meta(out["matcher"].folder, "MatcherLevel", verify=False)
    assert meta["matcher"]["steps_per_level"] == 3  # 6 x 200 new of 400 documents
    reused = model.start["reused"]
    assert reused["matcher_steps"] == 3 and reused["matcher_level"] == levels[-1]
    assert reused["cold_matcher_steps"] == steps * len(levels)
    assert reused["ranker_levels_kept"] == 0  # new documents: a new training problem
    assert reused["new_labels"] == len(model.labels) - len(champion.labels)
    assert reused["vocabulary_columns"] == champion.vectorizer.n_features
    # the ranker tree is the champion's, grown: its unchanged leaves are counted
    assert 0 < reused["tree_leaves_kept"] <= reused["tree_leaves"]
    line = start_line("warm from the champion", model.start)
    assert "encoder fine-tuned 3 steps at matcher level" in line
    # the warm model predicts every test document (P@1 0.79 here: the bound leaves room for
    # another CPU's rounding)
    texts = Corpus(tx_dataset).read_split("test", ["text"]).column("text").to_pylist()
    top = model.top_labels(model.predict(texts))
    assert len(top) == len(texts) and all(len(t) > 0 for t in top)
    assert out["evaluation"].values["P@1"] >= 0.5


def test_a_warm_start_without_new_documents_gives_the_champion_back(
    half: Corpus, tx_config: XmcConfig, tmp_path: Path
) -> None:
    """No matcher step, so the champion's encoder and embeddings; the same training problem,
    so the champion's rankers, kept instead of trained: the champion's predictions."""
    champion: XmcModel = train_in_process(half, config(tx_config, tmp_path / "c"))["model"]
    champion.save(tmp_path / "champion")
    base = WarmBase(str(tmp_path / "champion"), "the champion")
    out = train_in_process(half, config(tx_config, tmp_path / "w"), base)
    model: XmcModel = out["model"]
    reused = model.start["reused"]
    assert reused["matcher_steps"] == 0
    assert reused["ranker_levels_kept"] == champion.ranker.tree_.depth
    assert "every ranker level kept" in start_line("warm", model.start)
    # the encoder is the champion's, unchanged: the same embeddings of the test texts
    texts = half.read_split("test", ["text"]).column("text").to_pylist()
    np.testing.assert_array_equal(champion.encoder.embed(texts), model.encoder.embed(texts))
    a, b = champion.predict(texts), model.predict(texts)
    assert (a != b).nnz == 0 and a.nnz > 0
    assert model.ranker.train_digest_ == champion.ranker.train_digest_ is not None


def test_a_champion_that_recorded_no_training_problem_has_its_rankers_trained_again(
    half: Corpus, tx_config: XmcConfig, tmp_path: Path
) -> None:
    """A champion saved before xmc recorded the digest (or trained on another problem) keeps
    nothing: its rankers are trained again."""
    champion: XmcModel = train_in_process(half, config(tx_config, tmp_path / "c"))["model"]
    champion.ranker.train_digest_ = None
    champion.save(tmp_path / "champion")
    base = WarmBase(str(tmp_path / "champion"), "the champion")
    model = train_in_process(half, config(tx_config, tmp_path / "w"), base)["model"]
    assert model.start["reused"]["ranker_levels_kept"] == 0
    assert "every ranker level trained again" in start_line("warm", model.start)


def test_a_warm_start_can_fine_tune_the_top_layers_only_from_cached_states(
    half: Corpus, tx_dataset: Path, tx_config: XmcConfig, tmp_path: Path
) -> None:
    """``matcher.warm_trainable_layers=1``: the champion's token embeddings and lower layer
    are kept bit for bit and its top layer is fine-tuned; the champion's run cached its
    documents' states below that layer, so the warm run computes those of the 200 new
    training documents only."""
    from safetensors.numpy import load_file

    cfg = config(tx_config, tmp_path / "work")  # one work dir, as the retrain flow's
    cfg = cfg.model_copy(update={"matcher": cfg.matcher.model_copy(
        update={"warm_trainable_layers": 1})})  # fmt: skip
    champion: XmcModel = train_in_process(half, cfg)["model"]
    champion.save(tmp_path / "champion")
    (lineage,) = list((tmp_path / "work" / "encoder-states").iterdir())
    assert cached_docs(lineage) == 200 + 100  # the training and the test documents
    base = WarmBase(str(tmp_path / "champion"), "the champion")
    out = train_in_process(Corpus(tx_dataset), cfg, base)
    assert list((tmp_path / "work" / "encoder-states").iterdir()) == [lineage]
    assert cached_docs(lineage) == 400 + 100
    before = load_file(tmp_path / "champion" / "encoder" / "encoder" / "model.safetensors")
    after = load_file(out["matcher"].folder / "encoder" / "model.safetensors")
    assert before.keys() == after.keys()
    changed = {k for k in before if not np.array_equal(before[k], after[k])}
    top = {k for k in before if ".layer.1." in k}  # the tiny encoder has 2 layers
    assert top and changed and changed <= top
    assert out["evaluation"].values["P@1"] >= 0.5
    model: XmcModel = out["model"]
    assert model.start["reused"]["matcher_top_layers"] == 1
    assert "in its top 1 layer(s), the rest kept" in start_line("warm", model.start)


def cached_docs(lineage: Path) -> int:
    """Documents in an encoder-state cache folder (every chunk's meta.json)."""
    return sum(read_meta(c, "EncoderStates")["documents"] for c in lineage.iterdir())
