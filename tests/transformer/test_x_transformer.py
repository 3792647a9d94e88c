"""The x_transformer family trained on the small synthetic corpus with the tiny encoder: each
label indexing builds a cluster tree, the matcher trains one level, the model's level 0 is the
matcher, labels outside its top clusters never get a score, the loss falls and P@1 beats the
frequency baseline; a corpus without text is refused before any work."""

from __future__ import annotations

import json
import shutil
from typing import Any

import numpy as np
import pytest

from tests.model_helpers import Featurized, train_outputs, write_bow_dataset
from xmc_core.config import XmcConfig
from xmc_core.corpus import Corpus
from xmc_core.errors import InputError
from xmc_core.families.x_transformer import graph as x_transformer
from xmc_core.families.xr_transformer.graph import tokenize_splits
from xmc_core.linear.beam import beam_search
from xmc_core.stages.graph import Held, InProcessRunner
from xmc_core.transformer.shortlist import top_clusters

XT = ["model.kind=x_transformer", "ranker.negatives=tfn+man", "predict.post_processor=noop"]


def x_config(base: XmcConfig, work: Any, *more: str) -> XmcConfig:
    """``base`` (the tiny encoder, SMALL) as an x_transformer with ``XT`` and ``more``."""
    cfg = XmcConfig.load(None, [*XT, *more])
    return base.model_copy(
        update={
            "model": cfg.model, "ranker": cfg.ranker, "predict": cfg.predict,
            "x_transformer": cfg.x_transformer, "work_dir": work,
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tx_dataset, tx_config, tx_features) -> tuple[dict, XmcConfig]:
    cfg = x_config(tx_config, tmp_path_factory.mktemp("xt"))
    return train_outputs(tx_features, cfg, Corpus(tx_dataset)), cfg


def test_the_matcher_trains_once_on_the_finest_clusters(trained, tx_features) -> None:
    out, cfg = trained
    tree = out["tree"]
    assert tree.level_sizes() == [16, 48]  # 48 labels in leaves of at most 4 (SMALL)
    assert [c.level for c in out["matcher_levels"]] == [0]
    assert out["matcher"].n_clusters == 16
    meta = json.loads((out["matcher"].folder / "meta.json").read_text())
    assert meta["matcher"]["bootstrap"] is False and meta["matcher"]["importance_weights"] is False
    assert meta["history"]["steps"] == cfg.matcher.steps_per_level == 6
    model = out["model"]
    assert model.family == "x_transformer" and model.ranker.tree_.level_sizes() == [16, 48]


def test_level_zero_is_the_matcher(trained) -> None:
    out, cfg = trained
    model, test = out["model"], out["embedded_test"]
    W, b = out["matcher"].head().arrays()
    want = top_clusters(test.E, W, b, 5)
    kept = beam_search(test.X, model.ranker.chunks_[:1], [5], "noop", cfg.ranker.bias)
    assert np.array_equal(kept.indptr, want.indptr) and np.array_equal(kept.indices, want.indices)
    np.testing.assert_allclose(kept.data, want.data, rtol=1e-4, atol=1e-5)
    assert model.ranker.weights_[0][: tfidf_width(out)].nnz == 0  # the head reads only e


def tfidf_width(out: dict) -> int:
    return out["embedded_test"].X.shape[1] - out["embedded_test"].E.shape[1]


@pytest.mark.parametrize("beam", [1, 3])
def test_no_label_outside_the_matchers_top_clusters_is_scored(trained, beam: int) -> None:
    out, _ = trained
    model, test = out["model"], out["embedded_test"]
    W, b = out["matcher"].head().arrays()
    top = top_clusters(test.E, W, b, beam)
    cluster_of = model.ranker.tree_.label_to_cluster(0)
    scores = model.ranker.predict(test.X, beam_size=beam, topk=48)
    for i in range(scores.shape[0]):
        labels = scores.indices[scores.indptr[i] : scores.indptr[i + 1]]
        assert set(cluster_of[labels]) <= set(top[i].indices)
    # a beam of b clusters of at most 4 labels: at most 4b labels per document
    assert np.diff(scores.indptr).max() <= 4 * beam


def test_loss_falls_and_p1_beats_the_frequency_baseline(trained, tx_features) -> None:
    out, _ = trained
    meta = json.loads((out["matcher"].folder / "meta.json").read_text())
    records = meta["history"]["records"]
    assert records[-1]["loss"] < records[0]["loss"]
    Y_train, Y_test = tx_features.train.Y, tx_features.test.Y
    frequent = int(np.argmax(np.bincount(Y_train.indices, minlength=Y_train.shape[1])))
    baseline = float(Y_test[:, frequent].sum()) / Y_test.shape[0]
    p1 = out["evaluation"].values["P@1"]
    assert p1 > baseline + 0.2, (p1, baseline)


def index_tree(feats: Featurized, corpus: Corpus, cfg: XmcConfig) -> Any:
    """The cluster tree of ``cfg``'s indexing (only the stages it needs)."""
    run = InProcessRunner(str(cfg.work_dir))
    given = {"vectorizer": feats.vectorizer, "label_index": feats.labels,
             "label_features": feats.label_features, "train": feats.train}  # fmt: skip
    handles: dict[str, Any] = {k: Held(v, f"given-{k}") for k, v in given.items()}
    handles["corpus"] = run.source(Corpus, str(corpus.path))
    tokens = tokenize_splits(run, handles["corpus"], cfg.encoder)
    z = x_transformer.index_features(run, handles, tokens["train"], cfg)
    tree = run(x_transformer.CLUSTERS, label_features=z, cfg=cfg.tree)
    return run.value(z), run.value(tree)


@pytest.mark.parametrize(
    ("indexing", "width"), [("pifa_tfidf", 20_000), ("label_text", 20_000), ("pifa_neural", 32)]
)
def test_each_indexing_builds_a_tree(
    tmp_path, tx_dataset, tx_config, tx_features, indexing: str, width: int
) -> None:
    cfg = x_config(tx_config, tmp_path, f"x_transformer.indexing={indexing}")
    z, tree = index_tree(tx_features, Corpus(tx_dataset), cfg)
    assert z.z.shape == (48, width)  # TF-IDF features / the tiny encoder's width
    assert tree.level_sizes() == [16, 48]
    assert np.bincount(tree.C[1].indices).max() <= 4  # tree.max_leaf_size (SMALL)
    if indexing == "pifa_tfidf":
        assert z is tx_features.label_features  # the featurize graph's own
    elif indexing == "label_text":
        assert z.kind == "label_text" and (z.z != tx_features.label_features.z).nnz > 0
    else:
        assert z.kind == "pifa_neural"


def test_label_text_indexing_needs_label_texts(tmp_path, tx_dataset, tx_config, tx_features):
    cfg = x_config(tx_config, tmp_path, "x_transformer.indexing=label_text")
    without = tmp_path / "no-label-texts"
    shutil.copytree(tx_dataset, without)
    (without / "labels.parquet").unlink()
    with pytest.raises(InputError, match=r"x_transformer\.indexing=label_text needs label texts"):
        index_tree(tx_features, Corpus(without), cfg)


def test_a_corpus_without_text_is_refused(tmp_path, tx_config, tx_features) -> None:
    cfg = x_config(tx_config, tmp_path)
    with pytest.raises(InputError, match=r"model\.kind x_transformer needs a raw-text corpus"):
        train_outputs(tx_features, cfg, Corpus(write_bow_dataset(tmp_path / "bow")))
