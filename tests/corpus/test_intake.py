"""Intake: landing folder -> quarantine / merged corpus / archive, rerun-safe."""

from __future__ import annotations

from pathlib import Path

from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.intake.drops import IntakeFolders, mark_trained, take_in

Doc = tuple[str, str, str]  # doc id, text, comma-separated labels


def lines_drop(landing: Path, name: str, train: list[Doc], test: list[Doc]) -> Path:
    """A ``lines`` drop with explicit ids."""
    src = landing / name
    src.mkdir(parents=True)
    for split, docs in (("train", train), ("test", test)):
        for suffix, col in (("ids", 0), ("texts", 1), ("labels", 2)):
            (src / f"{split}_{suffix}.txt").write_text("".join(d[col] + "\n" for d in docs))
    return src


def folders(tmp_path: Path) -> IntakeFolders:
    w = tmp_path / "work"
    return IntakeFolders(w / "landing", w / "quarantine", w / "archive", w / "corpora")


def doc_ids(corpus: str | None, split: str) -> list[str]:
    assert corpus is not None
    return Corpus(corpus).read_split(split, ["doc_id"]).column("doc_id").to_pylist()


A_TRAIN = [("a1", "red apple pie", "fruit"), ("a2", "green pear tart", "fruit,green")]
A_TEST = [("a3", "apple crumble", "fruit")]
B_TRAIN = [("b1", "blue sky day", "weather"), ("a2", "green pear jam", "green")]
B_TEST = [("b2", "grey rain", "weather")]


def test_good_drops_merge_bad_ones_are_quarantined_with_the_reason(tmp_path: Path) -> None:
    f = folders(tmp_path)
    lines_drop(f.landing, "a", A_TRAIN, A_TEST)
    bad = lines_drop(f.landing, "bad", A_TRAIN, A_TEST)
    (bad / "train_labels.txt").write_text("fruit\n")  # one line short
    result = take_in(f, "merge", Policies(), rows_per_group=2)
    assert result.ingested == ["a"] and result.needs_training
    assert [q["name"] for q in result.quarantined] == ["bad"]
    assert "train_labels.txt" in result.quarantined[0]["reason"]
    moved = Path(result.quarantined[0]["to"])
    assert "line counts differ" in (moved / "REASON.txt").read_text()
    assert (moved / "bad" / "train_labels.txt").read_text() == "fruit\n"  # moved, unmodified
    assert not any(f.landing.iterdir()) and len(list(f.archive.iterdir())) == 1
    assert sorted(doc_ids(result.corpus, "train")) == ["a1", "a2"]

    lines_drop(f.landing, "b", B_TRAIN, B_TEST)
    second = take_in(f, "merge", Policies(), rows_per_group=2)
    assert second.ingested == ["b"]
    assert sorted(doc_ids(second.corpus, "train")) == ["a1", "a2", "b1"]  # a2 upserted
    texts = Corpus(second.corpus).read_split("train", ["doc_id", "text"]).to_pylist()
    assert {"doc_id": "a2", "text": "green pear jam"} in texts


def test_replace_mode_trains_on_the_new_drop_alone(tmp_path: Path) -> None:
    f = folders(tmp_path)
    lines_drop(f.landing, "a", A_TRAIN, A_TEST)
    take_in(f, "merge", Policies(), rows_per_group=2)
    lines_drop(f.landing, "b", B_TRAIN, B_TEST)
    result = take_in(f, "replace", Policies(), rows_per_group=2)
    assert sorted(doc_ids(result.corpus, "train")) == ["a2", "b1"]
    assert doc_ids(result.corpus, "test") == ["b2"]


def test_rerun_after_a_crash_before_archiving_gives_the_same_corpus(tmp_path: Path) -> None:
    f = folders(tmp_path)
    drop = lines_drop(f.landing, "a", A_TRAIN, A_TEST)
    first = take_in(f, "merge", Policies(), rows_per_group=2)
    # the crash: the drop is back in the landing folder although it was merged
    lines_drop(tmp_path / "again", "a", A_TRAIN, A_TEST).rename(drop)
    second = take_in(f, "merge", Policies(), rows_per_group=2)
    assert second.corpus == first.corpus
    assert Corpus(second.corpus).fingerprint == Corpus(first.corpus).fingerprint


def test_needs_training_until_marked_trained(tmp_path: Path) -> None:
    f = folders(tmp_path)
    empty = take_in(f, "merge", Policies(), rows_per_group=2)
    assert empty.corpus is None and not empty.needs_training
    lines_drop(f.landing, "a", A_TRAIN, A_TEST)
    result = take_in(f, "merge", Policies(), rows_per_group=2)
    assert result.corpus is not None and result.needs_training
    mark_trained(f.store, Path(result.corpus), {"model_version": "1"})
    again = take_in(f, "merge", Policies(), rows_per_group=2)
    assert again.corpus == result.corpus and not again.needs_training and not again.ingested
