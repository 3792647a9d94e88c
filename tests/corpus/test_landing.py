"""The landing folder: scanning drops, format detection, safety checks, quarantine and archive."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xmc_core.corpus.importers import FORMATS
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError
from xmc_core.intake.landing import (
    FORMAT_FILES,
    IGNORED_NAMES,
    Drop,
    detect_format,
    ingest_drop,
    is_ignored,
    scan_drops,
)
from xmc_core.intake.quarantine import REASON_FILE, archive, quarantine

LINES_OK = {
    "train_texts.txt": "one\ntwo\n",
    "train_labels.txt": "a\na,b\n",
    "test_texts.txt": "three\n",
    "test_labels.txt": "b\n",
}
JSONL_OK = {
    "train.jsonl": '{"doc_id": "j1", "body": "one", "labels": ["a"]}\n',
    "test.jsonl": '{"doc_id": "j2", "body": "two", "labels": "a"}\n',
    "drop.yaml": "text_column: body\n",
}


def make_drop(landing: Path, name: str, files: dict[str, str | bytes], mtime: int = 0) -> Path:
    """A drop folder ``landing/name`` holding ``files``; mtime set when given."""
    folder = landing / name
    folder.mkdir(parents=True)
    for fname, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        (folder / fname).write_bytes(data)
    if mtime:
        os.utime(folder, (mtime, mtime))
    return folder


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def by_name(drops: list[Drop]) -> dict[str, Drop]:
    return {d.name: d for d in drops}


def test_every_import_format_has_detectable_files() -> None:
    assert set(FORMAT_FILES) == set(FORMATS)


@pytest.mark.parametrize("fmt", sorted(FORMAT_FILES))
def test_detect_format(tmp_path: Path, fmt: str) -> None:
    folder = make_drop(tmp_path, "d", {name: "" for name in FORMAT_FILES[fmt]})
    (folder / "label_map.txt").write_text("")
    assert detect_format(folder) == fmt


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["train.jsonl", "test.jsonl", "train.txt", "test.txt"], "several formats (xc, jsonl)"),
        (["train.csv"], "'csv' but test.csv is missing"),
        (["notes.md"], "no known split files (the folder holds: notes.md)"),
    ],
)
def test_detect_format_errors(tmp_path: Path, files: list[str], message: str) -> None:
    folder = make_drop(tmp_path, "d", dict.fromkeys(files, ""))
    with pytest.raises(InputError) as excinfo:
        detect_format(folder)
    assert message in str(excinfo.value) and "fix:" in str(excinfo.value)


def test_scan_orders_drops_ignores_in_progress_and_refuses_unsafe(tmp_path: Path) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text("{}\n")
    make_drop(landing, "b-jsonl", JSONL_OK, mtime=100)
    make_drop(landing, "a-lines", LINES_OK, mtime=200)
    for ignored in (".hidden", "_copying", "x.tmp", "y.partial"):
        make_drop(landing, ignored, LINES_OK)
    (landing / "loose.jsonl").write_text("{}\n")
    os.symlink(outside, landing / "evil")
    linked = make_drop(landing, "linked", {"test.jsonl": "{}\n"})
    os.symlink(outside / "secret.jsonl", linked / "train.jsonl")
    make_drop(landing, "bell\x07", LINES_OK)
    make_drop(landing, "n" * 200, LINES_OK)
    make_drop(landing, "fifo", {})
    os.mkfifo(landing / "fifo" / "train.txt")
    make_drop(landing, "badspec", {**LINES_OK, "drop.yaml": "colour: blue\n"})
    inner = make_drop(landing, "inner", {"train.csv": "doc_id,text,labels\n1,t,a\n"})
    os.symlink("train.csv", inner / "test.csv")  # a link that stays inside the drop is fine
    drops = scan_drops(landing)
    assert [d.name for d in drops][:2] == ["b-jsonl", "a-lines"]
    found = by_name(drops)
    assert found["b-jsonl"].ok and found["b-jsonl"].format == "jsonl"
    assert found["b-jsonl"].options.text_column == "body"
    assert found["a-lines"].ok and found["a-lines"].format == "lines"
    assert found["inner"].ok and found["inner"].format == "csv"
    assert not {".hidden", "_copying", "x.tmp", "y.partial"} & set(found)
    problems = {d.name: str(d.problem) for d in drops if not d.ok}
    assert "not a drop folder" in problems["loose.jsonl"]
    assert "sub-folder" in problems["loose.jsonl"]
    assert "symbolic link" in problems["evil"]
    assert "outside the drop" in problems["linked"]
    assert "control character" in problems["bell\x07"]
    assert "longer than" in problems["n" * 200]
    assert "not a regular file" in problems["fifo"]
    assert "unknown keys ['colour']" in problems["badspec"]
    assert scan_drops(tmp_path / "missing") == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"train_texts.txt": "one\ntwo\nthree\n"}, "train_labels.txt"),
        ({"test_texts.txt": b"caf\xe9\n"}, "UTF-8"),
    ],
)
def test_bad_drop_is_quarantined_with_its_reason(
    tmp_path: Path, files: dict[str, str | bytes], message: str
) -> None:
    landing, qdir = tmp_path / "landing", tmp_path / "quarantine"
    folder = make_drop(landing, "bad", {**LINES_OK, **files})
    before = snapshot(folder)
    (drop,) = scan_drops(landing)
    with pytest.raises(InputError) as excinfo:
        ingest_drop(drop, tmp_path / "ingested")
    assert message in str(excinfo.value)
    assert not [p for p in tmp_path.iterdir() if "ingested" in p.name]
    assert snapshot(folder) == before
    where = quarantine(drop.path, qdir, str(excinfo.value))
    assert where.parent == qdir and where.name.endswith("-bad")
    assert snapshot(where / "bad") == before and not folder.exists()
    reason = (where / REASON_FILE).read_text()
    assert str(excinfo.value) in reason and "what to do" in reason and "time:" in reason
    assert IGNORED_NAMES in " ".join(reason.split())  # how to copy the fixed drop back in


def test_the_readme_names_the_landing_names_the_scan_ignores() -> None:
    for name in (".x", "_x", "x.tmp", "x.partial"):
        assert is_ignored(name)
    assert IGNORED_NAMES == "names starting with '.' or '_' or ending in '.tmp' or '.partial'"
    docs = Path(__file__).resolve().parents[2] / "docs" / "lifecycle" / "registry.md"
    readme = docs.read_text()  # the landing folder's documentation (moved from the README)
    assert IGNORED_NAMES in " ".join(readme.split())


def test_quarantine_moves_links_and_files_without_following_or_deleting(tmp_path: Path) -> None:
    landing, qdir = tmp_path / "landing", tmp_path / "quarantine"
    make_drop(landing, "drop", {})
    target = tmp_path / "target.txt"
    target.write_text("keep me")
    os.symlink(target, landing / "link")
    (landing / "same.txt").write_text("first")
    drops = by_name(scan_drops(landing))
    moved = quarantine(drops["link"].path, qdir, str(drops["link"].problem))
    assert (moved / "link").is_symlink() and target.read_text() == "keep me"
    first = quarantine(drops["same.txt"].path, qdir, "plain file")
    (landing / "same.txt").write_text("second")
    second = quarantine(landing / "same.txt", qdir, "plain file")
    assert first != second
    assert (first / "same.txt").read_text() == "first"
    assert (second / "same.txt").read_text() == "second"


def test_archive_moves_the_drop_unchanged(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    folder = make_drop(landing, "week1", LINES_OK)
    before = snapshot(folder)
    where = archive(folder, tmp_path / "archive")
    assert snapshot(where / "week1") == before and list(landing.iterdir()) == []


def test_ingest_keeps_given_ids_and_leaves_the_drop_unchanged(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    folder = make_drop(landing, "j", JSONL_OK)
    before = snapshot(folder)
    (drop,) = scan_drops(landing)
    manifest = ingest_drop(drop, tmp_path / "ds")
    assert manifest.splits["train"].rows == 1 and snapshot(folder) == before
    corpus = Corpus(tmp_path / "ds")
    assert corpus.read_split("train")["doc_id"].to_pylist() == ["j1"]
    assert corpus.read_split("train")["text"].to_pylist() == ["one"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_positional_ids_get_a_stable_content_prefix(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    make_drop(landing, "p", LINES_OK)
    (drop,) = scan_drops(landing)
    first = ingest_drop(drop, tmp_path / "ds1")
    ingest_drop(drop, tmp_path / "ds2")
    ids = [Corpus(tmp_path / d).read_split("train")["doc_id"].to_pylist() for d in ("ds1", "ds2")]
    prefix = first.source["doc_id_prefix"]
    assert ids[0] == ids[1] == [f"{prefix}train-00000001", f"{prefix}train-00000002"]
    assert len(prefix) == 13 and first.splits["train"].files == [
        "train_texts.txt",
        "train_labels.txt",
    ]


def test_policies_override_applies_unless_the_drop_sets_its_own(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    unlabeled = {**LINES_OK, "train_labels.txt": "a\n\n"}
    make_drop(landing, "a", unlabeled, mtime=100)
    make_drop(landing, "b", {**unlabeled, "drop.yaml": "policies: {on_unlabeled: error}\n"}, 200)
    keep = Policies(on_unlabeled="keep")
    plain, strict = scan_drops(landing)
    assert ingest_drop(plain, tmp_path / "ds-a", keep).splits["train"].kept_unlabeled == 1
    with pytest.raises(InputError, match="no label"):
        ingest_drop(strict, tmp_path / "ds-b", keep)
    with pytest.raises(InputError, match="no label") as refused:
        ingest_drop(plain, tmp_path / "ds-c")
    # a drop has no command line: the fix names what its drop.yaml can say, and that works
    fix = refused.value.fix
    assert "--on-unlabeled" not in fix and "policies: {on_unlabeled: drop}" in fix, fix
    assert fix.endswith(" in the drop's drop.yaml"), fix
    (landing / "a" / "drop.yaml").write_text("policies: {on_unlabeled: drop}\n")
    (fixed,) = [d for d in scan_drops(landing) if d.name == "a"]
    assert ingest_drop(fixed, tmp_path / "ds-d").splits["train"].dropped_unlabeled == 1
