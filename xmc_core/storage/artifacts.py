"""Saving and loading artifact folders: ``meta.json`` + arrays, checksummed, no pickle.

``meta.json`` records the class that wrote the folder, the library version, the format version,
free-form fields (config, shapes) and the sha256 of every file; loading checks all of them, so a
truncated, edited or foreign folder fails with a clear error naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from xmc_core.errors import ArtifactError
from xmc_core.storage.atomic import atomic_file, finish_interrupted_swap, write_json
from xmc_core.storage.npz_guard import check_npz, read_sparse
from xmc_core.storage.paths import file_kind
from xmc_core.version import __version__

if TYPE_CHECKING:  # pyarrow is imported where strings are read or written: it costs ~40 MB
    import pyarrow as pa

ARTIFACT_FORMAT = 1
RECREATE = "re-create it"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_meta(folder: Path, cls: str, fields: dict[str, Any]) -> None:
    """Write ``meta.json`` last, with checksums of every other file in ``folder`` and of the
    ``meta.json`` of every sub-folder already saved there (``parts``), so that the checksum of
    this ``meta.json`` covers the whole artifact tree (it is the artifact's cache fingerprint)."""
    entries = sorted(folder.iterdir())
    files = {p.name: sha256_file(p) for p in entries if p.is_file() and p.name != "meta.json"}
    parts = {
        p.name: sha256_file(p / "meta.json")
        for p in entries
        if p.is_dir() and (p / "meta.json").is_file()
    }
    meta = {
        "class": cls,
        "format": ARTIFACT_FORMAT,
        "xmc_version": __version__,
        "files": files,
        **({"parts": parts} if parts else {}),
        **fields,
    }
    write_json(folder / "meta.json", meta)


def read_meta(folder: str | Path, cls: str, verify: bool = True) -> dict[str, Any]:
    """Read and check ``meta.json``: class, format version and (optionally) file checksums."""
    folder = Path(folder)
    finish_interrupted_swap(folder)
    path = folder / "meta.json"
    if not path.is_file():
        raise ArtifactError(path, "meta.json is missing", "the folder is not a saved xmc artifact")
    _listed_file(folder, path.name)  # not a link out of the folder
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ArtifactError(path, f"meta.json is not valid JSON ({err})", "re-create it") from err
    if not isinstance(meta, dict):
        raise ArtifactError(
            path, f"holds a JSON {type(meta).__name__}, not an object", "re-create it"
        )
    if meta.get("class") != cls:
        raise ArtifactError(path, f"holds a {meta.get('class')!r}, expected {cls!r}")
    if meta.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError(
            path,
            f"artifact format {meta.get('format')!r}, this xmc reads {ARTIFACT_FORMAT}",
            "re-create it with this version of xmc",
        )
    if verify:
        files, parts = meta.get("files", {}), meta.get("parts", {})
        if not all(_is_digest_map(m) for m in (files, parts)):
            raise ArtifactError(
                path, "'files'/'parts' are not maps of name to sha256", "re-create it"
            )
        listed = [*files.items(), *((f"{n}/meta.json", d) for n, d in parts.items())]
        checked = [(_listed_file(folder, name), digest) for name, digest in listed]
        for fpath, digest in checked:
            if sha256_file(fpath) != digest:
                raise ArtifactError(fpath, "checksum mismatch: file is corrupt or was edited")
    return meta


def _listed_file(folder: Path, name: str) -> Path:
    """``folder / name``, an entry of its ``meta.json``, when it is a regular file inside
    ``folder`` (a link that stays inside counts); else an ArtifactError, before anything is
    read: no ``..``, absolute path or link may reach a file elsewhere, and no FIFO, device or
    folder is opened."""
    path, root = folder / name, os.path.realpath(folder)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        problem = f"lists {name!r}, which is outside the folder ({real})"
        raise ArtifactError(folder / "meta.json", problem, "re-create it")
    try:
        mode = os.stat(real).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise ArtifactError(path, "file listed in meta.json is missing", "re-create it") from None
    if not stat.S_ISREG(mode):
        problem = f"listed in meta.json as a file, but it is {file_kind(path, mode)}"
        raise ArtifactError(path, problem, "re-create it")
    return path


@contextmanager
def meta_fields(folder: str | Path) -> Iterator[None]:
    """Turn a missing or mistyped ``meta.json`` field met inside the block (KeyError,
    TypeError, ValueError, pydantic's ValidationError) into an ArtifactError naming the file."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as err:
        problem = f"missing or invalid field ({type(err).__name__}: {err})"
        raise ArtifactError(Path(folder) / "meta.json", problem, "re-create it") from err


def _is_digest_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def save_csr(path: Path, matrix: sp.spmatrix | sp.sparray) -> None:
    """Save a CSR matrix as ``.npz`` atomically."""
    with atomic_file(path) as tmp, open(tmp, "wb") as fh:
        sp.save_npz(fh, sp.csr_matrix(matrix), compressed=False)


PART_ENTRIES = 1 << 24
"""Entries per range of rows :func:`save_csr_rows` makes at a time (128 MB of int32 and
float32)."""


def save_csr_rows(
    path: Path,
    shape: tuple[int, int],
    indptr: np.ndarray,
    rows: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
    part_entries: int = PART_ENTRIES,
) -> None:
    """The file :func:`save_csr` writes, byte for byte, of a csr matrix given a range of rows
    at a time: ``rows(a, b)`` returns the indices (``indptr``'s dtype) and float32 data of rows
    a..b-1, sorted within each row. Holds one range of about ``part_entries`` entries at a time,
    never the whole matrix (each range is asked for twice: its indices, then its data)."""
    cuts = np.searchsorted(indptr, np.arange(part_entries, indptr[-1], part_entries), "right")
    bounds = np.unique(np.concatenate([[0], cuts - 1, [indptr.size - 1]]))
    ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    nnz = int(indptr[-1])
    with (
        atomic_file(path) as tmp,
        open(tmp, "wb") as fh,
        zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf,
    ):  # the members, their order and headers as scipy's save_npz through numpy's savez
        _npy_parts(zf, "indices", indptr.dtype, nnz, (rows(a, b)[0] for a, b in ranges))
        for name, value in (("indptr", indptr), ("format", b"csr"), ("shape", shape)):
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fid:
                np.lib.format.write_array(fid, np.asanyarray(value), allow_pickle=False)
        _npy_parts(zf, "data", np.dtype(np.float32), nnz, (rows(a, b)[1] for a, b in ranges))


def _npy_parts(
    zf: zipfile.ZipFile, name: str, dtype: np.dtype, size: int, parts: Iterator[np.ndarray]
) -> None:
    """One ``.npy`` member of ``size`` values of ``dtype``, written from ``parts`` in turn."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False}
    written = 0
    with zf.open(f"{name}.npy", "w", force_zip64=True) as fid:
        np.lib.format.write_array_header_1_0(fid, {**header, "shape": (size,)})
        for part in parts:
            fid.write(np.ascontiguousarray(part, dtype=dtype).data)
            written += part.size
    if written != size:
        raise ValueError(f"{name}: {written} values written, {size} announced")


def load_csr(path: Path) -> sp.csr_matrix:
    """Load a CSR matrix saved by :func:`save_csr` (never unpickles; sizes, compression and
    indices checked first: :func:`~xmc_core.storage.npz_guard.read_sparse`)."""
    return read_sparse(path, ArtifactError, RECREATE, RECREATE, stored_only=True)


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Save dense arrays as ``.npz`` atomically."""
    with atomic_file(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Load arrays saved by :func:`save_arrays` (``allow_pickle=False``; sizes and compression
    checked first: :func:`~xmc_core.storage.npz_guard.check_npz`)."""
    check_npz(path, ArtifactError, RECREATE, stored_only=True)
    try:
        with np.load(path, allow_pickle=False) as data:
            return _Arrays(path, {k: data[k] for k in data.files})
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise ArtifactError(path, f"cannot read arrays ({err})", RECREATE) from err


class _Arrays(dict[str, np.ndarray]):
    """The arrays of one ``.npz``; a missing name raises an ArtifactError naming the file."""

    def __init__(self, path: Path, arrays: dict[str, np.ndarray]) -> None:
        super().__init__(arrays)
        self.path = path

    def __missing__(self, name: str) -> np.ndarray:
        raise ArtifactError(self.path, f"holds no array {name!r} (has {sorted(self)})")


def save_strings(path: Path, values: pa.Array | list[str]) -> None:
    """Save a list of strings as a one-column Parquet file atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"value": pa.array(values, type=pa.large_string())})
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def load_strings(path: Path) -> pa.Array:
    """Load strings saved by :func:`save_strings`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).column("value").combine_chunks()
    except (OSError, KeyError, pa.ArrowException) as err:
        raise ArtifactError(path, f"cannot read string list ({err})", "re-create it") from err
