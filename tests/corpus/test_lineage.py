"""The lineage of a corpus: started by an import or the synthetic corpus, kept when a dataset
folder is written over in place, grown by landing drops (merge and replace), and derived for a
manifest written before lineages were recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.corpus.test_intake import A_TEST, A_TRAIN, B_TEST, B_TRAIN, folders, lines_drop
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.lineage import describe, lineage_name, lineage_of
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import Lineage, Policies
from xmc_core.corpus.synthetic import SyntheticSpec
from xmc_core.corpus.synthetic_dataset import write_synthetic_dataset
from xmc_core.errors import InputError
from xmc_core.intake.drops import take_in
from xmc_core.intake.merge import merge_corpora

TINY = SyntheticSpec(n_train=40, n_test=10, n_domains=2, topics_per_domain=2, labels_per_topic=3)


def imported(tmp_path: Path, name: str, train: list, test: list, overwrite: bool = False) -> Path:
    """``xmc ingest lines`` of ``train``/``test`` into ``tmp_path/datasets/name``."""
    src = lines_drop(tmp_path / "src", str(len(list(tmp_path.glob("src/*")))), train, test)
    dest = tmp_path / "datasets" / name
    ingest("lines", src, dest, IngestOptions(overwrite=overwrite))
    return dest


def forget_lineage(folder: Path) -> None:
    """Make ``folder``'s manifest one of an xmc that recorded no lineage."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["lineage"]
    path.write_text(json.dumps(manifest))


def test_an_import_starts_a_lineage_an_overwrite_keeps_it(tmp_path: Path) -> None:
    first = imported(tmp_path, "reuters", A_TRAIN, A_TEST)
    root = Corpus(first).fingerprint
    assert lineage_of(first) == Lineage(name="reuters", root=root, drops=0)
    again = imported(tmp_path, "reuters", B_TRAIN, B_TEST, overwrite=True)  # a nightly export
    assert Corpus(again).fingerprint != root and lineage_of(again) == lineage_of(first)
    synthetic = tmp_path / "synthetic-x1-seed0-0123"
    write_synthetic_dataset(synthetic, TINY)
    assert lineage_of(synthetic).name == "synthetic"
    assert (
        lineage_name("my data/2026 (v2)") == "my-data-2026-v2" and lineage_name("..") == "dataset"
    )


def test_drops_grow_the_lineage_of_the_corpus_they_follow(tmp_path: Path) -> None:
    f = folders(tmp_path)
    lines_drop(f.landing, "reuters-2026-11", A_TRAIN, A_TEST)
    first = take_in(f, "merge", Policies(), rows_per_group=2)
    assert first.corpus is not None
    started = Lineage(name="reuters-2026-11", root=Corpus(first.corpus).fingerprint, drops=0)
    assert lineage_of(first.corpus) == started  # no corpus before: named after its first drop
    lines_drop(f.landing, "b", B_TRAIN, B_TEST)
    merged = take_in(f, "merge", Policies(), rows_per_group=2)
    assert lineage_of(merged.corpus) == started.model_copy(update={"drops": 1})
    lines_drop(f.landing, "c", A_TRAIN, B_TEST)
    replaced = take_in(f, "replace", Policies(), rows_per_group=2)  # a new snapshot, same stream
    assert lineage_of(replaced.corpus) == started.model_copy(update={"drops": 2})
    assert (
        describe(lineage_of(replaced.corpus))
        == f"reuters-2026-11 (from {started.root[:12]}, +2 drops)"
    )

    base = imported(tmp_path, "reuters", A_TRAIN, A_TEST)
    g = folders(tmp_path / "other")
    lines_drop(g.landing, "b", B_TRAIN, B_TEST)
    grown = take_in(g, "merge", Policies(), rows_per_group=2, base_dataset=base)
    assert lineage_of(grown.corpus) == lineage_of(base).model_copy(update={"drops": 1})


def test_a_manifest_without_lineage_gets_one_derived(tmp_path: Path) -> None:
    base = imported(tmp_path, "reuters", A_TRAIN, A_TEST)
    drop = imported(tmp_path, "drop", B_TRAIN, B_TEST)
    merge_corpora(base, [drop], tmp_path / "3f2a9c1b0d4e5f6a", rows_per_group=2)
    for folder in (base, tmp_path / "3f2a9c1b0d4e5f6a"):
        forget_lineage(folder)
    root = Lineage(name="reuters", root=Corpus(base).fingerprint)
    assert lineage_of(base) == root
    assert lineage_of(tmp_path / "3f2a9c1b0d4e5f6a") == root.model_copy(update={"drops": 1})
    base.rename(tmp_path / "moved")  # the base it names is gone: it starts its own
    merged = Corpus(tmp_path / "3f2a9c1b0d4e5f6a")
    assert lineage_of(merged.path) == Lineage(name="3f2a9c1b0d4e5f6a", root=merged.fingerprint)
    manifest = json.loads((drop / "manifest.json").read_text())
    (drop / "manifest.json").write_text(
        json.dumps({**manifest, "lineage": None, "fingerprint": "x"})
    )
    with pytest.raises(InputError, match="no lineage can be derived") as err:
        lineage_of(drop)  # a manifest xmc did not write
    assert Path(err.value.path).name == "manifest.json" and err.value.fix
