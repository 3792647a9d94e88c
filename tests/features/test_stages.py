"""The featurization stages on a real (tiny) dataset folder, without an orchestrator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import LabelFeaturesConfig, TfidfConfig, TokenizerConfig
from xmc_core.corpus import Corpus, DatasetWriter
from xmc_core.features import stages
from xmc_core.features.label_features import pifa, pifa_partial

TRAIN = [
    ("red apple pie", ["fruit", "food"]),
    ("green pear tart", ["fruit", "food"]),
    ("fast red car", ["vehicle"]),
    ("slow green tractor", ["vehicle", "farm"]),
    ("apple orchard farm", ["farm", "fruit"]),
]
TEST = [("red pear", ["fruit"]), ("blue boat", ["boat"])]


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    with DatasetWriter(tmp_path / "ds", kind="text", source={}, rows_per_group=2) as ds:
        for split, rows in (("train", TRAIN), ("test", TEST)):
            w = ds.split(split)
            for i, (text, labels) in enumerate(rows, 1):
                w.add(f"{split}-{i}", text, labels, split, i)
            ds.close_split(split, split)
        ds.set_label_texts({"fruit": "apple pear fruit", "vehicle": "car tractor"})
    return Corpus(tmp_path / "ds")


def run_stages(corpus: Corpus, kind: str = "pifa") -> tuple:
    tok, tfidf = TokenizerConfig(), TfidfConfig()
    refs = {s: corpus.partitions(s) for s in ("train", "test")}
    counts = {s: [stages.count_partition(corpus, r, tok) for r in refs[s]] for s in refs}
    vec = stages.fit_vectorizer(counts["train"], tfidf, tok)
    index = stages.fit_label_index(corpus)
    parts = {
        s: [
            stages.featurize_partition(corpus, r, c, vec, index)
            for r, c in zip(refs[s], counts[s], strict=True)
        ]
        for s in refs
    }
    z = stages.build_label_features(
        parts["train"], LabelFeaturesConfig(kind=kind), vec, index, corpus.label_texts()
    )
    return vec, index, parts, z


def test_partitioned_stages_equal_whole_corpus_computation(corpus: Corpus) -> None:
    assert len(corpus.partitions("train")) == 3  # rows_per_group=2
    vec, index, parts, z = run_stages(corpus)
    texts = [t for t, _ in TRAIN]
    direct = type(vec)(vec.tfidf, vec.tokenizer).fit(texts)
    assert vec.vocabulary_.equals(direct.vocabulary_)
    x_train = sp.vstack([p.X for p in parts["train"]])
    assert abs(x_train - direct.transform(texts)).max() < 1e-7
    assert index.names.to_pylist() == ["farm", "food", "fruit", "vehicle"]
    y_train = sp.vstack([p.Y for p in parts["train"]]).toarray()
    assert y_train[3].tolist() == [1, 0, 0, 1]  # farm, vehicle
    assert sum(p.unknown_labels for p in parts["test"]) == 1  # "boat" is unseen in train
    whole = pifa([pifa_partial(x_train, sp.csr_matrix(y_train))])
    assert abs(z.z - whole).max() < 1e-6
    assert [i for p in parts["test"] for i in p.doc_ids.to_pylist()] == ["test-1", "test-2"]


def test_label_text_and_concat_features(corpus: Corpus) -> None:
    _, index, _, z_text = run_stages(corpus, "label_text")
    rows = dict(zip(index.names.to_pylist(), z_text.z.toarray(), strict=True))
    assert rows["food"].sum() == 0 and rows["fruit"].sum() > 0  # food has no label text
    _, _, _, z_cat = run_stages(corpus, "pifa_label_text")
    assert z_cat.z.shape[1] == 2 * z_text.z.shape[1]
    np.testing.assert_allclose(np.sqrt(z_cat.z.multiply(z_cat.z).sum(axis=1)).A1, 1.0, rtol=1e-5)


def test_label_text_kind_needs_label_texts(tmp_path: Path, corpus: Corpus) -> None:
    (corpus.path / "labels.parquet").unlink()
    with pytest.raises(ValueError, match="needs label texts"):
        run_stages(Corpus(corpus.path), "label_text")


def test_bag_of_words_corpus_uses_given_features(tmp_path: Path) -> None:
    feats = [([0, 2], [1.0, 1.0]), ([1], [3.0]), ([2, 1], [2.0, 1.0])]
    with DatasetWriter(tmp_path / "bow", kind="bow", source={}, n_features=3) as ds:
        for split in ("train", "test"):
            w = ds.split(split)
            for i, (ids, vals) in enumerate(feats, 1):
                arrays = (np.array(ids, dtype=np.int32), np.array(vals, dtype=np.float32))
                w.add(f"{split}-{i}", None, ["l"], split, i, features=arrays)
            ds.close_split(split, split)
    bow = Corpus(tmp_path / "bow")
    ref = bow.partitions("train")[0]
    counts = stages.count_partition(bow, ref, TokenizerConfig())
    assert counts.terms.to_pylist() == ["0", "1", "2"]
    assert counts.matrix.toarray().tolist() == [[1, 0, 1], [0, 3, 0], [0, 1, 2]]
    vec = stages.fit_vectorizer([counts], TfidfConfig(max_features=None), TokenizerConfig())
    x = vec.transform_counts(counts).toarray()
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-6)
    assert x[1].tolist() == [0.0, 1.0, 0.0]
