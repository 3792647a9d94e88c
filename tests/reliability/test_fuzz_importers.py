"""Every importer, fed valid and broken corpora (issue 6, "Reliability").

Hypothesis draws a valid corpus in each format and breaks it: odd values (empty label fields,
labels with commas, spaces, quotes or non-ASCII, 1 MB texts, wrong JSON types, Parquet columns
of the wrong type, missing, repeated or extra; out-of-range or non-finite bag-of-words pairs,
bad headers) and odd bytes (truncation, invalid UTF-8, Latin-1 / UTF-16 / Shift-JIS bytes,
flipped bytes, deleted or emptied files). The model (:mod:`tests.reliability.fuzz_model`) says
what the documented policies make of the values; :func:`check_ingest` checks the property for
every input. Runs are derandomized, so CI sees the same inputs every time.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

if TYPE_CHECKING:
    from tests.reliability.conftest import FuzzStats

from tests.reliability.fuzz_bytes import ByteCorruption, byte_corruptions, is_invalid_splice
from tests.reliability.fuzz_corpora import (
    BIG_TEXT,
    TextCorpus,
    encode_text,
    parquet_bytes,
    text_corpora,
)
from tests.reliability.fuzz_model import Accepts, Fails, expect
from tests.reliability.fuzz_property import check_ingest, fuzz
from tests.reliability.fuzz_xc import XcCorpus, encode_xc, xc_corpora
from xmc_core.corpus.importers import IngestOptions
from xmc_core.corpus.schema import Manifest, Policies
from xmc_core.errors import InputError

pytestmark = pytest.mark.reliability

TEXT_FORMATS = ["lines", "jsonl", "csv", "parquet"]


def options_of(corpus: TextCorpus, rows_per_group: int = 65536) -> IngestOptions:
    return IngestOptions(
        policies=corpus.policies, label_sep=corpus.sep, rows_per_group=rows_per_group
    )


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@fuzz(20)
@given(data=st.data())
def test_valid_corpora_round_trip(fuzz_stats: FuzzStats, fmt: str, data: st.DataObject) -> None:
    corpus = data.draw(text_corpora(fmt, mutate=False))
    want = expect(corpus)
    assert isinstance(want, Accepts), want
    check_ingest(fuzz_stats, fmt, encode_text(corpus), options_of(corpus, 2), want)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@fuzz(50)
@given(data=st.data())
def test_broken_values_follow_the_policies(
    fuzz_stats: FuzzStats, fmt: str, data: st.DataObject
) -> None:
    corpus = data.draw(text_corpora(fmt))
    rows_per_group = data.draw(st.sampled_from([1, 3, 65536]))
    check_ingest(
        fuzz_stats, fmt, encode_text(corpus), options_of(corpus, rows_per_group), expect(corpus)
    )


@fuzz(70)
@given(corpus=xc_corpora())
def test_xc_broken_rows_and_headers(fuzz_stats: FuzzStats, corpus: XcCorpus) -> None:
    options = IngestOptions(policies=corpus.policies)
    check_ingest(fuzz_stats, "xc", encode_xc(corpus), options, expect(corpus))


@pytest.mark.parametrize("fmt", [*TEXT_FORMATS, "xc"])
@fuzz(40)
@given(data=st.data(), corruption=byte_corruptions)
def test_broken_bytes_give_clear_errors(
    fuzz_stats: FuzzStats, fmt: str, data: st.DataObject, corruption: ByteCorruption
) -> None:
    if fmt == "xc":
        corpus = data.draw(xc_corpora(mutate=False))
        files, options = encode_xc(corpus), IngestOptions(policies=corpus.policies)
    else:
        corpus = data.draw(text_corpora(fmt, mutate=False))
        files, options = encode_text(corpus), options_of(corpus)
    original = dict(files)
    name = corruption.apply(files)
    want = None
    if is_invalid_splice(corruption) and not name.endswith(".parquet"):
        want = Fails(name, corruption.splice_line(original, name))
    check_ingest(fuzz_stats, fmt, files, options, want, inputs=set(original))


# ----------------------------------------------------------------------------- sizes


def _lines_files(labels_per_doc: list[list[str]], text: str = "doc") -> dict[str, bytes]:
    files = {}
    for split, docs in (("train", labels_per_doc), ("test", labels_per_doc[:1])):
        files[f"{split}_texts.txt"] = "".join(f"{text} {i}\n" for i in range(len(docs))).encode()
        files[f"{split}_labels.txt"] = "".join(",".join(ls) + "\n" for ls in docs).encode()
    return files


def _tabular_files(fmt: str, labels_per_doc: list[list[str]], text: str = "doc") -> dict:
    files = {}
    for split, docs in (("train", labels_per_doc), ("test", labels_per_doc[:1])):
        rows = [
            {"doc_id": f"d{i}", "text": f"{text} {i}", "labels": ls} for i, ls in enumerate(docs)
        ]
        if fmt == "jsonl":
            files[f"{split}.jsonl"] = "".join(json.dumps(r) + "\n" for r in rows).encode()
        elif fmt == "csv":
            buf = io.StringIO()
            writer = csv.writer(buf)
            writer.writerow(["doc_id", "text", "labels"])
            writer.writerows([r["doc_id"], r["text"], ",".join(r["labels"])] for r in rows)
            files[f"{split}.csv"] = buf.getvalue().encode()
        else:
            files[f"{split}.parquet"] = parquet_bytes(pa.Table.from_pylist(rows))
    return files


def accepted(result: Manifest | InputError) -> Manifest:
    """``result`` if the ingest succeeded."""
    assert isinstance(result, Manifest), result
    return result


def _files(fmt: str, labels_per_doc: list[list[str]], text: str = "doc") -> dict[str, bytes]:
    if fmt == "lines":
        return _lines_files(labels_per_doc, text)
    return _tabular_files(fmt, labels_per_doc, text)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_huge_label_space(fuzz_stats: FuzzStats, fmt: str) -> None:
    labels = [[f"label é{d * 10_000 + k}" for k in range(10_000)] for d in range(10)]
    manifest = accepted(check_ingest(fuzz_stats, fmt, _files(fmt, labels), IngestOptions()))
    assert manifest.n_labels == 100_000 and manifest.splits["train"].label_assignments == 100_000


def test_xc_huge_label_space(fuzz_stats: FuzzStats) -> None:
    n = 100_000
    rows = [",".join(str(k) for k in range(d, n, 4)) + " 0:1" for d in range(4)]
    train = f"4 1 {n}\n" + "".join(r + "\n" for r in rows)
    test = f"1 1 {n}\n{rows[0]}\n"
    files = {"train.txt": train.encode(), "test.txt": test.encode()}
    manifest = accepted(check_ingest(fuzz_stats, "xc", files, IngestOptions()))
    assert manifest.n_labels == n


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_one_megabyte_documents(fuzz_stats: FuzzStats, fmt: str) -> None:
    files = _files(fmt, [["a"], ["b"]], BIG_TEXT)
    manifest = accepted(check_ingest(fuzz_stats, fmt, files, IngestOptions()))
    assert manifest.splits["train"].rows == 2


def test_xc_one_megabyte_row(fuzz_stats: FuzzStats) -> None:
    row = "0 " + " ".join(f"{i}:0.25" for i in range(120_000))
    files = {"train.txt": f"1 120000 1\n{row}\n".encode(), "test.txt": b"1 120000 1\n0 7:1\n"}
    assert len(row) > 1_000_000
    accepted(check_ingest(fuzz_stats, "xc", files, IngestOptions()))


# ----------------------------------------------------------------------------- found by fuzzing


def test_xc_feature_ids_beyond_int32_are_refused(fuzz_stats: FuzzStats) -> None:
    """Feature ids are stored as int32: D above 2**31 used to wrap ids to negative numbers."""
    header = f"1 {2**31 + 5} 2\n"
    files = {
        "train.txt": f"{header}0 {2**31}:1\n".encode(),
        "test.txt": f"{header}1 3:1\n".encode(),
    }
    err = check_ingest(fuzz_stats, "xc", files, IngestOptions(), Fails("train.txt", 1))
    assert "2147483648" in str(err)


def test_xc_largest_int32_feature_id(fuzz_stats: FuzzStats) -> None:
    header = f"1 {2**31} 1\n"
    files = {
        "train.txt": f"{header}0 {2**31 - 1}:1\n".encode(),
        "test.txt": f"{header}0 0:2\n".encode(),
    }
    accepted(check_ingest(fuzz_stats, "xc", files, IngestOptions()))


GOOD_JSONL = b'{"doc_id": "t", "text": "x", "labels": ["a"]}\n'


@pytest.mark.parametrize(
    "line",
    [
        rb'{"doc_id": "d", "text": "lone \ud800 surrogate", "labels": ["a"]}',
        rb'{"doc_id": "d", "text": "x", "labels": ["a", "\udfff"]}',
        rb'{"doc_id": "\udc80", "text": "x", "labels": ["a"]}',
        b'{"doc_id": "d", "text": "x", "labels": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"doc_id": ' + b"7" * 5000 + b', "text": "x", "labels": ["a"]}',
    ],
    ids=["surrogate-text", "surrogate-label", "surrogate-id", "deep-nesting", "5000-digit-int"],
)
def test_jsonl_values_python_cannot_hold(fuzz_stats: FuzzStats, line: bytes) -> None:
    files = {"train.jsonl": GOOD_JSONL + line + b"\n", "test.jsonl": GOOD_JSONL}
    check_ingest(fuzz_stats, "jsonl", files, IngestOptions(), Fails("train.jsonl", 2))


@pytest.mark.parametrize(
    "label_texts", [b'{"label": "a", "text": "\\ud83d"}\n', b'{"label": "\\ud800", "text": null}\n']
)
def test_label_texts_with_surrogates(fuzz_stats: FuzzStats, label_texts: bytes) -> None:
    files = {"train.jsonl": GOOD_JSONL, "test.jsonl": GOOD_JSONL, "labels.jsonl": label_texts}
    check_ingest(fuzz_stats, "jsonl", files, IngestOptions(), Fails("labels.jsonl", 1))


def test_csv_truncated_inside_quotes(fuzz_stats: FuzzStats) -> None:
    """A file cut inside a quoted last field used to be read as if the quote were closed."""
    good = b"doc_id,text,labels\nt,x,a\n"
    files = {"train.csv": b'doc_id,text,labels\nd1,x,a\nd2,y,"a,b\n', "test.csv": good}
    err = check_ingest(fuzz_stats, "csv", files, IngestOptions(), Fails("train.csv", 3))
    assert "quote is never closed" in str(err)


def _parquet(**columns: pa.Array) -> bytes:
    return parquet_bytes(pa.Table.from_arrays(list(columns.values()), names=list(columns)))


GOOD_PARQUET = _parquet(doc_id=pa.array(["t"]), text=pa.array(["x"]), labels=pa.array([["a"]]))


def test_parquet_repeated_column(fuzz_stats: FuzzStats) -> None:
    cols = [pa.array(["d"]), pa.array(["x"]), pa.array(["y"]), pa.array([["a"]])]
    table = pa.Table.from_arrays(cols, names=["doc_id", "text", "text", "labels"])
    files = {"train.parquet": parquet_bytes(table), "test.parquet": GOOD_PARQUET}
    check_ingest(fuzz_stats, "parquet", files, IngestOptions(), Fails("train.parquet", None))


def test_parquet_invalid_utf8_names_the_row(fuzz_stats: FuzzStats) -> None:
    text = pa.array([b"fine", b"caf\xe9"], pa.binary()).view(pa.string())
    data = _parquet(doc_id=pa.array(["a", "b"]), text=text, labels=pa.array([["x"], ["y"]]))
    files = {"train.parquet": data, "test.parquet": GOOD_PARQUET}
    check_ingest(fuzz_stats, "parquet", files, IngestOptions(), Fails("train.parquet", 2))


def _parts(*tables: bytes) -> dict[str, bytes]:
    files = {f"train.parquet/part-{i}.parquet": t for i, t in enumerate(tables)}
    return {**files, "test.parquet": GOOD_PARQUET}


def test_parquet_parts_invalid_utf8_counts_rows_over_the_split(fuzz_stats: FuzzStats) -> None:
    first = _parquet(
        doc_id=pa.array(["a", "b"]), text=pa.array(["x", "y"]), labels=pa.array([["l"], ["l"]])
    )
    text = pa.array([b"ok", b"\xff"], pa.binary()).view(pa.string())
    second = _parquet(doc_id=pa.array(["c", "d"]), text=text, labels=pa.array([["l"], ["l"]]))
    files = _parts(first, second)
    check_ingest(fuzz_stats, "parquet", files, IngestOptions(), Fails("train.parquet", 4))


def test_parquet_parts_damaged_part_is_named(fuzz_stats: FuzzStats) -> None:
    first = _parquet(doc_id=pa.array(["a"]), text=pa.array(["x"]), labels=pa.array([["l"]]))
    files = _parts(first, first[: len(first) // 2])
    want = Fails("part-1.parquet", None)
    check_ingest(fuzz_stats, "parquet", files, IngestOptions(), want, inputs=set(files))


def test_parquet_corrupt_data_pages(fuzz_stats: FuzzStats) -> None:
    """Flipped bytes inside column chunks (the footer intact) fail while reading rows."""
    n = 200
    rng = np.random.default_rng(0)
    data = _parquet(
        doc_id=pa.array([f"d{i}" for i in range(n)]),
        text=pa.array([f"text {i} " * 20 for i in range(n)]),
        labels=pa.array([["a", "b"]] * n),
    )
    errors = 0
    for _ in range(40):
        broken = bytearray(data)
        for pos in rng.integers(4, len(data) // 2, size=3):
            broken[pos] ^= 0x5A
        files = {"train.parquet": bytes(broken), "test.parquet": GOOD_PARQUET}
        result = check_ingest(fuzz_stats, "parquet", files, IngestOptions())
        errors += isinstance(result, InputError)
    assert errors


@pytest.mark.parametrize("policy", ["error", "keep"])
def test_empty_label_fields(fuzz_stats: FuzzStats, policy: str) -> None:
    options = IngestOptions(policies=Policies(on_unlabeled=policy))
    files = _files("lines", [["a"], []])
    want = Fails("train_labels.txt", 2) if policy == "error" else None
    check_ingest(fuzz_stats, "lines", files, options, want)


LONG = "x" * 5000
GOOD_XC = b"1 3 2\n0 1:1\n"


@pytest.mark.parametrize(
    ("fmt", "files", "want"),
    [
        (
            "lines",
            {
                "train_texts.txt": b"doc\n",
                "train_labels.txt": f"{LONG},,b\n".encode(),
                "test_texts.txt": b"doc\n",
                "test_labels.txt": b"a\n",
            },
            Fails("train_labels.txt", 1),
        ),
        (
            "jsonl",
            {
                "train.jsonl": json.dumps({"doc_id": LONG, "text": "x", "labels": ["a"]}).encode()
                + b"\n"
                + json.dumps({"doc_id": LONG, "text": "y", "labels": ["a"]}).encode()
                + b"\n",
                "test.jsonl": GOOD_JSONL,
            },
            Fails("train.jsonl", 2),
        ),
        (
            "jsonl",
            {
                "train.jsonl": json.dumps(
                    {"doc_id": " " * 5000, "text": "x", "labels": ["a"]}
                ).encode()
                + b"\n",
                "test.jsonl": GOOD_JSONL,
            },
            Fails("train.jsonl", 1),
        ),
        (
            "jsonl",
            {
                "train.jsonl": json.dumps({"text": "x", "labels": [list(range(5000))]}).encode()
                + b"\n",
                "test.jsonl": GOOD_JSONL,
            },
            Fails("train.jsonl", 1),
        ),
        (
            "jsonl",
            {
                "train.jsonl": json.dumps({f"k{i}": i for i in range(2000)}).encode() + b"\n",
                "test.jsonl": GOOD_JSONL,
            },
            Fails("train.jsonl", None),
        ),
        (
            "jsonl",
            {
                "train.jsonl": GOOD_JSONL + json.dumps({f"k{i}": i for i in range(2000)}).encode(),
                "test.jsonl": GOOD_JSONL,
            },
            Fails("train.jsonl", 2),
        ),
        (
            "csv",
            {"train.csv": (",".join(["text"] * 2000) + "\n").encode(), "test.csv": b"x\n"},
            Fails("train.csv", 1),
        ),
        (
            "xc",
            {"train.txt": b"1 3 2\n0 " + b"0" * 5000 + b"5:1\n", "test.txt": GOOD_XC},
            Fails("train.txt", 2),
        ),
        (
            "xc",
            {"train.txt": b"1 3 2\n0 1:" + b"9" * 5000 + b"\n", "test.txt": GOOD_XC},
            Fails("train.txt", 2),
        ),
        (
            "xc",
            {"train.txt": b"1 3 2\n0 1:" + b"1" * 5000 + b"x\n", "test.txt": GOOD_XC},
            Fails("train.txt", 2),
        ),
        (
            "xc",
            {"train.txt": f"1 3 2\n{LONG} 1:1\n".encode(), "test.txt": GOOD_XC},
            Fails("train.txt", 2),
        ),
        (
            "xc",
            {
                "train.txt": GOOD_XC,
                "test.txt": GOOD_XC,
                "label_map.txt": f"0\t{LONG}\t1\n1\t{LONG}\t1\n".encode(),
            },
            Fails("label_map.txt", 2),
        ),
        (
            "xc",
            {
                "train.txt": GOOD_XC,
                "test.txt": GOOD_XC,
                "label_map.txt": f"{LONG}\ta\t1\n".encode(),
            },
            Fails("label_map.txt", 1),
        ),
    ],
)
def test_errors_quote_long_values_in_part(
    fuzz_stats: FuzzStats, fmt: str, files: dict[str, bytes], want: Fails
) -> None:
    check_ingest(fuzz_stats, fmt, files, IngestOptions(), want)
