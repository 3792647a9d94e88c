"""``.npz`` files read without trusting them (a user's matrices, a model folder's arrays).

Before anything is decompressed or allocated, :func:`check_npz` reads what the file would
become from its headers alone: the zip's declared size of every member (``zipfile`` never
inflates a member past it) and each ``.npy`` header's shape and dtype (numpy allocates from
them). Their total must fit the memory budget; a model folder's arrays must also be stored
uncompressed, as xmc writes them, so a load inflates nothing. :func:`check_compressed` then
checks a CSR/CSC matrix's ``indptr`` and ``indices`` before scipy's or numba's kernels read
them (an index out of range there is a segfault or heap corruption, not an exception).

The memory budget (:func:`memory_budget`) is ``$XMC_MEMORY_BUDGET_GB`` when set, else half the
memory of this machine (its cgroup limit when lower).
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xmc_core.errors import InputError, XmcError
from xmc_core.progress import byte_size
from xmc_core.storage import npy_lock

npy_lock.install()  # every .npy header this process reads: one thread at a time (see npy_lock)

MEMORY_BUDGET_ENV = "XMC_MEMORY_BUDGET_GB"
MEMORY_SHARE = 0.5
"""The share of the machine's memory the budget is when ``$XMC_MEMORY_BUDGET_GB`` is unset."""
CGROUP_LIMIT = Path("/sys/fs/cgroup/memory.max")
REBUILD_FIX = "rebuild the matrix with scipy.sparse (matrix.check_format(full_check=True) finds it)"

Error = Callable[[str | Path, str, str], XmcError]
"""The error to raise (``InputError`` for a user's file, ``ArtifactError`` for a saved one),
called with the file, the problem and the fix."""


@dataclass(frozen=True)
class MemoryBudget:
    """The most memory one read (or the arrays a training run holds) may take, and why."""

    limit: int
    source: str

    def __str__(self) -> str:
        return f"the memory budget of {byte_size(self.limit)} ({self.source})"

    def fix(self, need: int) -> str:
        """How to give a read of ``need`` bytes the memory, if the machine has it."""
        gb = math.ceil(need / 1e9)
        return f"on a machine with that memory, raise the budget: {MEMORY_BUDGET_ENV}={gb} (GB)"


def machine_memory() -> int:
    """Bytes of memory this process can have: physical memory, or its cgroup limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = CGROUP_LIMIT.read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def memory_budget() -> MemoryBudget:
    """``$XMC_MEMORY_BUDGET_GB`` (GB, powers of 1000) when set, else half of
    :func:`machine_memory`."""
    given = os.environ.get(MEMORY_BUDGET_ENV)
    if given is None:
        total = machine_memory()
        share = f"{MEMORY_SHARE:.0%} of this machine's {byte_size(total)}"
        return MemoryBudget(int(total * MEMORY_SHARE), share)
    try:
        gb = float(given)
    except ValueError:
        gb = float("nan")
    if not 0 < gb < float("inf"):
        raise InputError(
            f"${MEMORY_BUDGET_ENV}",
            f"must be a number of GB above 0, got {given[:50]!r}",
            f"set it like {MEMORY_BUDGET_ENV}=8, or unset it (half this machine's memory)",
        )
    return MemoryBudget(int(gb * 1e9), f"${MEMORY_BUDGET_ENV}={given}")


@dataclass(frozen=True)
class NpzMember:
    """One member of an ``.npz``: ``name`` without ``.npy``; ``inflated``: its declared
    uncompressed bytes; ``compressed``: whether it is deflated (or otherwise packed); for a
    ``.npy`` member, ``shape`` and ``dtype`` from its header (None otherwise)."""

    name: str
    inflated: int
    compressed: bool
    shape: tuple[int, ...] | None = None
    dtype: np.dtype | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the array its header declares (0 for a member that is not ``.npy``)."""
        if self.shape is None or self.dtype is None:
            return 0
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize


def npz_members(path: Path, error: Error, fix: str) -> dict[str, NpzMember]:
    """Every member of the ``.npz`` at ``path``, read from the zip's directory and the first
    bytes of each ``.npy`` (nothing more is decompressed). ``fix``: the fix of an unreadable
    file."""
    members = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if name in members:  # np.load would read one of them, uncounted
                    raise error(path, f"member {info.filename!r} appears twice", fix)
                shape, dtype = None, None
                if info.filename.endswith(".npy"):
                    with archive.open(info) as fh:
                        shape, dtype = _npy_header(fh)
                compressed = info.compress_type != zipfile.ZIP_STORED
                members[name] = NpzMember(name, info.file_size, compressed, shape, dtype)
    except (OSError, EOFError, ValueError, KeyError, RuntimeError, NotImplementedError) as err:
        raise error(path, f"not a readable .npz file ({err})", fix) from err
    except (zipfile.BadZipFile, zlib.error) as err:
        raise error(path, f"not a .npz file ({err})", fix) from err
    return members


def _npy_header(fh: zipfile.ZipExtFile) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(fh)
    read = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(version)
    if read is None:
        raise ValueError(f".npy format version {version} is not read here")
    shape, _, dtype = read(fh)
    return tuple(int(n) for n in shape), dtype


def check_npz(
    path: Path, error: Error, fix: str, stored_only: bool = False
) -> dict[str, NpzMember]:
    """The members of ``path`` (:func:`npz_members`), refused with ``error`` when what they
    would inflate to exceeds :func:`memory_budget`, when a ``.npy`` header declares more data
    than its member holds or Python objects, or (``stored_only``: a model folder's file) when a
    member is compressed. ``fix``: the fix of a file that is not what it should be."""
    members = npz_members(path, error, fix)
    for m in members.values():
        if m.dtype is not None and m.dtype.hasobject:
            raise error(path, f"array {m.name!r} holds Python objects (pickle)", fix)
        if m.nbytes > m.inflated:
            problem = (
                f"array {m.name!r} declares shape {m.shape} ({byte_size(m.nbytes)}), more than "
                f"its member holds ({byte_size(m.inflated)})"
            )
            raise error(path, problem, fix)
        if stored_only and m.compressed:
            problem = (
                f"member {m.name!r} is compressed ({byte_size(m.inflated)} once inflated); xmc "
                "stores its arrays uncompressed, so this file was not written by xmc"
            )
            raise error(path, problem, fix)
    total, budget = sum(m.inflated for m in members.values()), memory_budget()
    if total > budget.limit:
        problem = f"its arrays take {byte_size(total)} once read, over {budget}"
        raise error(path, problem, budget.fix(total))
    return members


def check_compressed(
    fmt: str,
    shape: tuple[int, int],
    arrays: dict[str, np.ndarray],
    where: str | Path,
    error: Error,
    fix: str = REBUILD_FIX,
) -> None:
    """Refuse a ``fmt`` ("csr" or "csc") matrix of ``shape`` whose ``data``, ``indices`` and
    ``indptr`` scipy's kernels cannot read safely: ``indptr`` (n_rows + 1,) must rise from 0 to
    the number of stored entries, every index must be a column in ``[0, n_cols)`` (for CSC:
    the transpose). ``where``: the file or argument named by ``error``, with ``fix``."""
    major, minor = shape if fmt == "csr" else shape[::-1]
    line, cross = ("row", "column") if fmt == "csr" else ("column", "row")
    indptr, indices, data = arrays["indptr"], arrays["indices"], arrays["data"]
    for name, kinds in (("indptr", "iu"), ("indices", "iu"), ("data", "biuf")):
        a = arrays[name]
        if a.ndim != 1 or a.dtype.kind not in kinds:
            raise error(where, f"{name} is a {a.dtype} array of shape {a.shape}", fix)
    if min(shape) < 0 or len(indptr) != major + 1:
        problem = f"indptr has {len(indptr)} entries; the shape {shape} needs {major + 1}"
        raise error(where, problem, fix)
    if len(indices) != len(data):
        raise error(where, f"{len(indices)} indices but {len(data)} values", fix)
    if indptr[0] != 0 or indptr[-1] != len(indices):
        problem = (
            f"indptr runs from {indptr[0]} to {indptr[-1]}; it must run from 0 to the "
            f"{len(indices)} stored entries"
        )
        raise error(where, problem, fix)
    falls = np.flatnonzero(indptr[1:] < indptr[:-1])
    if falls.size:
        raise error(where, f"indptr decreases at {line} {falls[0]} (0-based)", fix)
    if indices.size and (indices.min() < 0 or indices.max() >= minor):
        at = int(np.flatnonzero((indices < 0) | (indices >= minor))[0])
        row = int(np.searchsorted(indptr, at, side="right")) - 1
        problem = (
            f"{line} {row} (0-based) holds {cross} index {indices[at]}, outside 0..{minor - 1} "
            f"(the shape is {shape})"
        )
        raise error(where, problem, fix)


@dataclass(frozen=True)
class SparseHeader:
    """What a scipy ``.npz`` declares: ``fmt`` ("csr", "coo", ...) and ``shape``."""

    fmt: str
    shape: tuple[int, int]


def sparse_header(
    arrays: dict[str, np.ndarray], path: Path, error: Error, fix: str
) -> SparseHeader:
    """The format and shape a scipy ``.npz`` declares in its ``format`` and ``shape`` arrays
    (read with ``np.load``, after :func:`check_npz`)."""
    if "format" not in arrays or "shape" not in arrays:
        raise error(path, "holds no scipy sparse matrix", fix)
    fmt, shape = arrays["format"], arrays["shape"]
    if (
        fmt.ndim != 0
        or fmt.dtype.kind not in "SU"
        or shape.shape != (2,)
        or shape.dtype.kind not in "iu"
    ):
        raise error(path, "holds no scipy sparse matrix (bad 'format' or 'shape')", fix)
    name = fmt.item()
    name = name.decode("ascii", "replace") if isinstance(name, bytes) else name
    n_rows, n_cols = (int(n) for n in shape)
    if n_rows < 0 or n_cols < 0:
        raise error(path, f"declares the shape ({n_rows}, {n_cols})", fix)
    return SparseHeader(name[:20], (n_rows, n_cols))


SPARSE_KEYS = ("format", "shape", "data", "indices", "indptr")
SPARSE_FORMATS = ("csr", "csc")


def sparse_arrays(
    path: Path,
    keys: tuple[str, ...],
    error: Error,
    fix: str,
    *,
    unreadable: str = "cannot read the sparse matrix",
    format_fix: str | None = None,
    stored_only: bool = False,
) -> tuple[SparseHeader, dict[str, np.ndarray], dict[str, NpzMember]]:
    """The header of the CSR or CSC matrix in the scipy ``.npz`` at ``path``, its arrays among
    ``keys`` and its members, read only after :func:`check_npz` passed (``error``,
    ``stored_only``: as there; ``fix``: of a file that is not a sparse matrix, said after
    ``unreadable`` when the file cannot be read; ``format_fix``: of another sparse format)."""
    members = check_npz(path, error, fix, stored_only)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in keys if k in data.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
        raise error(path, f"{unreadable} ({err})", fix) from err
    header = sparse_header(arrays, path, error, fix)
    if header.fmt not in SPARSE_FORMATS:
        problem = f"holds a {header.fmt.upper()} matrix; CSR or CSC is needed"
        raise error(path, problem, format_fix or fix)
    return header, arrays, members


def read_sparse(
    path: Path, error: Error, fix: str, index_fix: str = REBUILD_FIX, stored_only: bool = False
) -> sp.csr_matrix:
    """The CSR or CSC matrix of the scipy ``.npz`` at ``path``, as CSR, read only after
    :func:`check_npz` and :func:`check_compressed` passed (``error``, ``stored_only``: as
    there; ``fix``: of a file that is not a sparse matrix, ``index_fix``: of bad indices)."""
    header, arrays, _ = sparse_arrays(path, SPARSE_KEYS, error, fix, stored_only=stored_only)
    missing = [k for k in SPARSE_KEYS if k not in arrays]
    if missing:
        raise error(path, f"holds no {', '.join(missing)} array", fix)
    check_compressed(header.fmt, header.shape, arrays, path, error, index_fix)
    cls = sp.csr_matrix if header.fmt == "csr" else sp.csc_matrix
    parts = (arrays["data"], arrays["indices"], arrays["indptr"])
    return sp.csr_matrix(cls(parts, shape=header.shape))
