"""The landing folder: corpus drops to take in, and where they go afterwards.

A *drop* is one sub-folder directly under the landing folder, holding the split files of one
import format (see :mod:`xmc_core.corpus.importers`)::

    lines    train_texts.txt, train_labels.txt, test_texts.txt, test_labels.txt [+ ids, map]
    xc       train.txt, test.txt
    jsonl    train.jsonl, test.jsonl     (csv, parquet alike)

plus, optionally, ``drop.yaml`` (or ``drop.json``) with ``format`` and the reading options
``id_column``, ``text_column``, ``labels_column``, ``label_sep`` and ``policies`` (``{on_empty,
on_unlabeled}``); without ``format`` it is detected from the file names.

Policies of the landing folder:

* Entries whose name starts with ``.`` or ``_`` or ends with ``.tmp``/``.partial`` are ignored
  (in progress, :data:`IGNORED_NAMES`): copy a drop in under such a name, then rename it, and
  it is taken in whole.
* A plain file directly in the landing folder is not a drop: it is quarantined, with a reason
  telling to put the split files in a sub-folder.
* Refused (quarantined with the reason): an entry that is a symbolic link (never followed), a
  name with a path separator, ``..``, a control character, invalid UTF-8 or more than
  ``MAX_NAME_BYTES`` bytes; a drop holding a symbolic link that leads outside the drop, or a
  special file (FIFO, socket, device); an invalid ``drop.yaml``; an unknown or ambiguous format.
* Nothing is deleted or modified: :func:`quarantine` and :func:`archive` *move* (rename) an entry
  into ``<dir>/<UTC time>-<name>/`` (unique per call), and the quarantine folder gets a
  ``REASON.txt``. Both folders must be on the landing folder's filesystem (a move across file
  systems would copy then delete: refused).
* Doc ids are the upsert key of :mod:`xmc_core.intake.merge`. A drop without ids gets the
  importer's positional ids (``train-00000001``, ...), which would collide with the next drop's;
  :func:`ingest_drop` therefore prefixes such ids with the first 12 hex digits of the drop's
  content fingerprint (``3f2a...:train-00000001``): the same drop taken in twice keeps its ids,
  two different drops never share one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
import yaml
from pydantic import ValidationError

from xmc_core.corpus.importers import FORMATS, IngestOptions, ingest
from xmc_core.corpus.reader import Corpus
from xmc_core.corpus.schema import SPLITS, Manifest, Policies
from xmc_core.errors import InputError
from xmc_core.intake.merge import prefix_doc_ids

FORMAT_FILES: dict[str, tuple[str, ...]] = {
    "lines": ("train_texts.txt", "train_labels.txt", "test_texts.txt", "test_labels.txt"),
    "xc": ("train.txt", "test.txt"),
    "jsonl": ("train.jsonl", "test.jsonl"),
    "csv": ("train.csv", "test.csv"),
    "parquet": ("train.parquet", "test.parquet"),
}
SPEC_FILES = ("drop.yaml", "drop.yml", "drop.json")
SPEC_KEYS = ("format", "id_column", "text_column", "labels_column", "label_sep", "policies")
MAX_SPEC_BYTES = 64 * 1024
MAX_NAME_BYTES = 128
HIDDEN_PREFIXES = (".", "_")
IN_PROGRESS_SUFFIXES = (".tmp", ".partial")
IGNORED_NAMES = (
    f"names starting with {' or '.join(map(repr, HIDDEN_PREFIXES))} "
    f"or ending in {' or '.join(map(repr, IN_PROGRESS_SUFFIXES))}"
)
"""The entries a scan leaves alone (drops being copied in), for people (the docs' lifecycle page,
REASON.txt)."""
_POLICY_OPTION = re.compile(r"(ingest with )?--(on-empty|on-unlabeled) (\w+)")
_COLUMN_OPTION = re.compile(r"--(text-column|labels-column|id-column|label-sep)")


@dataclass(frozen=True)
class Drop:
    """One entry of the landing folder: a drop to ingest, or (``problem`` set) one to refuse."""

    name: str
    path: Path
    format: str | None
    options: IngestOptions = field(default_factory=IngestOptions)
    problem: InputError | None = None

    @property
    def ok(self) -> bool:
        """Whether the drop can be ingested (else quarantine it with ``str(problem)``)."""
        return self.problem is None


def is_ignored(name: str) -> bool:
    """Hidden or in-progress names: ``.x``, ``_x``, ``x.tmp``, ``x.partial``."""
    return name.startswith(HIDDEN_PREFIXES) or name.endswith(IN_PROGRESS_SUFFIXES)


def name_problem(name: str) -> str | None:
    """Why ``name`` is not acceptable as a landing-folder entry, or None."""
    if name in ("", ".", "..") or "/" in name or "\\" in name or ".." in name:
        return "the name contains a path separator or '..'"
    if any(unicodedata.category(c) == "Cs" for c in name):
        return "the name is not valid UTF-8"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "the name contains a control character"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"the name is longer than {MAX_NAME_BYTES} bytes"
    return None


def scan_drops(landing: Path) -> list[Drop]:
    """Every entry of ``landing`` that is not ignored, oldest first (by mtime, then name).

    Never follows a symbolic link and never modifies anything; a missing folder has no drops.
    """
    landing = Path(landing)
    if not landing.is_dir():
        return []
    root = landing.resolve()
    found: list[tuple[int, str, Drop]] = []
    with os.scandir(root) as entries:
        for entry in entries:
            if is_ignored(entry.name):
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
            except FileNotFoundError:  # gone since the listing
                continue
            found.append((mtime, entry.name, examine(root, entry.name)))
    return [drop for _, _, drop in sorted(found, key=lambda t: (t[0], t[1]))]


def examine(root: Path, name: str) -> Drop:
    """Check entry ``name`` of landing folder ``root`` (resolved) and read its drop spec."""
    path = root / name
    try:
        _check_entry(root, path)
        _check_contents(path)
        fmt, options = read_spec(path)
        return Drop(name, path, fmt or detect_format(path), options)
    except InputError as err:
        return Drop(name, path, None, IngestOptions(), err)
    except OSError as err:
        problem = InputError(path, f"cannot be read ({err})", "check it and its permissions")
        return Drop(name, path, None, IngestOptions(), problem)
    except Exception as err:  # one odd drop must not stop the others: refuse it, say why
        return Drop(name, path, None, IngestOptions(), unexpected_problem(path, "examined", err))


def unexpected_problem(path: Path, step: str, err: Exception) -> InputError:
    """An InputError for ``path`` wrapping an error nobody planned for (type and message)."""
    return InputError(
        path,
        f"could not be {step}: unexpected {type(err).__name__}: {err}",
        "check what the message names (a link, an odd file, damaged data), else report it",
    )


def _check_entry(root: Path, path: Path) -> None:
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise InputError(
            path,
            f"is a symbolic link (to {os.readlink(path)!r}); links are never followed",
            "copy the files themselves into a sub-folder of the landing folder",
        )
    problem = name_problem(path.name)
    if problem:
        raise InputError(path, problem, "rename it to a short, plain name (letters, digits, -_)")
    if stat.S_ISREG(mode):
        raise InputError(
            path,
            "a single file in the landing folder, not a drop folder",
            "put the split files of one import format (e.g. train.jsonl and test.jsonl) in a "
            "sub-folder of the landing folder (see docs/lifecycle/registry.md, 'Retraining on new "
            "corpora') and drop that folder",
        )
    if not stat.S_ISDIR(mode):
        raise InputError(path, "not a regular folder", "drop a folder of split files")
    if path.resolve().parent != root:
        raise InputError(path, "resolves outside the landing folder", "drop a real folder")


def _check_contents(drop: Path) -> None:
    """Refuse links that lead out of ``drop`` and special files; never follows a link out."""
    top = drop.resolve()

    def fail(err: OSError) -> None:
        raise InputError(err.filename, f"cannot be read ({err.strerror})", "fix permissions")

    for folder, dirs, files in os.walk(drop, onerror=fail, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                target = _link_target(path)
                if target != top and top not in target.parents:
                    raise InputError(
                        path,
                        f"is a symbolic link to {target}, outside the drop",
                        "copy the file into the drop instead of linking to it",
                    )
            elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise InputError(
                    path, "is not a regular file (FIFO, socket or device)", "remove it"
                )


def _link_target(link: Path) -> Path:
    """Where symbolic link ``link`` finally leads; InputError for a loop of links."""
    try:
        return link.resolve()
    except (RuntimeError, OSError) as err:  # Python 3.11 raises RuntimeError for a loop
        raise InputError(
            link,
            f"is a symbolic link loop ({os.readlink(link)!r} leads back to itself: {err})",
            "replace the link by the file it should point to, or remove it",
        ) from err


def read_spec(drop: Path) -> tuple[str | None, IngestOptions]:
    """``format`` and IngestOptions from the drop's ``drop.yaml``/``drop.json`` (if any)."""
    present = [drop / n for n in SPEC_FILES if (drop / n).exists()]
    if not present:
        return None, IngestOptions()
    if len(present) > 1:
        names = ", ".join(p.name for p in present)
        raise InputError(drop, f"several drop specs ({names})", "keep only one of them")
    path = present[0]
    raw = _load_spec(path)
    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise InputError(path, f"unknown keys {unknown}", f"use only: {', '.join(SPEC_KEYS)}")
    fmt = raw.pop("format", None)
    if fmt is not None and fmt not in FORMATS:
        raise InputError(
            path, f"unknown format {fmt!r}", f"use one of: {', '.join(sorted(FORMATS))}"
        )
    try:
        return fmt, IngestOptions(**raw)
    except ValidationError as err:
        raise InputError(path, f"invalid options:\n{err}", "fix the keys named above") from err


def _load_spec(path: Path) -> dict:
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise InputError(path, f"larger than {MAX_SPEC_BYTES} bytes", "keep only the options")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
        raise InputError(path, f"cannot be parsed: {err}", "fix the syntax") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(path, "top level must be a mapping", "write `format: jsonl` etc.")
    return dict(data)


def detect_format(folder: Path) -> str:
    """The import format whose split files ``folder`` holds; InputError if none or several."""
    names = {p.name for p in Path(folder).iterdir()}
    complete = [f for f, need in FORMAT_FILES.items() if all(n in names for n in need)]
    if len(complete) == 1:
        return complete[0]
    if complete:
        raise InputError(
            folder,
            f"the files match several formats ({', '.join(complete)})",
            f"keep the split files of one format, or name it in drop.yaml (format: {complete[0]})",
        )
    partial = {f: [n for n in need if n not in names] for f, need in FORMAT_FILES.items()}
    started = {f: missing for f, missing in partial.items() if len(missing) < len(FORMAT_FILES[f])}
    if started:
        fmt, missing = min(started.items(), key=lambda kv: len(kv[1]))
        raise InputError(
            folder,
            f"looks like format {fmt!r} but {', '.join(missing)} is missing",
            "a drop needs the train and the test split files of its format",
        )
    shown = ", ".join(sorted(names)[:20]) or "nothing"
    expected = "; ".join(f"{f}: {' + '.join(need)}" for f, need in FORMAT_FILES.items())
    raise InputError(
        folder, f"no known split files (the folder holds: {shown})", f"provide {expected}"
    )


def ingest_drop(drop: Drop, dest: Path, policies_override: Policies | None = None) -> Manifest:
    """Ingest ``drop`` into the new dataset folder ``dest``; returns its manifest.

    ``policies_override`` (e.g. the retrain config's ``on_empty``/``on_unlabeled``) applies
    unless the drop's ``drop.yaml`` sets its own ``policies``. Positional ids are prefixed (see
    the module docstring). Raises the drop's ``problem``, or the importer's InputError; the
    drop is never modified and ``dest`` appears only when complete.
    """
    if drop.problem is not None:
        raise drop.problem
    if drop.format is None:
        raise ValueError(f"drop {drop.name} has no format")
    # again: the entry may have been swapped (e.g. for a link out of the landing folder) or
    # changed since the scan
    _check_entry(drop.path.parent.resolve(), drop.path)
    _check_contents(drop.path)
    options = drop.options
    if policies_override is not None and "policies" not in options.model_fields_set:
        options = options.model_copy(update={"policies": policies_override})
    dest = Path(dest)
    if dest.exists():
        raise InputError(dest, "destination already exists", "choose a new folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # not ".NAME.xxxxxxxx.tmp", which xmc_core.storage.atomic removes as a dead writer's temporary
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-in.", suffix=".tmp", dir=dest.parent))
    try:
        try:
            manifest = ingest(drop.format, drop.path, staging / "raw", options)
        except InputError as err:
            raise InputError(err.path, err.problem, drop_fix(err.fix), err.row) from None
        if not has_positional_ids(staging / "raw"):
            os.replace(staging / "raw", dest)
            return manifest
        return prefix_doc_ids(staging / "raw", dest, f"{manifest.fingerprint[:12]}:")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def drop_fix(fix: str) -> str:
    """An importer's ``fix``, said for a drop: the ``xmc ingest`` options it names become the
    drop's ``drop.yaml`` settings (``--on-unlabeled drop`` -> ``policies: {on_unlabeled:
    drop}``, ``--text-column`` -> ``text_column``); a fix naming none is returned as it is."""
    said = _POLICY_OPTION.sub(
        lambda m: f"{'set ' if m[1] else ''}policies: {{{m[2].replace('-', '_')}: {m[3]}}}", fix
    )
    said = _COLUMN_OPTION.sub(lambda m: m[1].replace("-", "_"), said)
    return fix if said == fix else f"{said} in the drop's drop.yaml"


def has_positional_ids(corpus_dir: Path) -> bool:
    """Whether every doc id is an importer's positional id (``{split}-`` + 8 digits)."""
    corpus = Corpus(corpus_dir)
    for split in SPLITS:
        for ref in corpus.partitions(split):
            ids = corpus.read_partition(ref, ["doc_id"]).column("doc_id")
            if not pc.all(pc.match_substring_regex(ids, rf"^{split}-[0-9]{{8}}$")).as_py():
                return False
    return True
