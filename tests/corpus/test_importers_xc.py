"""The ``xc`` importer (Extreme Classification Repository sparse format) and the real bibtex set."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.corpus.helpers import check_error
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError

TRAIN = "3 10 4\n0,2 1:0.5 3:2\n1 0:1 9:1.25e-1\n 4:1\n"
TEST = "1 10 4\n3 2:1\n"
BIBTEX = Path("/work/shared/datasets/bibtex-bow")


def make_src(tmp_path: Path, train: str | bytes = TRAIN, test: str | bytes = TEST) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, content in (("train.txt", train), ("test.txt", test)):
        (src / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return src


def ingest_xc(src: Path, tmp_path: Path, **opts: object) -> Path:
    dest = tmp_path / "ds"
    ingest("xc", src, dest, IngestOptions(**opts))
    return dest


def test_round_trip_features_and_ids(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()}
    dest = ingest_xc(src, tmp_path, policies=Policies(on_unlabeled="keep"))
    corpus = Corpus(dest)
    assert corpus.manifest.kind == "bow" and corpus.manifest.n_features == 10
    rows = corpus.read_split("train").to_pylist()
    assert [r["doc_id"] for r in rows] == ["train-00000001", "train-00000002", "train-00000003"]
    assert [r["labels"] for r in rows] == [["0", "2"], ["1"], []]
    assert [r["text"] for r in rows] == [None, None, None]
    assert [r["feature_ids"] for r in rows] == [[1, 3], [0, 9], [4]]
    assert [r["feature_values"] for r in rows] == [[0.5, 2.0], [1.0, 0.125], [1.0]]
    table = corpus.read_split("train")
    assert table.schema.field("feature_values").type.value_type == pa.float32()
    assert corpus.manifest.splits["train"].kept_unlabeled == 1
    assert corpus.manifest.unseen_test_labels == 1  # label 3 only in test: reported, not fatal
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in src.iterdir()} == before


def test_label_map_names_and_texts(tmp_path: Path) -> None:
    src = make_src(tmp_path, train="1 10 4\n0,3 1:1\n")
    (src / "label_map.txt").write_text("0\tzero\t1\tZero text\n1\tone\t0\n2\ttwo\t0\n3\tthree\t1\n")
    dest = ingest_xc(src, tmp_path)
    corpus = Corpus(dest)
    assert corpus.read_split("train").column("labels").to_pylist() == [["zero", "three"]]
    assert corpus.read_split("test").column("labels").to_pylist() == [["three"]]
    assert corpus.manifest.has_label_texts


def test_label_missing_from_label_map(tmp_path: Path) -> None:
    src = make_src(tmp_path, train="1 10 4\n0,2 1:1\n")
    (src / "label_map.txt").write_text("0\tzero\n1\tone\n3\tthree\n")
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    assert "label id 2" in check_error(info, "train.txt", 2)


def test_label_map_bad_id(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "label_map.txt").write_text("0\tzero\nx\tone\n")
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    check_error(info, "label_map.txt", 2)


@pytest.mark.parametrize(
    "header", ["", "3 10\n", "3 10 4 1\n", "three 10 4\n", "3 0 4\n", "3 10 0\n", "-1 10 4\n"]
)
def test_bad_header(tmp_path: Path, header: str) -> None:
    src = make_src(tmp_path, train=header + TRAIN.split("\n", 1)[1] if header else "")
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    assert "N D L" in check_error(info, "train.txt", 1)
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("test", ["1 11 4\n3 2:1\n", "1 10 5\n3 2:1\n"])
def test_test_header_must_agree(tmp_path: Path, test: str) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, test=test), tmp_path)
    assert "train.txt" in check_error(info, "test.txt", 1)


@pytest.mark.parametrize(("n", "found"), [(4, 3), (2, 3)])
def test_row_count_differs_from_header(tmp_path: Path, n: int, found: int) -> None:
    train = f"{n} 10 4\n" + TRAIN.split("\n", 1)[1]
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train=train), tmp_path, policies=Policies(on_unlabeled="keep"))
    msg = check_error(info, "train.txt", found + 1)
    assert f"N={n}" in msg and f"{found} data rows" in msg
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("row", "what"),
    [
        ("x,1 1:1", "'x' is not an integer"),
        ("1.5 1:1", "'1.5' is not an integer"),
        ("1:1 2:1", "'1:1' is not an integer"),
        ("4 1:1", "label id 4 is outside [0, 4)"),
        ("-1 1:1", "label id -1 is outside"),
        ("1, 1:1", "'' is not an integer"),
    ],
)
def test_bad_label_ids(tmp_path: Path, row: str, what: str) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train=f"2 10 4\n0 1:1\n{row}\n"), tmp_path)
    assert what in check_error(info, "train.txt", 3)


@pytest.mark.parametrize("pair", ["3", "a:1", "3:x", "3:1:2", ":1", "3:", "1e3:1", "3=1"])
def test_malformed_pair(tmp_path: Path, pair: str) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train=f"2 10 4\n0 1:1\n0 2:1 {pair}\n"), tmp_path)
    msg = check_error(info, "train.txt", 3)
    assert "pair 2" in msg and repr(pair) in msg and "index:value" in msg


@pytest.mark.parametrize("pair", ["10:1", "-1:1", "99999999999:1"])
def test_feature_index_out_of_range(tmp_path: Path, pair: str) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train=f"1 10 4\n0 2:1 {pair}\n"), tmp_path)
    assert "outside [0, 10)" in check_error(info, "train.txt", 2)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e39"])
def test_non_finite_value(tmp_path: Path, value: str) -> None:
    src = make_src(tmp_path, train="1 10 4\n0 1:1\n", test=f"1 10 4\n0 2:{value}\n")
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    assert "NaN, infinite" in check_error(info, "test.txt", 2)
    assert not (tmp_path / "ds").exists()


def test_duplicate_feature_index(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train="1 10 4\n0 2:1 5:1 2:3\n"), tmp_path)
    assert "index 2 appears more than once" in check_error(info, "train.txt", 2)


def test_row_without_features_error_and_drop(tmp_path: Path) -> None:
    src = make_src(tmp_path, train="2 10 4\n0 1:1\n1\n")
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    assert "no features" in check_error(info, "train.txt", 3)
    dest = ingest_xc(src, tmp_path, policies=Policies(on_empty="drop"))
    assert Corpus(dest).manifest.splits["train"].dropped_empty == 1


def test_unlabeled_row_error_and_drop(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    assert "no label" in check_error(info, "train.txt", 4)
    dest = ingest_xc(src, tmp_path, policies=Policies(on_unlabeled="drop"))
    assert Corpus(dest).manifest.splits["train"].dropped_unlabeled == 1


def test_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        ingest_xc(make_src(tmp_path, train=b"1 10 4\n0 1:1 \xa0\n"), tmp_path)
    assert "byte offset 6" in check_error(info, "train.txt", 2)


def test_crlf_rows(tmp_path: Path) -> None:
    dest = ingest_xc(make_src(tmp_path, train="1 10 4\r\n0 1:1 2:3\r\n"), tmp_path)
    assert Corpus(dest).read_split("train").column("feature_ids").to_pylist() == [[1, 2]]


def test_missing_file(tmp_path: Path) -> None:
    src = make_src(tmp_path)
    (src / "test.txt").unlink()
    with pytest.raises(InputError) as info:
        ingest_xc(src, tmp_path)
    check_error(info, "test.txt", None)


@pytest.mark.skipif(not BIBTEX.is_dir(), reason="shared bibtex-bow dataset not present")
def test_real_bibtex_lines_and_xc_agree(tmp_path: Path) -> None:
    lines = ingest("lines", BIBTEX, tmp_path / "lines")
    xc = ingest("xc", BIBTEX, tmp_path / "xc")
    for manifest in (lines, xc):
        assert manifest.splits["train"].rows == 4880 and manifest.splits["test"].rows == 2515
        assert manifest.n_labels == 159 and manifest.n_labels_total == 159
        assert manifest.unseen_test_labels == 0
    assert xc.n_features == 1836 and xc.kind == "bow"
    assert lines.splits["train"].label_assignments == xc.splits["train"].label_assignments
    a = Corpus(tmp_path / "lines").read_split("test", ["doc_id", "labels"])
    b = Corpus(tmp_path / "xc").read_split("test", ["doc_id", "labels"])
    assert a.equals(b)
