"""Hostile landing folders: a run killed between archiving two drops, and drops that make the
intake fail in unexpected ways (a symbolic-link loop, an importer crash, a drop that cannot be
merged). Nothing archived is lost, a bad drop is quarantined with its reason, the others go on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xmc_core.config import TfidfConfig, TokenizerConfig
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Policies
from xmc_core.errors import InputError, XmcError
from xmc_core.evaluation.run_report import build_report
from xmc_core.features.tfidf import TfidfVectorizer
from xmc_core.intake import landing
from xmc_core.intake.drops import IntakeFolders, take_in

pytestmark = pytest.mark.reliability
SUITE = "hostile-intake"
REPO = Path(__file__).resolve().parents[2]


def lines_drop(landing_dir: Path, name: str, n_train: int, n_test: int, mtime: int) -> Path:
    """A ``lines`` drop of ``n_train + n_test`` documents with ids ``<name>-<k>``."""
    src = landing_dir / name
    src.mkdir(parents=True)
    ids = iter(range(n_train + n_test))
    for split, n in (("train", n_train), ("test", n_test)):
        docs = [f"{name}-{next(ids)}" for _ in range(n)]
        (src / f"{split}_ids.txt").write_text("".join(f"{d}\n" for d in docs))
        (src / f"{split}_texts.txt").write_text("".join(f"text of {d}\n" for d in docs))
        (src / f"{split}_labels.txt").write_text("".join(f"lab{k % 3}\n" for k in range(n)))
    os.utime(src, ns=(mtime, mtime))
    return src


def intake_folders(tmp_path: Path) -> IntakeFolders:
    w = tmp_path / "work"
    return IntakeFolders(w / "landing", w / "quarantine", w / "archive", w / "corpora")


def all_ids(corpus: str | None) -> set[str]:
    assert corpus is not None
    c = Corpus(corpus)
    return {d for s in ("train", "test") for d in c.read_split(s, ["doc_id"])["doc_id"].to_pylist()}


KILL_AFTER_FIRST_ARCHIVE = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from xmc_core.intake import drops as intake
    from xmc_core.corpus.schema import Policies

    original = intake.archive

    def archive_then_die(entry, archive_dir):
        where = original(entry, archive_dir)
        os.kill(os.getpid(), 9)  # SIGKILL right after the first drop is archived
        return where

    intake.archive = archive_then_die
    w = Path(sys.argv[1])
    folders = intake.IntakeFolders(w / "landing", w / "quarantine", w / "archive", w / "corpora")
    intake.take_in(folders, sys.argv[2], Policies(), rows_per_group=16)
    """
)


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_sigkill_between_archiving_two_drops_loses_no_drop(tmp_path: Path, mode: str) -> None:
    f = intake_folders(tmp_path)
    lines_drop(f.landing, "old", 8, 2, mtime=10**18)
    assert take_in(f, "merge", Policies(), rows_per_group=16).ingested == ["old"]
    lines_drop(f.landing, "a", 50, 10, mtime=2 * 10**18)
    lines_drop(f.landing, "b", 50, 10, mtime=3 * 10**18)
    child = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_FIRST_ARCHIVE, str(f.landing.parent), mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr
    assert [p.name for p in f.landing.iterdir()] == ["b"]  # a is archived, b is not yet

    rerun = take_in(f, mode, Policies(), rows_per_group=16)
    ids = all_ids(rerun.corpus)
    new = {f"{d}-{k}" for d in "ab" for k in range(60)}
    assert new <= ids, f"{len(new - ids)} of 120 documents lost"
    old = {f"old-{k}" for k in range(10)}
    assert ids == (new if mode == "replace" else new | old)
    assert rerun.needs_training and list(f.landing.iterdir()) == []
    assert sorted(p.name for p in f.archive.glob("*/*")) == ["a", "b", "old"]
    # the batch is closed: the next run with a new drop starts a new one
    lines_drop(f.landing, "c", 4, 1, mtime=4 * 10**18)
    after = take_in(f, mode, Policies(), rows_per_group=16)
    later = {f"c-{k}" for k in range(5)}
    assert all_ids(after.corpus) == (later if mode == "replace" else ids | later)


def check_quarantined(f: IntakeFolders, result, name: str, words: tuple[str, ...]) -> str:
    """The drop ``name`` sits in quarantine beside a REASON.txt holding ``words``."""
    (entry,) = [q for q in result.quarantined if q["name"] == name]
    reason = (Path(entry["to"]) / "REASON.txt").read_text()
    for word in words:
        assert word in entry["reason"] and word in reason
    assert (Path(entry["to"]) / name).is_dir()
    return reason


def test_symlink_loop_in_a_drop_quarantines_that_drop_only(tmp_path: Path) -> None:
    f = intake_folders(tmp_path)
    lines_drop(f.landing, "a", 4, 1, mtime=1 * 10**18)
    looped = lines_drop(f.landing, "looped", 4, 1, mtime=2 * 10**18)
    os.symlink("self", looped / "self")
    os.symlink("ping", looped / "pong")
    os.symlink("pong", looped / "ping")
    lines_drop(f.landing, "c", 4, 1, mtime=3 * 10**18)
    result = take_in(f, "merge", Policies(), rows_per_group=16)
    assert result.ingested == ["a", "c"]
    check_quarantined(f, result, "looped", ("symbolic link", "loop"))
    moved = Path(result.quarantined[0]["to"]) / "looped"
    assert os.readlink(moved / "self") == "self"  # moved as it was, link kept
    assert all_ids(result.corpus) == {f"{d}-{k}" for d in "ac" for k in range(5)}
    assert list(f.landing.iterdir()) == []


def test_unexpected_importer_error_quarantines_the_drop_with_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = intake_folders(tmp_path)
    lines_drop(f.landing, "a", 4, 1, mtime=1 * 10**18)
    lines_drop(f.landing, "boom", 4, 1, mtime=2 * 10**18)
    original = landing.ingest

    def crashing_ingest(fmt, src, dest, options):
        if Path(src).name == "boom":
            raise ZeroDivisionError("synthetic importer bug")
        return original(fmt, src, dest, options)

    monkeypatch.setattr(landing, "ingest", crashing_ingest)
    result = take_in(f, "merge", Policies(), rows_per_group=16)
    assert result.ingested == ["a"]
    check_quarantined(f, result, "boom", ("ZeroDivisionError", "synthetic importer bug"))
    assert all_ids(result.corpus) == {f"a-{k}" for k in range(5)}


def test_drop_that_cannot_be_merged_is_quarantined_and_the_rest_merge(tmp_path: Path) -> None:
    f = intake_folders(tmp_path)
    lines_drop(f.landing, "a", 4, 1, mtime=1 * 10**18)
    take_in(f, "merge", Policies(), rows_per_group=16)
    bow = f.landing / "bow"
    bow.mkdir()
    (bow / "train.txt").write_text("2 10 4\n0 1:0.5\n1 2:1\n")
    (bow / "test.txt").write_text("1 10 4\n3 2:1\n")
    lines_drop(f.landing, "c", 4, 1, mtime=3 * 10**18)
    os.utime(bow, ns=(2 * 10**18, 2 * 10**18))
    result = take_in(f, "merge", Policies(), rows_per_group=16)
    assert result.ingested == ["c"]
    check_quarantined(f, result, "bow", ("bag-of-words", "text corpus"))
    assert all_ids(result.corpus) == {f"{d}-{k}" for d in "ac" for k in range(5)}


def test_run_report_names_the_quarantined_drop_and_its_reason() -> None:
    intake = {
        "ingested": ["a"],
        "resumed": ["x"],
        "quarantined": [{"name": "looped", "to": "/q/T-looped", "reason": "links: a `loop`"}],
        "stuck": [{"name": "odd", "reason": "bad", "error": "PermissionError: denied"}],
    }
    markdown = build_report("run", {}, intake=intake).markdown
    section = markdown.split("## Intake", 1)[1].split("\n## ", 1)[0]
    assert "2 drop(s) refused" in section
    for text in ("looped", "/q/T-looped", "links: a 'loop'", "odd", "PermissionError", "x"):
        assert text in section
    assert "## Intake" not in build_report("run", {}).markdown
    quiet = build_report("run", {}, intake={"ingested": ["a"], "quarantined": []}).markdown
    assert "refused" not in quiet and "ingested: a" in quiet


def test_all_emoji_corpus_is_told_it_holds_no_word_not_to_lower_min_df() -> None:
    vectorizer = TfidfVectorizer(TfidfConfig(), TokenizerConfig())
    with pytest.raises(XmcError) as excinfo:
        vectorizer.fit(["😀😀 🎉", "👍 !!", "🎉"])
    message = str(excinfo.value)
    assert "3 training documents hold no word" in message and "emoji" in message
    assert "min_df" not in message
    with pytest.raises(XmcError, match=r"no term left after min_df=2.*most common term is in 1"):
        TfidfVectorizer(TfidfConfig(min_df=2), TokenizerConfig()).fit(["apple pie", "pear tart"])


LINES = ("train_texts.txt", "train_labels.txt", "test_texts.txt", "test_labels.txt")


@pytest.mark.parametrize(
    ("fmt", "files", "special"),
    [
        ("xc", {"test.txt": "1 4 2\n0 1:1\n"}, "train.txt"),
        ("jsonl", {"test.jsonl": '{"text": "t", "labels": ["a"]}\n'}, "train.jsonl"),
        ("lines", dict.fromkeys(LINES[:3], "t\n"), "test_labels.txt"),
        ("lines", dict.fromkeys(LINES, "t\n"), "train_ids.txt"),  # an optional file
    ],
)
def test_fifo_split_file_is_named_a_fifo_not_missing(
    tmp_path: Path, fmt: str, files: dict[str, str], special: str
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    os.mkfifo(src / special)
    with pytest.raises(InputError) as excinfo:
        ingest(fmt, src, tmp_path / "ds", IngestOptions())
    err = excinfo.value
    assert err.path == str(src / special)
    assert "FIFO" in err.problem and "missing" not in err.problem
    assert "regular file" in err.fix
    assert not (tmp_path / "ds").exists()


def parquet_part(path: Path, columns: dict[str, list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def test_parquet_parts_may_differ_in_extra_columns_but_not_in_needed_ones(tmp_path: Path) -> None:
    src = tmp_path / "src"
    parquet_part(
        src / "train.parquet" / "part-0.parquet",
        {"doc_id": ["d1"], "text": ["one"], "labels": [["a"]], "source": ["web"]},
    )
    parquet_part(
        src / "train.parquet" / "part-1.parquet",
        {"views": [3], "labels": [["b"]], "text": ["two"], "doc_id": ["d2"]},
    )
    parquet_part(src / "test.parquet", {"doc_id": ["d3"], "text": ["three"], "labels": [["a"]]})
    manifest = ingest("parquet", src, tmp_path / "ds", IngestOptions())
    assert manifest.splits["train"].rows == 2  # extra columns ignored, as the README says
    parquet_part(
        src / "train.parquet" / "part-2.parquet", {"text": ["four"], "tags": [["c"]], "x": [1]}
    )
    with pytest.raises(InputError) as excinfo:
        ingest("parquet", src, tmp_path / "ds2", IngestOptions())
    err = excinfo.value
    assert err.path == str(src / "train.parquet" / "part-2.parquet")
    assert "'doc_id'" in err.problem and "'labels'" in err.problem and "part-0" in err.problem
    assert "add the columns ['doc_id', 'labels']" in err.fix
    assert not (tmp_path / "ds2").exists()


def test_drop_that_cannot_be_quarantined_stays_and_the_others_go_on(tmp_path: Path) -> None:
    f = intake_folders(tmp_path)
    f.quarantine.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(f.quarantine)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        lines_drop(f.landing, "a", 4, 1, mtime=1 * 10**18)
        (f.landing / "loose.txt").write_text("not a drop\n")
        result = take_in(f, "merge", Policies(), rows_per_group=16)
    finally:
        subprocess.run(["umount", str(f.quarantine)], check=True)
    assert result.ingested == ["a"] and result.quarantined == []
    (stuck,) = result.stuck
    assert stuck["name"] == "loose.txt" and "not a drop folder" in stuck["reason"]
    assert "another filesystem" in stuck["error"]
    assert (f.landing / "loose.txt").read_text() == "not a drop\n"  # left where it was
    assert all_ids(result.corpus) == {f"a-{k}" for k in range(5)}
