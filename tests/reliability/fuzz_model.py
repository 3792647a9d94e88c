"""What an ingest must do with a drawn corpus: the documented policies, written out as a model.

The policies (README "Corpora", importer docstrings) the model encodes:

* Files are strict UTF-8, split on ``\\n`` only; a UTF-8 BOM on line 1 and a ``\\r`` before the
  ``\\n`` are dropped. Any other byte sequence that is not UTF-8 stops the ingest at its line.
* Labels given as one string (lines, csv, a string column or JSON string) are split on the
  separator; a blank string means no labels. Every label is stripped of surrounding whitespace;
  an empty name (``"a,,b"``, ``"a,"``, ``[""]`` as a list item) is an error; a repeated label in
  one document is dropped and counted. Labels given as a list (JSON array, ``list<string>``) are
  not split: ``"a,b"`` inside a list is one label.
* Text: a null text counts as empty; empty or whitespace-only text follows ``on_empty``
  (error or drop). Whitespace is what ``str.isspace`` says (Unicode).
* A document without labels follows ``on_unlabeled`` (error, drop, keep).
* Doc ids: ``lines`` ids are the first tab-separated column, stripped; tabular ids are taken
  verbatim (integers become their decimal string); a blank or repeated id is an error; without
  an id column ids are ``"{split}-{n:08d}"`` counting every record.
* Text, ids, labels and label texts must be Unicode text: a lone surrogate (JSON ``"\\ud800"``)
  is an error at its row.
* JSON lines: the first object's fields decide which columns exist; values of the wrong type
  are errors at their row. Parquet: wrong column types, missing text/labels columns and
  repeated column names are errors naming the file; invalid UTF-8 in a string column is an
  error at its row; extra columns are ignored.
* xc: the header is ``N D L`` (N >= 0, 1 <= D <= 2**31, L >= 1, the same D and L in both files);
  label ids are 0-based below L, feature pairs ``index:value`` with index in [0, D), values
  finite in float32, no repeated index; a row count differing from N is an error after the
  last row; label_map.txt names are stripped.
* Splits are written train then test; the first problem met stops the ingest. A split left
  without documents is an error naming its file.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.reliability.fuzz_corpora import (
    MISSING,
    TextCorpus,
    csv_bytes,
    json_record,
    labels_string,
    parquet_kind,
    parquet_table,
)
from tests.reliability.fuzz_xc import XcCorpus, xc_header
from xmc_core.corpus.schema import SPLITS, Policies

PARQUET_OK = {
    "doc_id": {"string", "large_string", "dictionary", "int64", "int32", "null", "invalid_utf8"},
    "text": {"string", "large_string", "dictionary", "null", "invalid_utf8"},
    "labels": {
        "list<string>", "large_list<string>", "list<large_string>", "string", "dictionary",
        "null", "invalid_utf8",
    },
}  # fmt: skip


@dataclass(frozen=True)
class Fails:
    """The ingest must stop with an InputError naming ``file`` and ``row`` (None: no row)."""

    file: str
    row: int | None


@dataclass
class Accepts:
    """The ingest must succeed with these rows and counts."""

    rows: dict[str, list[tuple[Any, ...]]]
    stats: dict[str, Counter[str]]
    label_texts: list[tuple[str, str | None]] | None = None


class _Stop(Exception):
    def __init__(self, fails: Fails) -> None:
        self.fails = fails


class _Reject(Exception):
    """A document the writer refuses; ``stage`` is what it blames (text, labels, doc_id, row)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage


def has_surrogate(value: Any) -> bool:
    """Whether a string (or the strings inside lists and dicts) holds a lone surrogate."""
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_surrogate(v) for v in value)
    return False


def split_labels(value: str, sep: str) -> list[str]:
    """One label string: split on the separator; blank means no labels."""
    return value.split(sep) if value.strip() else []


@dataclass
class SplitModel:
    """The writer's checks, in its order, for one split."""

    policies: Policies
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)

    def add(self, doc_id: Any, text: Any, labels: list[Any], features: Any = None) -> None:
        empty = not features[0] if features is not None else (not text or text.isspace())
        if empty:
            if self.policies.on_empty == "drop":
                self.stats["dropped_empty"] += 1
                return
            raise _Reject("text")
        cleaned: dict[str, None] = {}
        for raw in labels:
            if not isinstance(raw, str) or not raw.strip():
                raise _Reject("labels")
            if raw.strip() in cleaned:
                self.stats["duplicate_labels_removed"] += 1
            cleaned[raw.strip()] = None
        if not cleaned:
            if self.policies.on_unlabeled == "error":
                raise _Reject("labels")
            if self.policies.on_unlabeled == "drop":
                self.stats["dropped_unlabeled"] += 1
                return
            self.stats["kept_unlabeled"] += 1
        if not isinstance(doc_id, str) or not doc_id.strip() or doc_id in self.seen:
            raise _Reject("doc_id")
        if has_surrogate([doc_id, text, *cleaned]):
            raise _Reject("row")
        self.seen.add(doc_id)
        self.stats["rows"] += 1
        self.rows.append((doc_id, text, list(cleaned), *(features or ())))


def expect(corpus: TextCorpus | XcCorpus) -> Fails | Accepts:
    """What ingesting ``corpus`` (encoded without byte corruption) must give."""
    try:
        if isinstance(corpus, XcCorpus):
            return _xc(corpus)
        if corpus.fmt == "lines":
            return _lines(corpus)
        return _tabular(corpus)
    except _Stop as stop:
        return stop.fails


def _close(model: SplitModel, file: str) -> None:
    if not model.rows:
        raise _Stop(Fails(file, None))


# ----------------------------------------------------------------------------- lines


def _lines(c: TextCorpus) -> Accepts:
    texts = _label_map(c)
    out = Accepts({}, {})
    for split in SPLITS:
        model = SplitModel(c.policies)
        blame = {"text": "texts", "labels": "labels", "doc_id": "ids" if c.has_ids else "texts"}
        for lineno, doc in enumerate(c.splits[split], 1):
            labels = split_labels(labels_string(c, doc.labels), c.sep)
            doc_id = doc.doc_id.split("\t", 1)[0].strip() if c.has_ids else f"{split}-{lineno:08d}"
            try:
                model.add(doc_id, doc.text, labels)
            except _Reject as r:
                raise _Stop(Fails(f"{split}_{blame[r.stage]}.txt", lineno)) from None
        _close(model, f"{split}_texts.txt")
        out.rows[split], out.stats[split] = model.rows, model.stats
    if texts is not None and any(t is not None for t in texts.values()):
        out.label_texts = _label_texts_table(out, texts)
    return out


def _label_map(c: TextCorpus) -> dict[str, Any] | None:
    """label_map.txt of ``lines``: names (column 2) stripped, unique, non-empty."""
    if c.label_texts is None:
        return None
    texts: dict[str, Any] = {}
    for lineno, (label, text) in enumerate(c.label_texts, 1):
        if not label.strip() or label.strip() in texts:
            raise _Stop(Fails("label_map.txt", lineno))
        texts[label.strip()] = text
    return texts


def _label_texts_table(out: Accepts, texts: dict[str, Any]) -> list[tuple[str, str | None]]:
    """labels.parquet: every label of the map or of a split, with its cleaned text."""
    names = set(texts) | {lab for s in SPLITS for r in out.rows[s] for lab in r[2]}
    return [(n, _clean_label_text(texts.get(n))) for n in sorted(names)]


# ----------------------------------------------------------------------------- tabular


def _tabular(c: TextCorpus) -> Accepts:
    texts = _label_texts(c)
    out = Accepts({}, {})
    for split in SPLITS:
        name = f"{split}.{c.fmt}"
        records = _records(c, split, name)
        found = list(records[0][1]) if records else []
        if "text" not in found or "labels" not in found:
            raise _Stop(Fails(name, None))
        has_id = "doc_id" in found
        model = SplitModel(c.policies)
        for index, (row, rec) in enumerate(records, 1):
            if c.fmt == "jsonl" and not c.ascii_json and has_surrogate(rec):
                raise _Stop(Fails(name, row))  # its line is not UTF-8
            try:
                model.add(*_values(rec, has_id, f"{split}-{index:08d}", c.sep))
            except _Reject:
                raise _Stop(Fails(name, row)) from None
        _close(model, name)
        out.rows[split], out.stats[split] = model.rows, model.stats
    if texts is not None:
        out.label_texts = _label_texts_table(out, texts)
    return out


def _records(c: TextCorpus, split: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    docs = c.splits[split]
    if c.fmt == "jsonl":
        records = [(i, json_record(c, d)) for i, d in enumerate(docs, 1)]
        if records and not c.ascii_json and has_surrogate(records[0][1]):
            raise _Stop(Fails(name, 1))
        return records
    if c.fmt == "csv":
        header = (["doc_id"] if c.has_ids else []) + ["text", "labels"]
        values = [
            ([d.doc_id] if c.has_ids else []) + [d.text, labels_string(c, d.labels)] for d in docs
        ]
        ends = csv_bytes(c, header, values)[1]
        return [
            (end, dict(zip(header, v, strict=True))) for end, v in zip(ends, values, strict=True)
        ]
    return _parquet_records(c, split, name)


def _parquet_records(c: TextCorpus, split: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    kinds = {r: parquet_kind(c, split, r) for r in ("doc_id", "text", "labels")}
    if not c.has_ids:
        kinds["doc_id"] = "missing"
    if "duplicate" in kinds.values() or kinds["text"] == "missing" or kinds["labels"] == "missing":
        raise _Stop(Fails(name, None))
    if any(k != "missing" and k not in PARQUET_OK[r] for r, k in kinds.items()):
        raise _Stop(Fails(name, None))
    if "invalid_utf8" in kinds.values():
        raise _Stop(Fails(name, c.invalid_row % len(c.splits[split]) + 1))
    table = parquet_table(c, split)
    table = table.select([n for n in table.column_names if n in kinds])
    return list(enumerate(table.to_pylist(), 1))


def _values(rec: dict[str, Any], has_id: bool, generated: str, sep: str) -> tuple[Any, ...]:
    """(doc id, text, labels) of one record, by the tabular conversion rules."""
    doc_id: Any = generated
    if has_id:
        raw = rec.get("doc_id", MISSING)
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        if not isinstance(raw, str):
            raise _Reject("doc_id")
        doc_id = raw
    text = rec.get("text", MISSING)
    if text is not None and not isinstance(text, str):
        raise _Reject("text")
    labels = rec.get("labels", MISSING)
    if labels is None or isinstance(labels, str):
        labels = split_labels(labels or "", sep)
    if not isinstance(labels, list | tuple):
        raise _Reject("labels")
    return doc_id, text or "", list(labels)


def _label_texts(c: TextCorpus) -> dict[str, Any] | None:
    if c.label_texts is None:
        return None
    name = f"labels.{c.label_texts_fmt}"
    if c.label_texts_fmt == "jsonl":
        rows = [(i, label, text) for i, (label, text) in enumerate(c.label_texts, 1)]
    else:
        values = [[label, text or ""] for label, text in c.label_texts]
        ends = csv_bytes(c, ["label", "text"], values)[1]
        rows = [(end, a, b) for end, (a, b) in zip(ends, values, strict=True)]
    texts: dict[str, Any] = {}
    for row, label, text in rows:
        ok = isinstance(label, str) and bool(label.strip())
        ok = ok and (text is None or isinstance(text, str)) and label.strip() not in texts
        if not ok or has_surrogate([label, text]):
            raise _Stop(Fails(name, row))
        texts[label.strip()] = text
    return texts


def _clean_label_text(text: Any) -> str | None:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    return str(text).strip() or None


# ----------------------------------------------------------------------------- xc


def _header(line: str) -> tuple[int, int, int] | None:
    parts = line.split()
    if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
        return None
    n, d, l_ = (int(p) for p in parts)
    return (n, d, l_) if n >= 0 and 1 <= d <= 2**31 and l_ >= 1 else None


def _xc(c: XcCorpus) -> Accepts:
    headers = {}
    for split in SPLITS:
        headers[split] = _header(xc_header(c, split))
        if headers[split] is None:
            raise _Stop(Fails(f"{split}.txt", 1))
    if headers["train"][1:] != headers["test"][1:]:
        raise _Stop(Fails("test.txt", 1))
    out = Accepts({}, {})
    for split in SPLITS:
        name, rows = f"{split}.txt", c.splits[split]
        model = SplitModel(c.policies)
        for k, r in enumerate(rows, 1):
            if r.bad:
                raise _Stop(Fails(name, k + 1))
            names = [c.names[i].strip() if c.names else str(i) for i in r.labels]
            ids = [i for i, _ in r.features]
            values = [np.float32(v).item() for _, v in r.features]
            try:
                model.add(f"{split}-{k:08d}", None, names, (ids, values))
            except _Reject:
                raise _Stop(Fails(name, k + 1)) from None
        if len(rows) != headers[split][0]:
            raise _Stop(Fails(name, len(rows) + 1))
        _close(model, name)
        out.rows[split], out.stats[split] = model.rows, model.stats
    return out
