"""Merging corpora: upsert by doc id, untouched row groups kept, idempotence, the corpus store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError
from xmc_core.intake.corpus_store import current_corpus, merge_into_store, set_current_corpus
from xmc_core.intake.merge import merge_corpora

Doc = tuple[str, str, str]  # doc id, text, comma-separated labels


def make_corpus(
    tmp_path: Path,
    name: str,
    train: list[Doc],
    test: list[Doc],
    label_map: str | None = None,
    policies: Policies | None = None,
) -> Path:
    """A ``lines`` corpus with explicit ids, ingested in row groups of 2 rows."""
    src = tmp_path / f"src-{name}"
    src.mkdir()
    for split, docs in (("train", train), ("test", test)):
        for suffix, col in (("ids", 0), ("texts", 1), ("labels", 2)):
            (src / f"{split}_{suffix}.txt").write_text("".join(d[col] + "\n" for d in docs))
    if label_map is not None:
        (src / "label_map.txt").write_text(label_map)
    dest = tmp_path / name
    ingest("lines", src, dest, IngestOptions(rows_per_group=2, policies=policies or Policies()))
    return dest


def make_xc(tmp_path: Path, name: str, n_features: int) -> Path:
    """A bag-of-words corpus (``xc`` format) with ``n_features`` features."""
    src = tmp_path / f"src-{name}"
    src.mkdir()
    (src / "train.txt").write_text(f"2 {n_features} 3\n0,1 0:1.0 2:0.5\n2 1:1.0\n")
    (src / "test.txt").write_text(f"1 {n_features} 3\n1 3:2.0\n")
    ingest("xc", src, tmp_path / name, IngestOptions(rows_per_group=2))
    return tmp_path / name


def groups(corpus: Path, split: str) -> list[str]:
    """Content hash of every row group of ``split``, in order."""
    meta = pq.ParquetFile(corpus / f"{split}.parquet")
    return [
        hashlib.sha256(repr(meta.read_row_group(g).to_pylist()).encode()).hexdigest()
        for g in range(meta.metadata.num_row_groups)
    ]


def rows(corpus: Path, split: str) -> dict[str, tuple[str, list[str]]]:
    table = Corpus(corpus).read_split(split).to_pylist()
    return {r["doc_id"]: (r["text"], r["labels"]) for r in table}


def group_ids(corpus: Path, split: str) -> list[list[str]]:
    meta = pq.ParquetFile(corpus / f"{split}.parquet")
    return [
        meta.read_row_group(g, columns=["doc_id"]).column("doc_id").to_pylist()
        for g in range(meta.metadata.num_row_groups)
    ]


BASE_TRAIN = [(f"b{i}", f"base text {i}", "x,y" if i % 2 else "y") for i in range(1, 6)]
BASE_TEST = [("t1", "test one", "x"), ("t2", "test two", "y")]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return make_corpus(tmp_path, "base", BASE_TRAIN, BASE_TEST)


def test_new_documents_are_appended_after_untouched_base_groups(tmp_path: Path, base: Path) -> None:
    new = [("n1", "new 1", "z"), ("n2", "new 2", "x"), ("n3", "new 3", "x")]
    drop = make_corpus(tmp_path, "d1", new, [("n4", "new test", "z")])
    manifest = merge_corpora(base, [drop], tmp_path / "out", rows_per_group=2)
    out = tmp_path / "out"
    assert manifest.splits["train"].rows == 8 and manifest.splits["test"].rows == 3
    assert manifest.n_labels == 3 and manifest.fingerprint == Corpus(out).fingerprint
    assert groups(out, "train")[:3] == groups(base, "train")
    assert groups(out, "test")[:1] == groups(base, "test")
    assert group_ids(out, "train") == [["b1", "b2"], ["b3", "b4"], ["b5"], ["n1", "n2"], ["n3"]]
    assert group_ids(out, "test") == [["t1", "t2"], ["n4"]]
    assert manifest.source["base"]["fingerprint"] == Corpus(base).fingerprint


def test_upsert_replaces_documents_and_moves_them_across_splits(tmp_path: Path, base: Path) -> None:
    drop = make_corpus(
        tmp_path,
        "d1",
        [("b3", "rewritten", "z"), ("t1", "test one", "x")],
        [("b5", "now test", "y")],
    )
    merge_corpora(base, [drop], tmp_path / "out", rows_per_group=10)
    out = tmp_path / "out"
    train, test = rows(out, "train"), rows(out, "test")
    assert not set(train) & set(test)
    assert train["b3"] == ("rewritten", ["z"]) and train["t1"] == ("test one", ["x"])
    assert test["b5"] == ("now test", ["y"]) and "b5" not in train
    assert group_ids(out, "train") == [["b1", "b2"], ["b4"], ["b3", "t1"]]
    assert group_ids(out, "test") == [["t2"], ["b5"]]
    assert groups(out, "train")[0] == groups(base, "train")[0]


def test_remerging_the_same_drops_changes_nothing(tmp_path: Path, base: Path) -> None:
    d1 = make_corpus(tmp_path, "d1", [("b1", "changed", "x"), ("n1", "n", "x")], [("n2", "m", "y")])
    d2 = make_corpus(tmp_path, "d2", [("n1", "changed again", "y")], [("b1", "to test", "y")])
    first = merge_corpora(base, [d1, d2], tmp_path / "m1", rows_per_group=2)
    again = merge_corpora(tmp_path / "m1", [d1, d2], tmp_path / "m2", rows_per_group=2)
    assert again.fingerprint == first.fingerprint
    for split in ("train", "test"):
        assert groups(tmp_path / "m2", split) == groups(tmp_path / "m1", split)
    assert rows(tmp_path / "m1", "test")["b1"] == ("to test", ["y"])
    assert rows(tmp_path / "m1", "train")["n1"] == ("changed again", ["y"])


def test_replace_mode_keeps_the_drops_alone_later_wins(tmp_path: Path, base: Path) -> None:
    d1 = make_corpus(tmp_path, "d1", [("a", "first", "x"), ("b", "kept", "x")], [("c", "t", "x")])
    d2 = make_corpus(tmp_path, "d2", [("a", "second", "y")], [("d", "t", "y")])
    manifest = merge_corpora(None, [d1, d2], tmp_path / "out", rows_per_group=2)
    assert manifest.source["base"] is None
    assert rows(tmp_path / "out", "train") == {"b": ("kept", ["x"]), "a": ("second", ["y"])}
    assert sorted(rows(tmp_path / "out", "test")) == ["c", "d"]


def test_kind_mismatch_names_the_offending_drop(tmp_path: Path, base: Path) -> None:
    bow = make_xc(tmp_path, "bow", 4)
    with pytest.raises(InputError) as excinfo:
        merge_corpora(base, [bow], tmp_path / "out", rows_per_group=2)
    assert excinfo.value.path == str(bow) and "bag-of-words" in str(excinfo.value)
    wide = make_xc(tmp_path, "wide", 6)
    with pytest.raises(InputError) as excinfo:
        merge_corpora(None, [bow, wide], tmp_path / "out", rows_per_group=2)
    assert excinfo.value.path == str(wide) and "6 features" in str(excinfo.value)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_bow_corpora_merge_with_their_features(tmp_path: Path) -> None:
    a, b = make_xc(tmp_path, "a", 4), make_xc(tmp_path, "b", 4)
    manifest = merge_corpora(a, [b], tmp_path / "out", rows_per_group=2)
    assert manifest.kind == "bow" and manifest.n_features == 4
    assert manifest.fingerprint == Corpus(a).fingerprint  # same ids, same content


def test_a_doc_in_both_splits_of_a_drop_is_refused(tmp_path: Path, base: Path) -> None:
    drop = make_corpus(tmp_path, "d1", [("same", "a", "x")], [("same", "b", "x")])
    with pytest.raises(InputError, match="'same' is in both") as excinfo:
        merge_corpora(base, [drop], tmp_path / "out", rows_per_group=2)
    assert excinfo.value.path == str(drop)


def test_label_texts_merge_later_non_empty_wins(tmp_path: Path) -> None:
    base = make_corpus(
        tmp_path, "base", [("a", "t", "x,y")], [("b", "t", "x")], "0\tx\t1\tEx\n1\ty\t1\tWhy\n"
    )
    drop = make_corpus(
        tmp_path, "d1", [("c", "t", "z")], [("d", "t", "y")], "0\tz\t1\tZed\n1\ty\t1\n"
    )
    merge_corpora(base, [drop], tmp_path / "out", rows_per_group=2)
    table = Corpus(tmp_path / "out").label_texts()
    assert table is not None
    texts = dict(zip(table["label"].to_pylist(), table["text"].to_pylist(), strict=True))
    assert texts == {"x": "Ex", "y": "Why", "z": "Zed"}


def test_merged_policies_are_the_most_permissive(tmp_path: Path, base: Path) -> None:
    keep = Policies(on_unlabeled="keep")
    drop = make_corpus(tmp_path, "d1", [("u", "no label", "")], [("v", "t", "x")], policies=keep)
    manifest = merge_corpora(base, [drop], tmp_path / "out", rows_per_group=2)
    assert manifest.policies == Policies(on_empty="error", on_unlabeled="keep")
    assert manifest.splits["train"].kept_unlabeled == 1


def test_store_names_by_fingerprint_and_reuses_identical(tmp_path: Path, base: Path) -> None:
    drop = make_corpus(tmp_path, "d1", [("n1", "new", "x")], [("n2", "new", "y")])
    root = tmp_path / "store"
    assert current_corpus(root) is None
    path = merge_into_store(root, base, [drop], rows_per_group=2)
    assert path.name == Corpus(path).fingerprint[:16] and path.parent == root
    set_current_corpus(root, path)
    assert current_corpus(root) == path
    again = merge_into_store(root, current_corpus(root), [drop], rows_per_group=2)
    assert again == path
    assert sorted(p.name for p in root.iterdir()) == sorted([path.name, "current.json"])


def test_current_pointer_is_checked(tmp_path: Path, base: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    with pytest.raises(InputError, match="not a corpus folder of the store"):
        set_current_corpus(root, base)
    (root / "current.json").write_text('{"corpus": "../base"}')
    with pytest.raises(InputError, match="not a folder name"):
        current_corpus(root)
    (root / "current.json").write_text('{"corpus": "gone"}')
    with pytest.raises(InputError, match="missing"):
        current_corpus(root)


def test_a_grouped_base_keeps_its_groups_and_new_documents_get_their_own(tmp_path: Path) -> None:
    train = [("b1\tsrc-1", "base 1", "x"), ("b2\tsrc-1", "base 2", "y")]
    grouped = make_corpus(tmp_path, "grouped", train, [("t1\tsrc-2", "test 1", "x")])
    drop = make_corpus(tmp_path, "d1", [("n1", "new 1", "z")], [("n2", "new test", "x")])
    merge_corpora(grouped, [drop], tmp_path / "out", rows_per_group=2)
    out = Corpus(tmp_path / "out")
    assert out.grouped and not Corpus(drop).grouped
    assert out.read_split("train").column("group").to_pylist() == ["src-1", "src-1", "n1"]
    assert out.read_split("test").column("group").to_pylist() == ["src-2", "n2"]


def test_a_corpus_grouped_in_one_file_only_is_refused(tmp_path: Path) -> None:
    grouped = make_corpus(tmp_path, "g", [("b1\tsrc-1", "base 1", "x")], [("t1", "test", "x")])
    test = pq.read_table(grouped / "test.parquet")
    pq.write_table(test.drop_columns(["group"]), grouped / "test.parquet")
    with pytest.raises(InputError, match=r"lacks a 'group' column, which .*train.parquet has"):
        Corpus(grouped)
