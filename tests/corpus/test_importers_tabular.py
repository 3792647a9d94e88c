"""The ``jsonl``, ``csv`` and ``parquet`` importers: round trips, columns, types, bad input."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.corpus.helpers import check_error
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError

TEST_ROWS = [{"doc_id": "t1", "text": "test doc", "labels": ["a"]}]


def write_split(path: Path, fmt: str, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as ``fmt`` (csv joins list labels with ',')."""
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "csv":
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(list(rows[0]))
            for r in rows:
                writer.writerow([",".join(v) if isinstance(v, list) else v for v in r.values()])
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)


def make_src(tmp_path: Path, fmt: str, train: list[dict[str, Any]], test: Any = None) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    write_split(src / f"train.{fmt}", fmt, train)
    write_split(src / f"test.{fmt}", fmt, test or TEST_ROWS)
    return src


def run(fmt: str, src: Path, tmp_path: Path, **opts: Any) -> Corpus:
    ingest(fmt, src, tmp_path / "ds", IngestOptions(**opts))
    return Corpus(tmp_path / "ds")


ROWS = [
    {"doc_id": "d1", "text": "first doc", "labels": ["a", "b"]},
    {"doc_id": "d2", "text": 'second, "quoted"\nmultiline', "labels": ["b"]},
]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_round_trip(tmp_path: Path, fmt: str) -> None:
    src = make_src(tmp_path, fmt, ROWS)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()}
    corpus = run(fmt, src, tmp_path)
    table = corpus.read_split("train").to_pylist()
    assert [(r["doc_id"], r["text"], r["labels"]) for r in table] == [
        (r["doc_id"], r["text"], r["labels"]) for r in ROWS
    ]
    assert corpus.manifest.source["format"] == fmt
    assert corpus.manifest.splits["train"].files == [f"train.{fmt}"]
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()} == before


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_custom_columns_string_labels_generated_ids(tmp_path: Path, fmt: str) -> None:
    rows = [{"body": "x", "tags": "a|b", "extra": 1}, {"body": "y", "tags": "c", "extra": 2}]
    src = make_src(tmp_path, fmt, rows, [{"body": "z", "tags": "a", "extra": 3}])
    corpus = run(fmt, src, tmp_path, text_column="body", labels_column="tags", label_sep="|")
    table = corpus.read_split("train").to_pylist()
    assert [r["doc_id"] for r in table] == ["train-00000001", "train-00000002"]
    assert [r["labels"] for r in table] == [["a", "b"], ["c"]]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_group_column_groups_the_corpus(tmp_path: Path, fmt: str) -> None:
    rows = [{"doc_id": f"d{i}", "text": "x", "labels": ["a"], "source": g}
            for i, g in enumerate(["s1", "", "s1", 7])]  # fmt: skip
    if fmt == "parquet":
        rows[3]["source"] = None  # a column of one type
    src = make_src(tmp_path, fmt, rows)
    corpus = run(fmt, src, tmp_path, group_column="source")
    # an empty or null group: a group of its own (the doc id); an integer one: its digits
    last = "d3" if fmt == "parquet" else "7"
    assert corpus.read_split("train").column("group").to_pylist() == ["s1", "d1", "s1", last]
    assert corpus.read_split("test").column("group").to_pylist() == ["t1"]  # test: no column
    assert not run(fmt, src, tmp_path / "plain").grouped  # the default column "group": absent


def test_id_column_none_and_int_ids(tmp_path: Path) -> None:
    rows = [{"doc_id": 7, "text": "x", "labels": ["a"]}, {"doc_id": 8, "text": "y", "labels": []}]
    src = make_src(tmp_path, "jsonl", rows)
    corpus = run("jsonl", src, tmp_path, policies=Policies(on_unlabeled="keep"))
    assert corpus.read_split("train").column("doc_id").to_pylist() == ["7", "8"]
    drop = Policies(on_unlabeled="drop")
    corpus = run("jsonl", src, tmp_path, id_column=None, policies=drop, overwrite=True)
    assert corpus.read_split("train").column("doc_id").to_pylist() == ["train-00000001"]


def test_parquet_folder_of_parts_and_dictionary_columns(tmp_path: Path) -> None:
    src = make_src(tmp_path, "parquet", ROWS)
    (src / "train.parquet").unlink()
    (src / "train.parquet").mkdir()
    table = pa.Table.from_pylist([{**r, "text": f"doc {i}"} for i, r in enumerate(ROWS * 3)])
    table = table.set_column(0, "doc_id", pa.array([f"d{i}" for i in range(6)]).dictionary_encode())
    pq.write_table(table.slice(0, 4), src / "train.parquet" / "part-0.parquet", row_group_size=2)
    pq.write_table(table.slice(4), src / "train.parquet" / "part-1.parquet")
    (src / "train.parquet" / "_SUCCESS").write_text("")
    corpus = run("parquet", src, tmp_path)
    assert corpus.read_split("train").column("doc_id").to_pylist() == [f"d{i}" for i in range(6)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_label_texts_files(tmp_path: Path, fmt: str) -> None:
    src = make_src(tmp_path, "jsonl", ROWS)
    texts = [{"label": "a", "text": "Label A"}, {"label": "b", "text": ""}]
    write_split(src / f"labels.{fmt}", fmt, texts)
    corpus = run("jsonl", src, tmp_path)
    got = corpus.label_texts().to_pylist()
    assert got == [{"label": "a", "text": "Label A"}, {"label": "b", "text": None}]
    write_split(src / f"labels.{'csv' if fmt == 'jsonl' else 'jsonl'}", fmt, texts)
    with pytest.raises(InputError, match=r"both labels\.jsonl and labels\.csv"):
        run("jsonl", src, tmp_path, overwrite=True)


def test_label_texts_bad_file(tmp_path: Path) -> None:
    src = make_src(tmp_path, "jsonl", ROWS)
    (src / "labels.jsonl").write_text('{"name": "a", "text": "x"}\n')
    with pytest.raises(InputError) as info:
        run("jsonl", src, tmp_path)
    assert "'label'" in check_error(info, "labels.jsonl", None)
    (src / "labels.jsonl").write_text('{"label": "a", "text": "x"}\n{"label": 3, "text": "y"}\n')
    with pytest.raises(InputError) as info:
        run("jsonl", src, tmp_path)
    check_error(info, "labels.jsonl", 2)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize(
    ("drop", "option"), [("text", "--text-column"), ("labels", "--labels-column")]
)
def test_missing_column(tmp_path: Path, fmt: str, drop: str, option: str) -> None:
    rows = [{k: v for k, v in r.items() if k != drop} for r in ROWS]
    src = make_src(tmp_path, fmt, rows)
    with pytest.raises(InputError) as info:
        run(fmt, src, tmp_path)
    msg = check_error(info, f"train.{fmt}", None)
    assert option in msg and "'doc_id'" in msg and f"no {drop} column" in msg
    assert not (tmp_path / "ds").exists()


def test_jsonl_field_missing_in_later_record(tmp_path: Path) -> None:
    src = make_src(tmp_path, "jsonl", [ROWS[0], {"doc_id": "d2", "labels": ["a"]}])
    with pytest.raises(InputError) as info:
        run("jsonl", src, tmp_path)
    assert "no text field" in check_error(info, "train.jsonl", 2)


@pytest.mark.parametrize(
    ("record", "what"),
    [
        ({"doc_id": "d", "text": "x", "labels": 5}, "labels is int"),
        ({"doc_id": "d", "text": "x", "labels": {"a": 1}}, "labels is dict"),
        ({"doc_id": "d", "text": 3.5, "labels": ["a"]}, "text is float"),
        ({"doc_id": "d", "text": ["x"], "labels": ["a"]}, "text is list"),
        ({"doc_id": 1.5, "text": "x", "labels": ["a"]}, "doc id is float"),
        ({"doc_id": True, "text": "x", "labels": ["a"]}, "doc id is bool"),
        ({"doc_id": "d", "text": "x", "labels": ["a", 2]}, "label 2 is not a string"),
    ],
)
def test_jsonl_wrong_types(tmp_path: Path, record: dict[str, Any], what: str) -> None:
    src = make_src(tmp_path, "jsonl", ROWS)
    (src / "train.jsonl").write_text(
        json.dumps(ROWS[0]) + "\n\n" + json.dumps(record) + "\n", encoding="utf-8"
    )
    with pytest.raises(InputError) as info:
        run("jsonl", src, tmp_path)
    assert what in check_error(info, "train.jsonl", 3)


@pytest.mark.parametrize(
    ("column", "values", "what"),
    [
        ("labels", [1, 2], "labels column 'labels' has type int64"),
        ("labels", [[1], [2]], "int64>; expected list<string>"),
        ("text", [1.0, 2.0], "text column 'text' has type double"),
        ("doc_id", [1.0, 2.0], "doc_id column 'doc_id' has type double"),
    ],
)
def test_parquet_wrong_types(tmp_path: Path, column: str, values: list[Any], what: str) -> None:
    rows = [{**r, column: v} for r, v in zip(ROWS, values, strict=True)]
    src = make_src(tmp_path, "parquet", rows)
    with pytest.raises(InputError) as info:
        run("parquet", src, tmp_path)
    assert what in check_error(info, "train.parquet", None)


def test_parquet_int_ids_and_null_items(tmp_path: Path) -> None:
    rows = [
        {"doc_id": 1, "text": "x", "labels": ["a"]},
        {"doc_id": 2, "text": None, "labels": None},
    ]
    src = make_src(tmp_path, "parquet", rows)
    with pytest.raises(InputError) as info:
        run("parquet", src, tmp_path)
    assert "empty" in check_error(info, "train.parquet", 2)
    corpus = run("parquet", src, tmp_path, policies=Policies(on_empty="drop"))
    assert corpus.read_split("train").column("doc_id").to_pylist() == ["1"]
    rows[1] = {"doc_id": 2, "text": "y", "labels": ["a", None]}
    src = make_src(tmp_path, "parquet", rows)
    with pytest.raises(InputError) as info:
        run("parquet", src, tmp_path, overwrite=True)
    assert "None is not a string" in check_error(info, "train.parquet", 2)


def test_not_a_parquet_file(tmp_path: Path) -> None:
    src = make_src(tmp_path, "parquet", ROWS)
    (src / "test.parquet").write_text("doc_id,text\n")
    with pytest.raises(InputError) as info:
        run("parquet", src, tmp_path)
    assert "not a readable Parquet file" in check_error(info, "test.parquet", None)


@pytest.mark.parametrize(
    ("line", "what"), [("{not json", "invalid JSON"), ("[1, 2]", "expected a JSON object")]
)
def test_jsonl_bad_line(tmp_path: Path, line: str, what: str) -> None:
    src = make_src(tmp_path, "jsonl", ROWS)
    (src / "test.jsonl").write_text(json.dumps(TEST_ROWS[0]) + "\n" + line + "\n")
    with pytest.raises(InputError) as info:
        run("jsonl", src, tmp_path)
    assert what in check_error(info, "test.jsonl", 2)


def test_csv_bad_rows(tmp_path: Path) -> None:
    src = make_src(tmp_path, "csv", ROWS)
    (src / "train.csv").write_text('doc_id,text,labels\nd1,"a\nb",x\nd2,c,x,extra\n')
    with pytest.raises(InputError) as info:
        run("csv", src, tmp_path)
    assert "4 fields but the header has 3" in check_error(info, "train.csv", 4)
    (src / "train.csv").write_text("doc_id,text,text\nd1,a,b\n")
    with pytest.raises(InputError) as info:
        run("csv", src, tmp_path)
    assert "repeated" in check_error(info, "train.csv", 1)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_non_utf8(tmp_path: Path, fmt: str) -> None:
    src = make_src(tmp_path, fmt, ROWS)
    data = (src / f"train.{fmt}").read_bytes().replace(b"first", b"f\xc3\x28rst")
    (src / f"train.{fmt}").write_bytes(data)
    with pytest.raises(InputError) as info:
        run(fmt, src, tmp_path)
    assert r"b'\xc3'" in check_error(info, f"train.{fmt}", 2 if fmt == "csv" else 1)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_empty_text_unlabeled_and_duplicate_ids(tmp_path: Path, fmt: str) -> None:
    rows = [ROWS[0], {"doc_id": "d2", "text": " ", "labels": ["a"]}]
    with pytest.raises(InputError) as info:
        run(fmt, make_src(tmp_path, fmt, rows), tmp_path)
    row = {"csv": 3}.get(fmt, 2)
    assert "empty" in check_error(info, f"train.{fmt}", row)
    rows[1] = {"doc_id": "d2", "text": "y", "labels": []}
    with pytest.raises(InputError) as info:
        run(fmt, make_src(tmp_path, fmt, rows), tmp_path)
    assert "no label" in check_error(info, f"train.{fmt}", row)
    corpus = run(
        fmt, make_src(tmp_path, fmt, rows), tmp_path, policies=Policies(on_unlabeled="drop")
    )
    assert corpus.manifest.splits["train"].dropped_unlabeled == 1
    rows[1] = {"doc_id": "d1", "text": "y", "labels": ["a"]}
    with pytest.raises(InputError) as info:
        run(fmt, make_src(tmp_path, fmt, rows), tmp_path, overwrite=True)
    assert "duplicate doc id 'd1'" in check_error(info, f"train.{fmt}", row)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_missing_split_file(tmp_path: Path, fmt: str) -> None:
    src = make_src(tmp_path, fmt, ROWS)
    (src / f"test.{fmt}").unlink()
    with pytest.raises(InputError) as info:
        run(fmt, src, tmp_path)
    assert "missing" in check_error(info, f"test.{fmt}", None)


@pytest.mark.parametrize(
    ("fmt", "content"), [("jsonl", "\n"), ("csv", ""), ("csv", "doc_id,text,labels\r\n")]
)
def test_an_empty_split_file_is_said_to_be_empty(tmp_path: Path, fmt: str, content: str) -> None:
    src = make_src(tmp_path, fmt, ROWS)
    (src / f"test.{fmt}").write_text(content)
    with pytest.raises(InputError) as info:
        run(fmt, src, tmp_path)
    msg = check_error(info, f"test.{fmt}", None)
    assert "holds no documents" in msg and "--text-column" not in msg, msg
    assert "fix: write the split's documents into it" in msg, msg


def test_labels_joined_by_another_separator_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [
        {"doc_id": "d1", "text": "first doc", "labels": "sports|tennis"},
        {"doc_id": "d2", "text": "second doc", "labels": "sports|golf"},
    ]
    src = make_src(tmp_path, "csv", rows)
    with caplog.at_level(logging.WARNING, logger="xmc_core"):
        corpus = run("csv", src, tmp_path)
    assert corpus.read_split("train")["labels"].to_pylist() == [["sports|tennis"], ["sports|golf"]]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(
        f"{src / 'train.csv'}: '|' but no ',' (the label separator) in 2 of 2 label values"
    ), warning
    assert "--label-sep '|'" in warning and "label_sep" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="xmc_core"):
        run("csv", src, tmp_path / "sep", label_sep="|")  # split as asked: nothing to say
        rows[0]["labels"], rows[1]["labels"] = "a|b,c", "d"  # ',' does separate these
        (tmp_path / "mixed").mkdir()
        run("csv", make_src(tmp_path / "mixed", "csv", rows), tmp_path / "mixed")
    assert caplog.records == []
