"""The in-process runner: a finished checkpoint folder is reused by the next run, and says so."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from xmc_core.stages import graph
from xmc_core.stages.graph import InProcessRunner, Stage, StageTally


@dataclass(frozen=True)
class Note:
    """A toy checkpoint: the text of ``note.txt`` in its folder."""

    text: str

    @classmethod
    def load(cls, folder: Path) -> Note:
        return cls((Path(folder) / "note.txt").read_text())


CALLS: list[int] = []


def write_note(level: int, out: Path) -> None:
    CALLS.append(level)
    (out / "note.txt").write_text(f"level {level}")


NOTE = Stage("note", write_note, Note, writes_folder=True)


def test_a_rerun_resumes_from_the_finished_checkpoint(tmp_path, caplog):
    runner = InProcessRunner(str(tmp_path))
    first = runner(NOTE, label="note-level-2", level=2)
    assert CALLS == [2] and first.value == Note("level 2")
    assert runner.tally == StageTally(calls=1, reused=0)
    caplog.clear()  # the first run's lines, captured when another test set xmc_core to INFO
    rerun = InProcessRunner(str(tmp_path))
    with caplog.at_level(logging.INFO, logger=graph.log.name):
        again = rerun(NOTE, label="note-level-2", level=2)
    assert CALLS == [2] and again.value == Note("level 2") and again.key == first.key
    assert rerun.tally == StageTally(calls=1, reused=1)  # what the run's summary tells
    assert set(runner.timings) == {"note-level-2"} and runner.timings["note-level-2"] > 0
    assert rerun.timings == {"note-level-2": 0.0}  # reused counts 0, as a Cached task
    folder = tmp_path / "artifacts" / "note" / first.key
    assert [r.getMessage() for r in caplog.records if r.name == graph.log.name] == [
        f"note-level-2: resumed from checkpoint {folder}"
    ]


def test_keys_of_the_lifecycle_settings_and_of_text_chunks() -> None:
    """Stage times and tags key by content, in any order; a text chunk by its lines' content,
    wherever its file is (the predict flow reuses a part after lines were appended)."""
    from xmc_core.app.predictions import LineChunk
    from xmc_core.lifecycle.artifacts import TextFile
    from xmc_core.lifecycle.predict import PREDICT_CHUNK
    from xmc_core.stages.keys import key_part

    assert key_part({"b": 1.5, "a": {"c": None}}) == [["a", [["c", None]]], ["b", 1.5]]
    assert key_part({"a": 1, "b": 2}) == key_part({"b": 2, "a": 1})
    chunk = LineChunk(offset=0, first_line=1, n_lines=50, sha256="ab" * 32)

    def key(source: str, c: LineChunk) -> str:
        args = {"model": "m", "source": TextFile(Path(source)), "chunk": c, "topk": 5}
        return PREDICT_CHUNK.key({**args, "beam_size": None}, lambda _n, h: str(h))

    assert key("/a/docs.txt", chunk) == key("/b/other.txt", chunk)
    moved = LineChunk(offset=10, first_line=1, n_lines=50, sha256="ab" * 32)
    assert key("/a/docs.txt", moved) == key("/a/docs.txt", chunk)  # the offset is not content
    assert key("/a/docs.txt", LineChunk(0, 1, 50, "cd" * 32)) != key("/a/docs.txt", chunk)
