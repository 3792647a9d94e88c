"""The property every ingest must have, whatever its input.

Either the dataset is written and reads back consistent with its manifest, or an InputError
names an input file (and a row when it gives one) and says "fix:"; nothing else escapes, the
destination does not exist and no temporary folder is left beside it; the input is unchanged.
"""

from __future__ import annotations

import math
import tempfile
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, settings

from tests.reliability.fuzz_model import Accepts, Fails
from xmc_core.corpus.importers import IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import SPLITS, Manifest
from xmc_core.errors import InputError

if TYPE_CHECKING:
    from tests.reliability.conftest import FuzzStats

MAX_MESSAGE = 1500
"""A clear error fits on a screen: values are quoted in part, never whole 1 MB documents."""
STAT_KEYS = ("dropped_empty", "dropped_unlabeled", "kept_unlabeled", "duplicate_labels_removed")


def fuzz(examples: int) -> settings:
    """Deterministic, deadline-free settings with ``examples`` inputs per test."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


@contextmanager
def source_folder(files: dict[str, bytes]) -> Iterator[Path]:
    """A fresh work folder holding ``src/`` with ``files``; yields the work folder."""
    with tempfile.TemporaryDirectory(prefix="xmc-fuzz-") as tmp:
        work = Path(tmp)
        (work / "src").mkdir()
        for name, data in files.items():  # a name may hold a folder: train.parquet/part-0.parquet
            (work / "src" / name).parent.mkdir(parents=True, exist_ok=True)
            (work / "src" / name).write_bytes(data)
        yield work


def check_ingest(
    stats: FuzzStats,
    fmt: str,
    files: dict[str, bytes],
    options: IngestOptions,
    want: Fails | Accepts | None = None,
    inputs: set[str] | None = None,
) -> InputError | Manifest:
    """Ingest ``files`` as ``fmt`` and check the property (and ``want``, when known).

    An error must name one of ``inputs`` (default: the names in ``files``), e.g. a deleted file.
    """
    with source_folder(files) as work:
        src, dest = work / "src", work / "ds"
        outcome = "tracebacks"
        try:
            try:
                manifest = ingest(fmt, src, dest, options)
            except InputError as err:
                outcome = "partial_outputs"
                assert sorted(p.name for p in work.iterdir()) == ["src"], "output left behind"
                outcome = "unclear_errors"
                names = {part for n in set(files) | (inputs or set()) for part in Path(n).parts}
                check_clear(err, names, want)
                outcome = "clear_errors"
                return err
            except Exception as err:
                raise AssertionError(
                    f"{type(err).__name__} escaped ingest({fmt!r}):\n{traceback.format_exc()}"
                ) from err
            outcome = "partial_outputs"
            assert sorted(p.name for p in work.iterdir()) == ["ds", "src"], "temporary left"
            outcome = "wrong_results"
            assert not isinstance(want, Fails), f"accepted, but must fail: {want}"
            check_dataset(dest, manifest, want)
            outcome = "accepted"
            return manifest
        finally:
            stats.record(fmt, outcome)
            after = {str(p.relative_to(src)): p.read_bytes() for p in src.rglob("*") if p.is_file()}
            assert after == files, "input changed"


def check_clear(err: InputError, names: set[str], want: Fails | Accepts | None) -> None:
    """The error names an input file (and its row, if any) and carries a fix."""
    msg = str(err)
    assert err.path is not None, msg
    name = Path(err.path).name
    assert name in msg and (name in names or name == "src"), msg
    assert msg.count("\n  fix: ") == 1 and err.fix.strip() and err.problem.strip(), msg
    assert "Traceback" not in msg, msg
    assert len(msg) <= MAX_MESSAGE, f"{len(msg)} characters: {msg[:300]}..."
    if err.row is not None:
        assert err.row >= 1 and f"row {err.row}:" in msg, msg
    assert not isinstance(want, Accepts), f"must be accepted, got: {msg}"
    if isinstance(want, Fails):
        assert (name, err.row) == (want.file, want.row), f"want {want}, got: {msg}"


def check_dataset(dest: Path, manifest: Manifest, want: Fails | Accepts | None) -> None:
    """The dataset reads back, consistent with its manifest and the label policy."""
    corpus = Corpus(dest)
    assert corpus.manifest == manifest
    labels: dict[str, Counter[str]] = {}
    for split in SPLITS:
        rows = corpus.read_split(split).to_pylist()
        stats = manifest.splits[split]
        assert len(rows) == stats.rows > 0
        ids = [r["doc_id"] for r in rows]
        assert len(set(ids)) == len(ids) and all(i.strip() for i in ids)
        labels[split] = Counter(lab for r in rows for lab in r["labels"])
        for r in rows:
            assert len(set(r["labels"])) == len(r["labels"])
            assert all(lab and lab == lab.strip() for lab in r["labels"])
            _check_content(corpus, r)
        assert stats.label_assignments == labels[split].total()
        assert stats.distinct_labels == len(labels[split])
        if isinstance(want, Accepts):
            assert [_row(corpus, r) for r in rows] == want.rows[split]
            assert {k: getattr(stats, k) for k in STAT_KEYS} == {
                k: want.stats[split][k] for k in STAT_KEYS
            }
    assert manifest.n_labels == len(labels["train"])
    assert manifest.n_labels_total == len(set(labels["train"]) | set(labels["test"]))
    if isinstance(want, Accepts) and want.label_texts is not None:
        got = corpus.label_texts().to_pylist()
        assert [(r["label"], r["text"]) for r in got] == want.label_texts


def _check_content(corpus: Corpus, r: dict) -> None:
    if corpus.kind == "text":
        assert isinstance(r["text"], str) and r["text"] and not r["text"].isspace()
        return
    d = corpus.manifest.n_features
    assert r["text"] is None and len(r["feature_ids"]) == len(r["feature_values"]) > 0
    assert all(0 <= i < d for i in r["feature_ids"])
    assert all(math.isfinite(v) for v in r["feature_values"])


def _row(corpus: Corpus, r: dict) -> tuple:
    if corpus.kind == "text":
        return (r["doc_id"], r["text"], r["labels"])
    return (r["doc_id"], None, r["labels"], r["feature_ids"], r["feature_values"])
