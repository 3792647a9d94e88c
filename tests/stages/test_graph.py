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
    folder = tmp_path / "artifacts" / "note" / first.key
    assert [r.getMessage() for r in caplog.records if r.name == graph.log.name] == [
        f"note-level-2: resumed from checkpoint {folder}"
    ]
