"""Prefect's result storage for the stages' cache records, verified before Prefect reads them.

Prefect deserializes a cache record with whatever serializer the record itself names: a
``prefect-result.json`` rewritten to the pickle serializer (or to a JSON serializer naming its
own decoder, or a JSON payload naming a class to build) would run code in the next flow run.
:class:`CacheRecords` is the only way the flows let Prefect read a record, and it hands Prefect
bytes it built itself, never the file's:

* only ``<stage>/<key>/prefect-result.json`` under the artifacts folder is served as a cache
  record, and only a file named by a hex key directly in the artifacts folder as a flow's
  return value (:func:`verified_flow_result`: Prefect reads one back when the API answered a
  flow run's final state change with its own state, e.g. after its SQLite was busy);
* the file must be a regular file (not a link, FIFO or device) of at most
  :data:`MAX_RECORD_BYTES` (a flow's value: :data:`MAX_FLOW_RESULT_BYTES`), parse as plain
  JSON (no hooks), name exactly Prefect's default JSON serializer and no expiration (the rest
  of its metadata is not passed on);
* a record's payload must be the path of the folder the record lies in: every cached task
  returns its artifact folder, so the record is derivable from where it lies and needs no
  digest or key; a flow's value must hold no object Prefect's JSON decoder would build.

Anything else raises :class:`RecordRejected`; Prefect takes that as a cache miss, the task runs,
``produce`` reuses the finished artifact folder (or recomputes it if missing) and Prefect writes
the record again, atomically here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from pathlib import Path, PurePath
from typing import Any
from uuid import UUID, uuid4

from prefect import get_run_logger
from prefect.exceptions import MissingContextError
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultRecord, ResultRecordMetadata
from prefect.serializers import JSONSerializer
from prefect.states import State

from xmc_core.errors import ArtifactError
from xmc_core.storage.atomic import write_bytes
from xmc_core.storage.work_dir import RESULT_FILE, WorkDir

MAX_RECORD_BYTES = 64 * 1024
"""A record holds one path (~600 bytes); anything much larger is not one of ours."""

JSON_SERIALIZER = JSONSerializer().model_dump(mode="json")
"""The only serializer a record may name: Prefect's JSON with its default hooks."""

MAX_FLOW_RESULT_BYTES = 16 * 2**20
"""A flow's return value (paths, counts, metrics, a summary) is kilobytes."""

FLOW_RESULT_NAME = re.compile(r"[0-9a-f]{16,64}")
"""The file name of a result with no cache key (Prefect's key: ``uuid4().hex``)."""

DECODED_KEYS = frozenset({"__class__", "__exc_type__"})
"""Keys that make Prefect's JSON decoder build an object (any class the file names)."""


def results_root(work_dir: str | Path) -> Path:
    """Prefect's result storage: the artifacts folder itself (a stage task's cache record is
    ``<stage>/<key>/prefect-result.json`` inside the artifact folder it points at, so deleting
    an artifact also forgets its cache entry)."""
    return WorkDir.of(work_dir).artifacts


class RecordRejected(ValueError):
    """A cache record that is not exactly what a stage writes (Prefect: a cache miss)."""

    def __init__(
        self, path: Path, problem: str, missing: bool = False, what: str = "cache record"
    ) -> None:
        self.path, self.problem, self.missing = path, problem, missing
        then = (
            "the stage runs again and reuses its artifact folder if finished"
            if what == "cache record"
            else "Prefect cannot read it back; the run's artifacts hold its outcome"
        )
        super().__init__(f"{path}: {what} rejected ({problem}); {then}")


class CacheRecords(LocalFileSystem):
    """Result storage rooted at ``<work_dir>/artifacts`` that serves only verified records."""

    _block_type_name = "XMC Cache Records"
    _block_type_slug = "xmc-cache-records"

    def read_path(self, path: str, _sync: bool | None = None) -> bytes:
        """A record Prefect may deserialize, rebuilt from the verified file at ``path``."""
        try:
            root, block = self._root(), self._block_document_id
            if is_flow_result(root, path):
                return verified_flow_result(root, path, block)
            return verified_record(root, path, block)
        except RecordRejected as exc:
            if not exc.missing:  # a plain cache miss is not worth a line
                _logger().warning("%s", exc)
            raise

    async def aread_path(self, path: str) -> bytes:
        return self.read_path(path)

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:
        """Write ``content`` atomically (Prefect's own write leaves a torn file on a crash),
        replacing a link at ``path`` rather than the file it points to. A flow's value that
        could not be served back (not plain JSON) is refused here, when written."""
        if is_flow_result(self._root(), path):
            try:  # a failed run's exception is kept as Prefect wrote it, never served
                _check_flow_value(Path(path), content, keep_exception=True)
            except RecordRejected as exc:
                raise ValueError(
                    f"{path}: a flow's value must be plain JSON (strings, numbers, lists, "
                    f"dicts) to be read back: {exc.problem}"
                ) from None
        target = self._resolve_path(str(PurePath(path).parent)) / PurePath(path).name
        if not target.is_symlink() and target.exists() and not target.is_file():
            raise ValueError(f"Path {target} already exists and is not a file.")
        return str(write_bytes(target, content, follow_links=False))

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self.write_path(path, content)

    def _root(self) -> Path:
        if not self.basepath:
            raise ValueError("CacheRecords needs a basepath (the artifacts folder)")
        return Path(self.basepath).expanduser().resolve()


def record_storage(work_dir: str | Path) -> CacheRecords:
    """The result storage of a flow writing under ``work_dir`` (created if missing), saved as
    block ``xmc-cache-records/cache-<hash of the folder>`` on the Prefect API: Prefect takes
    only saved blocks as a flow's or task's result storage."""
    root = results_root(Path(work_dir).resolve())
    root.mkdir(parents=True, exist_ok=True)
    storage = CacheRecords(basepath=str(root))
    name = "cache-" + hashlib.sha256(str(root).encode()).hexdigest()[:16]
    storage.save(name, overwrite=True, _sync=True)
    return storage


def verified_record(root: Path, key: str, block_id: UUID | None = None) -> bytes:
    """The record at ``key`` (``<stage>/<key>/prefect-result.json``, relative to the artifacts
    folder ``root`` or absolute inside it) as bytes Prefect may read, or :class:`RecordRejected`.
    ``block_id``: the saved storage block the rebuilt record names."""
    path = _record_path(root, key)
    record = _plain_json(path, _read_small_file(path))
    folder = str(path.parent)
    if record["result"] != folder:
        named = repr(record["result"])[:200]
        raise RecordRejected(path, f"it names {named}, not its own folder")
    metadata = ResultRecordMetadata(
        storage_key=str(path), serializer=JSONSerializer(), storage_block_id=block_id
    )
    return ResultRecord(metadata=metadata, result=folder).serialize()


def is_flow_result(root: Path, key: str) -> bool:
    """Whether ``key`` names a flow's return value: a hex-named file directly in ``root``."""
    given = PurePath(key)
    full = given if given.is_absolute() else PurePath(root) / given
    return full.parent == PurePath(root) and FLOW_RESULT_NAME.fullmatch(full.name) is not None


def flow_result_file(root: Path, key: str) -> Path:
    """The file of the flow result ``key`` names (see :func:`is_flow_result`), or
    :class:`RecordRejected`."""
    if not is_flow_result(root, key):
        problem = "not a flow's result file of the artifacts folder"
        raise RecordRejected(Path(root) / key, problem, what="flow result")
    return Path(root) / PurePath(key).name


def verified_flow_result(root: Path, key: str, block_id: UUID | None = None) -> bytes:
    """The flow's return value stored at ``key`` (see :func:`is_flow_result`) as a record
    Prefect may read, or :class:`RecordRejected`: the file must be plain JSON (the flows write
    their values with Prefect's JSON serializer, :func:`flows.runtime.configured`) holding no
    object Prefect's decoder would build. The record names the JSON serializer whatever the
    API's metadata names (a pickle there is never used)."""
    path = flow_result_file(root, key)
    value = flow_value(path)
    metadata = ResultRecordMetadata(
        storage_key=str(path), serializer=JSONSerializer(), storage_block_id=block_id
    )
    return ResultRecord(metadata=metadata, result=value).serialize()


def stored_flow_result(work_dir: str | Path, value: Any) -> ResultRecord[Any]:
    """``value`` written under ``work_dir`` as a flow's return value (JSON, as
    :func:`flows.runtime.configured` flows write theirs): the data of a State a flow returns, so
    that the API's copy of that state names a file :class:`CacheRecords` serves back."""
    storage = record_storage(work_dir)
    metadata = ResultRecordMetadata(
        storage_key=uuid4().hex,  # Prefect's key for a result with no cache key
        serializer=JSONSerializer(),
        storage_block_id=storage._block_document_id,
    )
    record = ResultRecord(metadata=metadata, result=value)
    storage.write_path(metadata.storage_key, record.serialize_result())  # the API holds the rest
    return record


def flow_value(path: Path) -> Any:
    """The plain JSON value of a flow's result file, or :class:`RecordRejected`."""
    return _check_flow_value(path, _read_small_file(path, MAX_FLOW_RESULT_BYTES))


def _check_flow_value(path: Path, data: bytes, keep_exception: bool = False) -> Any:
    """``data`` (a flow's result file at ``path``) decoded as plain JSON holding nothing
    Prefect's decoder builds, or :class:`RecordRejected`. ``keep_exception``: a failed run's
    exception as Prefect's JSON serializer writes it is taken as it is (to be kept, not read)."""
    flow = "flow result"
    if len(data) > MAX_FLOW_RESULT_BYTES:
        raise RecordRejected(path, f"larger than {MAX_FLOW_RESULT_BYTES} bytes", what=flow)
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        problem = "not a JSON value (written by another serializer?)"
        raise RecordRejected(path, problem, what=flow) from None
    if keep_exception and isinstance(value, dict) and "__exc_type__" in value:
        return value
    built = _decoded_key(value)
    if built is not None:
        problem = f"it holds {built!r}: an object Prefect's decoder would build"
        raise RecordRejected(path, problem, what=flow)
    return value


def _decoded_key(value: Any) -> str | None:
    """The first key in ``value`` that Prefect's JSON decoder acts on, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            hit = DECODED_KEYS.intersection(item)
            if hit:
                return min(hit)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def returned_folders(state: State[Any], work_dir: str | Path, stage: str) -> list[str]:
    """The finished ``stage`` folders under ``work_dir`` a flow run returned (e.g. the matcher
    deployment's checkpoints), read from its result file with no Prefect deserializer.

    Prefect's ``state.result()`` would unpickle a result file holding ``{"data": ...}`` whatever
    serializer the API names. Raises ``ArtifactError`` naming the file for anything but a JSON
    list of such folders."""
    root = results_root(Path(work_dir).resolve())
    data = state.data
    if isinstance(data, ResultRecord):  # run in this process: the value itself
        source, value = "the flow run's result", data.result
    elif isinstance(data, ResultRecordMetadata) and data.storage_key:
        try:  # the key absolute, or relative to the storage
            path = flow_result_file(root, data.storage_key)
            source, value = str(path), flow_value(path)
        except RecordRejected as exc:
            raise ArtifactError(exc.path, f"not a result file to read ({exc.problem})") from None
    else:
        raise ArtifactError(root, f"the flow run left no result to read ({type(data).__name__})")
    bad = (
        [value]
        if not isinstance(value, list)
        else [v for v in value if not _finished_folder(v, root / stage)]
    )
    if bad:
        raise ArtifactError(
            source, f"{str(bad[0])[:200]!r} is not a finished {stage} folder of {root}"
        )
    return value


def _finished_folder(value: object, parent: Path) -> bool:
    return isinstance(value, str) and Path(value).parent == parent and Path(value).is_dir()


def _record_path(root: Path, key: str) -> Path:
    given = PurePath(key)
    full = Path(given) if given.is_absolute() else root / given
    try:
        parts = full.relative_to(root).parts
    except ValueError:
        raise RecordRejected(full, f"outside the artifacts folder {root}") from None
    if len(parts) != 3 or parts[2] != RESULT_FILE or {".", ".."} & set(parts):
        missing = not os.path.lexists(full)  # nothing there: a plain miss, not worth a warning
        raise RecordRejected(full, f"not <stage>/<key>/{RESULT_FILE}", missing=missing)
    return full


def _read_small_file(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """The bytes of a regular file, refusing links, FIFOs, devices and files over ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise RecordRejected(path, "no such file", missing=True) from None
    except OSError as exc:
        raise RecordRejected(path, f"cannot be opened as a plain file: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise RecordRejected(path, "not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise RecordRejected(path, f"larger than {limit} bytes")
    return data


def _plain_json(path: Path, data: bytes) -> dict[str, Any]:
    """The record parsed with no hooks: serializer and payload checked, payload decoded."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise RecordRejected(path, "not whole JSON (torn or truncated?)") from None
    metadata = record.get("metadata") if isinstance(record, dict) else None
    if not isinstance(metadata, dict) or not isinstance(record.get("result"), str):
        raise RecordRejected(path, "not a Prefect result record")
    serializer = metadata.get("serializer")
    if serializer != JSON_SERIALIZER:
        kind = serializer.get("type") if isinstance(serializer, dict) else serializer
        raise RecordRejected(path, f"serializer {kind!r} is not Prefect's plain JSON")
    if metadata.get("expiration") is not None:
        raise RecordRejected(path, "it sets an expiration")
    try:
        record["result"] = json.loads(record["result"])
    except ValueError:
        raise RecordRejected(path, "its payload is not JSON") from None
    return record


def _logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    """The task run's logger (the Prefect UI shows it), else this module's."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)
