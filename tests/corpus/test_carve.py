"""The calibration carve: training documents held out by a hash of their doc id, the same
however the corpus is laid out; the carved corpus keeps the rest, the test split, the label
texts and the lineage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.corpus.test_merge import make_corpus, make_xc
from xmc_core.corpus.carve import carve_corpus, carve_share, carved_rows, held_out, held_rows
from xmc_core.corpus.lineage import lineage_of
from xmc_core.corpus.reader import Corpus


def test_the_held_out_documents_follow_their_ids_and_the_seed() -> None:
    ids = [f"doc-{i}" for i in range(10_000)]
    held = held_out(ids, 0.1, seed=0)
    assert 900 < held.sum() < 1100
    reordered = held_out(ids[::-1], 0.1, seed=0)[::-1]
    assert (reordered == held).all()  # a document's fate does not depend on its neighbours
    assert (held_out(ids, 0.1, seed=1) != held).any()
    assert not held_out(ids, 1e-9, seed=0).any() and held_out(ids[:3], 0.5, 0).dtype == bool
    assert held_out(["doc-7"], 0.1, 0)[0] == held[7]


def test_the_share_is_capped_by_max_docs() -> None:
    assert carve_share(1000, 0.1, 50) == 0.05
    assert carve_share(1000, 0.1, 500) == 0.1
    for bad in ((0.0, 10), (1.0, 10), (0.1, 0)):
        with pytest.raises(ValueError):
            carve_share(1000, *bad)


def test_a_carved_corpus_keeps_the_rest_the_test_split_texts_and_lineage(tmp_path: Path) -> None:
    train = [(f"d{i}", f"text number {i}", "a,b" if i % 2 else "c") for i in range(40)]
    test = [("t1", "a test text", "a"), ("t2", "another test text", "c")]
    src = make_corpus(tmp_path, "src", train, test, label_map="0\ta\t1\tthe label a\n")
    manifest = carve_corpus(src, tmp_path / "carved", 0.25, 100, seed=3)
    carved = Corpus(tmp_path / "carved")
    kept = carved.read_split("train").column("doc_id").to_pylist()
    held = carved_rows(src, 0.25, 100, seed=3).column("doc_id").to_pylist()
    expected = [d for d, h in zip([t[0] for t in train], held_out([t[0] for t in train], 0.25, 3),
                                  strict=True) if h]  # fmt: skip
    assert held == expected and 0 < len(held) < 40
    assert kept == [t[0] for t in train if t[0] not in set(held)]  # the rest, in order
    assert carved.read_split("test").to_pylist() == Corpus(src).read_split("test").to_pylist()
    texts = Corpus(src).label_texts()
    assert texts is not None and texts.num_rows >= 1
    assert carved.label_texts().to_pylist() == texts.to_pylist()
    assert lineage_of(tmp_path / "carved") == lineage_of(src)
    record = manifest.source["calibration_carve"]
    assert record["share"] == 0.25 and record["seed"] == 3
    assert manifest.splits["train"].rows == 40 - len(held)


def test_a_bag_of_words_corpus_is_carved_with_its_features(tmp_path: Path) -> None:
    src = make_xc(tmp_path, "xc", n_features=4)
    ids = Corpus(src).read_split("train").column("doc_id").to_pylist()
    seed = next(s for s in range(100) if held_out(ids, 0.5, s).tolist() == [True, False])
    carve_corpus(src, tmp_path / "carved", 0.5, 10, seed)
    rows = Corpus(tmp_path / "carved").read_split("train").to_pylist()
    assert [r["doc_id"] for r in rows] == [ids[1]]
    assert np.asarray(rows[0]["feature_ids"]).tolist() == [1]


def test_a_carve_that_holds_out_every_training_document_is_refused(tmp_path: Path) -> None:
    train = [("only", "the only text", "a")]
    src = make_corpus(tmp_path, "one", train, [("t", "a test", "a")])
    seed = next(s for s in range(1000) if held_out(["only"], 0.9, s)[0])
    with pytest.raises(ValueError, match="every training document"):
        carve_corpus(src, tmp_path / "carved", 0.9, 10, seed)
    assert not (tmp_path / "carved").exists()


def test_the_carved_corpus_counts_its_own_rows_and_its_fingerprint_follows_the_carve(
    tmp_path: Path,
) -> None:
    train = [(f"d{i}", f"text number {i}", "a,b" if i % 3 else "c") for i in range(60)]
    test = [("t1", "a test text", "a,z"), ("t2", "another test text", "c")]
    src = make_corpus(tmp_path, "src", train, test)
    m = carve_corpus(src, tmp_path / "one", 0.3, 100, seed=5)
    rows = Corpus(tmp_path / "one").read_split("train").to_pylist()
    assert m.splits["train"].rows == len(rows)
    assert m.splits["train"].label_assignments == sum(len(r["labels"]) for r in rows)
    assert m.n_labels == len({lab for r in rows for lab in r["labels"]})
    assert m.unseen_test_labels == 1 and m.unseen_test_examples == ["z"]  # z: test only
    again = carve_corpus(src, tmp_path / "two", 0.3, 100, seed=5)
    other = carve_corpus(src, tmp_path / "three", 0.3, 100, seed=6)
    assert again.fingerprint == m.fingerprint != other.fingerprint
    assert m.fingerprint != Corpus(src).fingerprint


def test_a_grouped_corpus_is_carved_by_whole_groups(tmp_path: Path) -> None:
    # 20 groups of 4 documents (a second ids column: the lines importer's groups)
    train = [(f"d{i}\tsrc-{i // 4}", f"text number {i}", "a" if i % 2 else "b") for i in range(80)]
    src = make_corpus(tmp_path, "src", train, [("t1", "a test text", "a")])
    assert Corpus(src).grouped
    held = carved_rows(src, 0.25, 100, seed=3)
    taken = [f"src-{g}" for g in range(20) if held_out([f"src-{g}"], 0.25, 3)[0]]
    assert 0 < len(taken) < 20 and sorted(set(held.column("group").to_pylist())) == sorted(taken)
    assert held.num_rows == 4 * len(taken)  # whole groups
    assert held_rows(src, 0.25, 100, seed=3).sum() == held.num_rows
    manifest = carve_corpus(src, tmp_path / "carved", 0.25, 100, seed=3)
    kept = Corpus(tmp_path / "carved").read_split("train").column("group").to_pylist()
    assert len(kept) == 80 - held.num_rows and not set(kept) & set(taken)
    assert manifest.source["calibration_carve"]["by"] == "group"
    # by_group=False: by doc id, as in a corpus without groups
    ids = [f"d{i}" for i in range(80)]
    by_doc = carved_rows(src, 0.25, 100, seed=3, by_group=False).column("doc_id").to_pylist()
    assert by_doc == [d for d, h in zip(ids, held_out(ids, 0.25, 3), strict=True) if h]
    record = carve_corpus(src, tmp_path / "by-doc", 0.25, 100, 3, by_group=False).source
    assert "by" not in record["calibration_carve"]
