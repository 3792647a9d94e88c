"""The ``lines`` importer and the ``ingest`` entry point: round trip and every bad input."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from pydantic import ValidationError

from xmc_core.corpus.importers import FORMATS, IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError

TEST_OK = {"test_texts.txt": "t one\nt two\n", "test_labels.txt": "a\nb,c\n"}


def make_src(tmp_path: Path, files: dict[str, str | bytes], with_test: bool = True) -> Path:
    """A source folder holding ``files`` (plus a valid test split unless overridden)."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, content in ({**TEST_OK, **files} if with_test else files).items():
        data = content.encode() if isinstance(content, str) else content
        (src / name).write_bytes(data)
    return src


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime of every file in ``folder``."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def check_error(excinfo: pytest.ExceptionInfo, name: str, row: int | None) -> str:
    """Assert an InputError naming file ``name`` and ``row``; return its message."""
    err = excinfo.value
    assert type(err) is InputError
    msg = str(err)
    assert Path(err.path).name == name and name in msg
    if row is not None:
        assert err.row == row and f"row {row}" in msg
    assert "fix:" in msg
    return msg


def ingest_lines(src: Path, tmp_path: Path, **opts: object) -> Path:
    dest = tmp_path / "ds"
    ingest("lines", src, dest, IngestOptions(**opts))
    return dest


def assert_nothing_left(tmp_path: Path) -> None:
    """No dataset folder and no temporary folder beside it."""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_round_trip_with_generated_ids_and_line_endings(tmp_path: Path) -> None:
    src = make_src(
        tmp_path,
        {
            "train_texts.txt": b"\xef\xbb\xbfhello world\r\ninner\rcr \x0c kept\nlast no newline",
            "train_labels.txt": "a,b\r\n b , a ,b\nc",
        },
    )
    manifest = ingest("lines", src, tmp_path / "ds")
    table = Corpus(tmp_path / "ds").read_split("train").to_pylist()
    assert [r["doc_id"] for r in table] == ["train-00000001", "train-00000002", "train-00000003"]
    assert [r["text"] for r in table] == ["hello world", "inner\rcr \x0c kept", "last no newline"]
    assert [r["labels"] for r in table] == [["a", "b"], ["b", "a"], ["c"]]
    assert manifest.kind == "text" and manifest.splits["train"].rows == 3
    assert manifest.splits["train"].duplicate_labels_removed == 1
    assert manifest.splits["train"].files == ["train_texts.txt", "train_labels.txt"]
    assert manifest.source["format"] == "lines"


def test_ids_file_and_label_texts(tmp_path: Path) -> None:
    src = make_src(
        tmp_path,
        {
            "train_texts.txt": "x\ny\n",
            "train_labels.txt": "a\nb\n",
            "train_ids.txt": "pkg-x\npkg-y\n",
            "label_map.txt": "0\ta\t1\tthe A label\n1\tb\t1\n2\tc\t0\tC\twith tab\n",
        },
    )
    manifest = ingest("lines", src, tmp_path / "ds")
    corpus = Corpus(tmp_path / "ds")
    assert corpus.read_split("train").column("doc_id").to_pylist() == ["pkg-x", "pkg-y"]
    assert not corpus.grouped and "group" not in corpus.schema.names
    texts = dict(zip(*corpus.label_texts().to_pydict().values(), strict=True))
    assert texts == {"a": "the A label", "b": None, "c": "C\twith tab"}
    assert manifest.has_label_texts
    # the content fingerprint covers the label texts (the value of the code that hashed the
    # rows read back from labels.parquet; they are now hashed as they are written)
    assert manifest.fingerprint == (
        "28c508250a386533a8c61923eec1558b148a566fafe16c348173d81fc4b7174c"
    )


def test_a_second_ids_column_groups_the_corpus(tmp_path: Path) -> None:
    files = {"train_texts.txt": "x\ny\nz\n", "train_labels.txt": "a\nb\na\n",
             "test_texts.txt": "w\n", "test_labels.txt": "a\n"}  # fmt: skip
    grouped_ids = "pkg-x\tsrc-1\tmore\npkg-y\npkg-z\tsrc-1\n"
    src = make_src(tmp_path, {**files, "train_ids.txt": grouped_ids})
    (tmp_path / "p").mkdir()
    plain = make_src(tmp_path / "p", {**files, "train_ids.txt": "pkg-x\npkg-y\npkg-z\n"})
    manifest = ingest("lines", src, tmp_path / "ds")
    corpus = Corpus(tmp_path / "ds")
    train = corpus.read_split("train")
    assert corpus.grouped and train.column("doc_id").to_pylist() == ["pkg-x", "pkg-y", "pkg-z"]
    # a line without a group is a group of its own (its doc id); the test split has no ids
    assert train.column("group").to_pylist() == ["src-1", "pkg-y", "src-1"]
    assert corpus.read_split("test").column("group").to_pylist() == ["test-00000001"]
    # the groups are part of the content: the same rows without them fingerprint differently
    assert manifest.fingerprint != ingest("lines", plain, tmp_path / "plain-ds").fingerprint


def test_label_map_without_texts_gives_none(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "x\n", "train_labels.txt": "a\n"})
    (src / "label_map.txt").write_text("0\ta\t1\n")
    manifest = ingest("lines", src, tmp_path / "ds")
    assert not manifest.has_label_texts and Corpus(tmp_path / "ds").label_texts() is None


def test_label_sep_option(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "x\n", "train_labels.txt": "a,1|b\n"})
    ingest_lines(src, tmp_path, label_sep="|")
    labels = Corpus(tmp_path / "ds").read_split("train").column("labels").to_pylist()
    assert labels == [["a,1", "b"]]
    (src / "train_labels.txt").write_text("a;b\n")  # ';'-joined under the default ','
    ingest_lines(src, tmp_path / "semicolon")
    assert (
        f"{src / 'train_labels.txt'}: ';' but no ',' (the label separator) in 1 of 1 label value"
        in caplog.text
    )


def test_inputs_unchanged(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "x\ny\n", "train_labels.txt": "a\nb\n"})
    before = snapshot(src)
    ingest_lines(src, tmp_path)
    assert snapshot(src) == before


@pytest.mark.parametrize(
    ("texts", "labels", "longer", "counts"),
    [
        ("a\nb\nc\n", "x\ny\n", "train_texts.txt", ("3 lines", "2 lines")),
        ("a\n", "x\ny\nz\nw", "train_labels.txt", ("1 lines", "4 lines")),
        ("a\nb\n", "x\ny\n\n", "train_labels.txt", ("2 lines", "3 lines")),
    ],
)
def test_mismatched_line_counts(
    tmp_path: Path, texts: str, labels: str, longer: str, counts: tuple[str, str]
) -> None:
    src = make_src(tmp_path, {"train_texts.txt": texts, "train_labels.txt": labels})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    msg = check_error(info, longer, None)
    assert "train_texts.txt" in msg and "train_labels.txt" in msg
    assert all(c in msg for c in counts)
    assert_nothing_left(tmp_path)


def test_mismatched_ids_file(tmp_path: Path) -> None:
    src = make_src(
        tmp_path,
        {"train_texts.txt": "a\nb\n", "train_labels.txt": "x\ny\n", "train_ids.txt": "1\n"},
    )
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    msg = check_error(info, "train_texts.txt", 2)
    assert "train_ids.txt has 1 lines" in msg and "train_texts.txt has 2 lines" in msg


@pytest.mark.parametrize("bad_text", ["", "   ", "\t"])
def test_empty_text_error_and_drop(tmp_path: Path, bad_text: str) -> None:
    files = {"train_texts.txt": f"a\n{bad_text}\nc\n", "train_labels.txt": "x\ny\nz\n"}
    src = make_src(tmp_path, files)
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    check_error(info, "train_texts.txt", 2)
    assert_nothing_left(tmp_path)
    dest = ingest_lines(src, tmp_path, policies=Policies(on_empty="drop"))
    stats = Corpus(dest).manifest.splits["train"]
    assert (stats.rows, stats.dropped_empty) == (2, 1)


def test_unlabeled_error_drop_keep(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\nb\nc\n", "train_labels.txt": "x\n \nz\n"})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    assert "no label" in check_error(info, "train_labels.txt", 2)
    dest = ingest_lines(src, tmp_path, policies=Policies(on_unlabeled="drop"))
    assert Corpus(dest).manifest.splits["train"].dropped_unlabeled == 1
    dest = ingest_lines(src, tmp_path, policies=Policies(on_unlabeled="keep"), overwrite=True)
    corpus = Corpus(dest)
    assert corpus.manifest.splits["train"].kept_unlabeled == 1
    assert corpus.read_split("train").column("labels").to_pylist() == [["x"], [], ["z"]]


def test_empty_label_name(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\nb\n", "train_labels.txt": "x\nx,,y\n"})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    check_error(info, "train_labels.txt", 2)


def test_duplicate_doc_ids(tmp_path: Path) -> None:
    files = {"train_texts.txt": "a\nb\nc\n", "train_labels.txt": "x\ny\nz\n"}
    src = make_src(tmp_path, {**files, "train_ids.txt": "d1\nd2\nd1\textra\n"})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    msg = check_error(info, "train_ids.txt", 3)
    assert "duplicate doc id 'd1'" in msg and "row 1" in msg
    (src / "train_labels.txt").write_text("x\ny\n\n")  # kept unlabeled: still the ids' fault
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path, policies=Policies(on_unlabeled="keep"))
    check_error(info, "train_ids.txt", 3)


@pytest.mark.parametrize("target", ["train_texts.txt", "train_labels.txt", "train_ids.txt"])
def test_non_utf8_bytes(tmp_path: Path, target: str) -> None:
    files: dict[str, str | bytes] = {
        "train_texts.txt": "a\nb\n",
        "train_labels.txt": "x\ny\n",
        "train_ids.txt": "1\n2\n",
    }
    files[target] = b"ok\ncaf\xe9 au lait\n"
    src = make_src(tmp_path, files)
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    msg = check_error(info, target, 2)
    assert "byte offset 3" in msg and r"b'\xe9'" in msg and "iconv" in msg
    assert_nothing_left(tmp_path)


def test_non_utf8_offset_counts_bom(tmp_path: Path) -> None:
    src = make_src(
        tmp_path, {"train_texts.txt": b"\xef\xbb\xbfab\xff\n", "train_labels.txt": "x\n"}
    )
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    assert "byte offset 5" in check_error(info, "train_texts.txt", 1)


def test_bad_label_map(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\n", "train_labels.txt": "x\n"})
    (src / "label_map.txt").write_text("0\tx\t1\n1\n")
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    check_error(info, "label_map.txt", 2)
    (src / "label_map.txt").write_text("0\tx\t1\n1\tx\t1\n")
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    assert "twice" in check_error(info, "label_map.txt", 2)


def test_missing_file(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\n"})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    assert "train_texts.txt" in check_error(info, "train_labels.txt", None)


def test_split_emptied_by_policy(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\n", "train_labels.txt": "\n"})
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path, policies=Policies(on_unlabeled="drop"))
    assert "no documents" in check_error(info, "train_texts.txt", None)
    assert_nothing_left(tmp_path)


def test_dest_exists_without_overwrite(tmp_path: Path) -> None:
    src = make_src(tmp_path, {"train_texts.txt": "a\n", "train_labels.txt": "x\n"})
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "keep.txt").write_text("mine")
    with pytest.raises(InputError) as info:
        ingest_lines(src, tmp_path)
    assert "already exists" in check_error(info, "ds", None)
    assert [p.name for p in (tmp_path / "ds").iterdir()] == ["keep.txt"]
    ingest_lines(src, tmp_path, overwrite=True)
    assert not (tmp_path / "ds" / "keep.txt").exists()
    assert (tmp_path / "ds" / "manifest.json").is_file()


def test_unknown_format_and_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        ingest("tsv", tmp_path, tmp_path / "ds")
    assert all(fmt in str(info.value) for fmt in FORMATS)
    with pytest.raises(InputError) as info:
        ingest("lines", tmp_path / "nope", tmp_path / "ds")
    check_error(info, "nope", None)
    src = make_src(tmp_path, {"train_texts.txt": "a\n", "train_labels.txt": "x\n"})
    for dest in (src, tmp_path):
        with pytest.raises(InputError):
            ingest("lines", src, dest, IngestOptions(overwrite=True))
    assert (src / "train_texts.txt").is_file()


def test_options_are_strict() -> None:
    with pytest.raises(ValidationError):
        IngestOptions(text_col="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        IngestOptions(rows_per_group=0)
    options = IngestOptions()
    with pytest.raises(ValidationError):
        options.overwrite = True  # type: ignore[misc]


def test_streaming_memory_is_bounded(tmp_path: Path) -> None:
    n, width = 4000, 2500
    text = "w" * width
    src = make_src(tmp_path, {"train_texts.txt": f"{text}\n" * n, "train_labels.txt": "a,b\n" * n})
    ingest_lines(src, tmp_path, rows_per_group=200)  # warm up lazy imports and caches
    tracemalloc.start()
    try:
        ingest_lines(src, tmp_path, rows_per_group=100, overwrite=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * width / 4  # the 10 MB of text never sits in Python memory at once
