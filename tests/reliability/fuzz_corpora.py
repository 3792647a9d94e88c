"""``lines``, ``jsonl``, ``csv`` and ``parquet`` corpora as hypothesis strategies.

A corpus is drawn valid, then (``mutate``) broken in its values: a document's id, text or
labels (empty label fields; labels with commas, spaces, quotes or non-ASCII; 1 MB texts; wrong
JSON types; lone surrogates), the label texts file, a Parquet column's type (int text, string
labels, missing, repeated or extra columns, invalid UTF-8). What the ingest must then do follows
from the documented policies (:mod:`tests.reliability.fuzz_model`). Byte-level damage is
:mod:`tests.reliability.fuzz_bytes`; ``xc`` corpora are :mod:`tests.reliability.fuzz_xc`.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from xmc_core.corpus.schema import SPLITS, Policies


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""A JSON record without the field."""

DUP_ID: Any = type("_DupId", (), {"__repr__": lambda self: "DUP_ID"})()
"""Stands for "the id of the previous document of the split"."""

BIG_TEXT = ("Größe 1 MB: naïve café, 日本語 text. " * 26_000)[:1_000_000]
BIG_LABEL = "l" * 100_000 + "é"

_NO_BREAK = st.characters(exclude_categories=("Cs",), exclude_characters="\n\r")
TEXT = st.text(_NO_BREAK, min_size=1, max_size=20).filter(lambda t: not t.isspace())
LABEL = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), exclude_characters=",|"),
    min_size=1,
    max_size=8,
).filter(lambda t: t == t.strip())

# Label strings the importers must split, strip or reject as documented.
ODD_LABELS = [
    "a,b", "a|b", " padded ", "two words", "é", "日本語", "ﬁ", "🙂", '"quoted"', "it's", "a;b",
    "", " ", "\t", ",", "a,", ",a", "\u00a0nbsp\u00a0", "\u3000", BIG_LABEL, "a\x00b",
]  # fmt: skip
_BREAKS = ["line\nbreak", "cr\rhere", "\r\n"]
SURROGATES = [
    ("text", "lone \ud800 high"), ("text", "\udfff"), ("labels", ["ok", "\ud83d"]),
    ("labels", "a,\udc00"), ("doc_id", "\udc00"), ("doc_id", "x\ud800y"),
]  # fmt: skip

# Values a mutation may put in a document, by format and field (lines/csv hold only strings).
_TEXTS = ["", " ", "\t", "\u3000 \u2028", BIG_TEXT, "nul\x00byte", 'q"uo"te, comma', "\x1c"]
_IDS = ["", " ", DUP_ID, "  padded  ", "tab\tinside", "日本", BIG_LABEL]
_LABEL_LISTS: list[Any] = [[], [""], ["a", ""], ["a", "a", " a"], "a,b", "", " , "]
VALUES: dict[str, dict[str, list[Any]]] = {
    "lines": {"text": _TEXTS, "doc_id": _IDS, "labels": _LABEL_LISTS},
    "csv": {
        "text": [*_TEXTS, *_BREAKS],
        "doc_id": [*_IDS, "line\nbreak"],
        "labels": [*_LABEL_LISTS, "x\ny"],
    },
    "jsonl": {
        "text": [*_TEXTS, *_BREAKS, None, 5, 3.5, ["x"], {"a": 1}, True, "\ud800x", MISSING],
        "doc_id": [*_IDS, 7, -3, 10**30, 1.5, True, None, [1], "\udc00", MISSING],
        "labels": [
            *_LABEL_LISTS,
            None,
            5,
            {"a": 1},
            [1],
            [None],
            [["a"]],
            ["ok", "\ud83d"],
            MISSING,
            [float("nan")],
        ],
    },
    "parquet": {
        "text": [*_TEXTS, *_BREAKS, None],
        "doc_id": [*_IDS, None],
        "labels": [[], [""], ["a", ""], ["a", "a", " a"], None, [None], ["a", None]],
    },
}

# Parquet column types: (role -> kinds). See parquet_column for what each kind stores.
PARQUET_KINDS = {
    "doc_id": [
        "string", "large_string", "dictionary", "int64", "int32", "float64", "bool", "null",
        "binary", "missing", "duplicate", "invalid_utf8",
    ],
    "text": [
        "string", "large_string", "dictionary", "null", "int64", "float64", "binary", "bool",
        "list<string>", "struct", "missing", "duplicate", "invalid_utf8",
    ],
    "labels": [
        "list<string>", "large_list<string>", "list<large_string>", "string", "dictionary",
        "null", "int64", "list<int64>", "list<list<string>>", "list<binary>", "missing",
        "duplicate", "invalid_utf8",
    ],
}  # fmt: skip
DEFAULT_KIND = {"doc_id": "string", "text": "string", "labels": "list<string>"}


@dataclass
class Doc:
    """One document as the user wrote it: any of the fields may hold a broken value."""

    doc_id: Any
    text: Any
    labels: Any  # list of names, one string, None, or what a mutation put there


@dataclass
class TextCorpus:
    """A ``lines``/``jsonl``/``csv``/``parquet`` corpus and how it is encoded."""

    fmt: str
    splits: dict[str, list[Doc]]
    has_ids: bool
    sep: str
    policies: Policies
    crlf: bool = False
    bom: bool = False
    ascii_json: bool = True
    columns: dict[str, str] = field(default_factory=dict)  # parquet role -> kind
    column_split: str = "train"  # the split whose Parquet file gets ``columns``
    invalid_row: int = 0  # 0-based row of an ``invalid_utf8`` column
    extra_column: bool = False
    label_texts: list[tuple[Any, Any]] | None = None  # (label, text): label_map or labels.*
    label_texts_fmt: str = "jsonl"  # lines: label_map.txt; others: labels.jsonl or labels.csv


# ----------------------------------------------------------------------------- text corpora


@st.composite
def text_corpora(draw: st.DrawFn, fmt: str, mutate: bool = True) -> TextCorpus:
    """A valid ``fmt`` corpus, then (with ``mutate``) up to 3 broken values."""
    pool = draw(st.lists(LABEL, min_size=1, max_size=6, unique=True))
    splits = {}
    for split, most in (("train", 6), ("test", 4)):
        n = draw(st.integers(1, most))
        splits[split] = [
            Doc(
                f"{split[:2]}{i}{draw(st.sampled_from(['', '-é', ' x', '日']))}",
                draw(TEXT),
                draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3)),
            )
            for i in range(n)
        ]
    corpus = TextCorpus(
        fmt,
        splits,
        has_ids=draw(st.booleans()),
        sep=draw(st.sampled_from([",", "|"])),
        policies=Policies(
            on_empty=draw(st.sampled_from(["error", "drop"])),
            on_unlabeled=draw(st.sampled_from(["error", "drop", "keep"])),
        ),
        crlf=draw(st.booleans()),
        bom=draw(st.booleans()),
        ascii_json=draw(st.booleans()),
    )
    if draw(st.integers(0, 3)) == 0:
        with_text = st.sampled_from([None, "about it", " padded text ", "", "tab\tinside"])
        corpus.label_texts = [(lab, draw(with_text)) for lab in pool]
        corpus.label_texts_fmt = (
            "txt" if fmt == "lines" else draw(st.sampled_from(["jsonl", "csv"]))
        )
    if mutate:
        _mutate_text(draw, corpus, pool)
    return corpus


def _mutate_text(draw: st.DrawFn, corpus: TextCorpus, pool: list[str]) -> None:
    values = VALUES[corpus.fmt]
    for _ in range(draw(st.integers(0, 3))):
        docs = corpus.splits[draw(st.sampled_from(SPLITS))]
        i = draw(st.integers(0, len(docs) - 1))
        roles = ["doc_id", "text", "labels", "odd_label"]
        role = draw(st.sampled_from(roles + (["surrogate"] if corpus.fmt == "jsonl" else [])))
        if role == "surrogate":  # JSON "\ud800" escapes (raw bytes when not ascii_json)
            role, value = draw(st.sampled_from(SURROGATES))
            setattr(docs[i], role, value)
        elif role == "odd_label":
            labels = docs[i].labels if isinstance(docs[i].labels, list) else []
            docs[i].labels = [*labels, draw(st.sampled_from(ODD_LABELS))]
        else:
            value = draw(st.sampled_from(values[role]))
            if value is DUP_ID:
                value = docs[i - 1].doc_id if i else "dup"
            setattr(docs[i], role, value)
    if corpus.fmt == "parquet" and draw(st.integers(0, 2)) == 0:
        role = draw(st.sampled_from(sorted(PARQUET_KINDS)))
        corpus.columns[role] = draw(st.sampled_from(PARQUET_KINDS[role]))
        corpus.column_split = draw(st.sampled_from(SPLITS))
        corpus.invalid_row = draw(st.integers(0, 5))
        corpus.extra_column = draw(st.booleans())
    if corpus.label_texts is not None and draw(st.integers(0, 2)) == 0:
        bad = [("", "x"), (pool[0], "dup"), (" ", None), (f" {pool[0]}\t", "same, padded")]
        if corpus.label_texts_fmt == "jsonl":
            bad += [(5, "x"), (pool[0] + "'", 5), ("\ud800", "x"), ("ok2", "\udfff")]
        corpus.label_texts.append(draw(st.sampled_from(bad)))


def encode_text(corpus: TextCorpus) -> dict[str, bytes]:
    """The files of ``corpus`` in its format, by name."""
    files: dict[str, bytes] = {}
    for split in SPLITS:
        docs = corpus.splits[split]
        if corpus.fmt == "lines":
            files.update(_lines_files(corpus, split, docs))
        elif corpus.fmt == "jsonl":
            files[f"{split}.jsonl"] = _jsonl(corpus, [json_record(corpus, d) for d in docs])
        elif corpus.fmt == "csv":
            files[f"{split}.csv"] = csv_bytes(
                corpus, _header(corpus), [_csv_row(corpus, d) for d in docs]
            )[0]
        else:
            files[f"{split}.parquet"] = parquet_bytes(parquet_table(corpus, split))
    if corpus.label_texts is not None:
        rows = corpus.label_texts
        if corpus.fmt == "lines":
            files["label_map.txt"] = _label_map(corpus, rows)
        elif corpus.label_texts_fmt == "jsonl":
            files["labels.jsonl"] = _jsonl(corpus, [{"label": a, "text": b} for a, b in rows])
        else:
            files["labels.csv"] = csv_bytes(
                corpus, ["label", "text"], [[a, b or ""] for a, b in rows]
            )[0]
    return files


def _label_map(corpus: TextCorpus, rows: list[tuple[Any, Any]]) -> bytes:
    end = "\r\n" if corpus.crlf else "\n"
    lines = [
        f"{i}\t{label}\t1" + ("" if text is None else f"\t{text}") + end
        for i, (label, text) in enumerate(rows)
    ]
    return ("\ufeff" if corpus.bom else "").encode() + "".join(lines).encode()


def labels_string(corpus: TextCorpus, labels: Any) -> Any:
    """A label list joined with the separator (strings and other values pass unchanged)."""
    if not isinstance(labels, list):
        return labels
    return corpus.sep.join("" if x is None else str(x) for x in labels)


def _lines_files(corpus: TextCorpus, split: str, docs: list[Doc]) -> dict[str, bytes]:
    def join(lines: list[str]) -> bytes:
        end = "\r\n" if corpus.crlf else "\n"
        return ("\ufeff" if corpus.bom else "").encode() + "".join(
            line + end for line in lines
        ).encode("utf-8")

    out = {
        f"{split}_texts.txt": join([d.text for d in docs]),
        f"{split}_labels.txt": join([labels_string(corpus, d.labels) for d in docs]),
    }
    if corpus.has_ids:
        out[f"{split}_ids.txt"] = join([f"{d.doc_id}\textra" for d in docs])
    return out


def json_record(corpus: TextCorpus, doc: Doc) -> dict[str, Any]:
    rec = {"doc_id": doc.doc_id, "text": doc.text, "labels": doc.labels}
    if not corpus.has_ids:
        del rec["doc_id"]
    return {k: v for k, v in rec.items() if v is not MISSING}


def _jsonl(corpus: TextCorpus, records: list[dict[str, Any]]) -> bytes:
    end = "\r\n" if corpus.crlf else "\n"
    lines = [json.dumps(r, ensure_ascii=corpus.ascii_json) + end for r in records]
    body = "".join(lines).encode("utf-8", "surrogatepass")  # raw lone surrogates: invalid UTF-8
    return ("\ufeff" if corpus.bom else "").encode() + body


def _header(corpus: TextCorpus) -> list[str]:
    return (["doc_id"] if corpus.has_ids else []) + ["text", "labels"]


def _csv_row(corpus: TextCorpus, doc: Doc) -> list[str]:
    row = [doc.text, labels_string(corpus, doc.labels)]
    return ([doc.doc_id] if corpus.has_ids else []) + row


def csv_bytes(
    corpus: TextCorpus, header: list[str], rows: list[list[str]]
) -> tuple[bytes, list[int]]:
    """The CSV file and the line number each row ends on (what the importer reports)."""
    buf = io.StringIO()
    # "\r\n" rows quote fields holding "\r" or "\n"; "\n" rows must quote every field for that
    if corpus.crlf:
        writer = csv.writer(buf)
    else:
        writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    ends = []
    for row in rows:
        writer.writerow(row)
        ends.append(buf.getvalue().count("\n"))
    text = ("\ufeff" if corpus.bom else "") + buf.getvalue()
    return text.encode("utf-8"), ends


# ----------------------------------------------------------------------------- parquet


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def parquet_kind(corpus: TextCorpus, split: str, role: str) -> str:
    """The column type (kind) of ``role`` in the Parquet file of ``split``."""
    if split != corpus.column_split:
        return DEFAULT_KIND[role]
    return corpus.columns.get(role, DEFAULT_KIND[role])


def parquet_table(corpus: TextCorpus, split: str) -> pa.Table:
    """The Parquet table of ``split``: id (if any), text and labels columns of their kinds."""
    docs = corpus.splits[split]
    arrays, names = [], []
    for role in ("doc_id", "text", "labels"):
        kind = parquet_kind(corpus, split, role)
        if (role == "doc_id" and not corpus.has_ids) or kind == "missing":
            continue
        values = [getattr(d, role) for d in docs]
        if role == "labels" and kind in ("string", "dictionary", "null", "binary"):
            values = [labels_string(corpus, v) for v in values]
        array = parquet_column(kind, values, corpus.invalid_row % len(docs))
        copies = 2 if kind == "duplicate" else 1
        arrays += [array] * copies
        names += [role] * copies
    if corpus.extra_column and split == corpus.column_split:
        arrays.append(pa.array([{"x": i} for i in range(len(docs))]))
        names.append("extra")
    return pa.Table.from_arrays(arrays, names=names)


def parquet_column(kind: str, values: list[Any], bad_row: int) -> pa.Array:
    """``values`` stored as ``kind``; non-string kinds store stand-ins (row numbers, ...)."""
    n = len(values)
    is_list = any(isinstance(v, list) for v in values)
    plain = {
        "string": pa.string(),
        "large_string": pa.large_string(),
        "duplicate": pa.list_(pa.string()) if is_list else pa.string(),
        "list<string>": pa.list_(pa.string()),
        "large_list<string>": pa.large_list(pa.string()),
        "list<large_string>": pa.list_(pa.large_string()),
    }
    if kind in plain:
        if kind == "list<string>" and not is_list:
            values = [None if v is None else [v] for v in values]
        return pa.array(values, plain[kind])
    stand_ins: dict[str, tuple[list[Any], pa.DataType]] = {
        "int64": (list(range(n)), pa.int64()),
        "int32": (list(range(n)), pa.int32()),
        "float64": ([i + 0.5 for i in range(n)], pa.float64()),
        "bool": ([i % 2 == 0 for i in range(n)], pa.bool_()),
        "binary": ([None if v is None else str(v).encode() for v in values], pa.binary()),
        "list<int64>": ([[i] for i in range(n)], pa.list_(pa.int64())),
        "list<list<string>>": ([[["a"]] for _ in range(n)], pa.list_(pa.list_(pa.string()))),
        "list<binary>": ([[b"a"] for _ in range(n)], pa.list_(pa.binary())),
        "struct": ([{"a": i} for i in range(n)], pa.struct([("a", pa.int64())])),
    }
    if kind in stand_ins:
        return pa.array(*stand_ins[kind])
    if kind == "dictionary":
        return pa.array(values, pa.string()).dictionary_encode()
    if kind == "null":
        return pa.nulls(n)
    assert kind == "invalid_utf8", kind
    return _invalid_utf8_column(values, bad_row)


def _invalid_utf8_column(values: list[Any], bad_row: int) -> pa.Array:
    def raw(v: Any) -> bytes:
        return b"" if v is None else str(v).encode()

    if any(isinstance(v, list) for v in values):
        lists = [[raw(x) for x in v] if isinstance(v, list) else [] for v in values]
        lists[bad_row] = [*lists[bad_row], b"bad \xff label"]
        return pa.array(lists, pa.list_(pa.binary())).view(pa.list_(pa.string()))
    blobs = [raw(v) for v in values]
    blobs[bad_row] = b"caf\xe9 " + blobs[bad_row]
    return pa.array(blobs, pa.binary()).view(pa.string())
