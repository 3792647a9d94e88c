"""Counts in messages agree with their nouns: ``1 version``, ``1 document``, ``2 documents``."""

from __future__ import annotations

import logging
from pathlib import Path

from tests.cli_helpers import write_lines
from xmc_core.app.cli import _wrote, manifest_summary
from xmc_core.corpus.importers import ingest
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.neural_loop import LoopState, TrainingLoop
from xmc_core.serving.registry.listing import RegistryListing, VersionEntry, format_listing
from xmc_core.wording import counted


def test_counted() -> None:
    assert counted(1, "document") == "1 document"
    assert counted(0, "document") == "0 documents"
    assert counted(1204, "doc") == "1,204 docs"
    assert counted(2, "index", "indices") == "2 indices"


def test_messages_of_one_thing_say_it_in_the_singular(tmp_path: Path, capsys) -> None:
    src = write_lines(tmp_path / "src", labels="a\n", texts="the only doc\n")
    summary = manifest_summary(ingest("lines", src, tmp_path / "ds"))
    assert "train: 1 doc, 1 label assignment, 1 label" in summary.splitlines()
    _wrote(1, tmp_path / "out.jsonl")
    assert (
        capsys.readouterr().out == f"wrote predictions of 1 document to {tmp_path / 'out.jsonl'}\n"
    )
    version = VersionEntry(
        version="1", created="2026-11-01T00:00:00+00:00", run_id=None, family="xr_linear",
        aliases=["champion"], promotion={}, rollback={},
    )  # fmt: skip
    listing = RegistryListing(
        tracking_uri="sqlite:///m.db", model_name="xmc", alias="champion", holder="1",
        history=["1"], versions=[version],
    )  # fmt: skip
    assert format_listing(listing).splitlines()[0] == "xmc: 1 version (sqlite:///m.db)"
    cfg = XmlCnnConfig(epochs=1, patience=5)
    loop = TrainingLoop(logging.getLogger("t"), "t", cfg.epochs, 1, patience=cfg.patience)
    loop.passes = 1
    assert (
        loop.stop_reason(LoopState(epoch=1, best_epoch=1, best_score=0.5), False) == "all 1 epoch"
    )
