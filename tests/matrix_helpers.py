"""Tiny deterministic matrices whose right answer is known by hand: document ``i`` has the one
label ``i % n_labels`` and the one nonzero feature ``i % n_labels`` (weight 1), so every
document's best label is its own."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def separable(n_docs: int = 24, n_labels: int = 4) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``X`` csr (n_docs, n_labels + 2) and ``Y`` csr (n_docs, n_labels), float32; the two last
    feature columns are a constant 0.5 and zero (a column no document uses)."""
    rows = np.arange(n_docs)
    label = rows % n_labels
    Y = sp.csr_matrix((np.ones(n_docs), (rows, label)), shape=(n_docs, n_labels), dtype=np.float32)
    X = sp.hstack([Y, sp.csr_matrix(np.full((n_docs, 1), 0.5)), sp.csr_matrix((n_docs, 1))])
    return sp.csr_matrix(X, dtype=np.float32), Y


def write_npz(folder: Path, **matrices: sp.spmatrix) -> dict[str, Path]:
    """Each matrix as ``folder/NAME.npz`` (``scipy.sparse.save_npz``); returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, m in matrices.items():
        paths[name] = folder / f"{name}.npz"
        sp.save_npz(paths[name], m)
    return paths


def write_raw_npz(
    path: Path, shape: tuple[int, int], indptr: list[int], indices: list[int], fmt: str = "csr"
) -> Path:
    """A scipy-layout ``.npz`` holding exactly these arrays (values 1; nothing is checked, as in
    a hostile file)."""
    np.savez(
        path, format=np.array(fmt), shape=np.array(shape), indptr=np.array(indptr),
        indices=np.array(indices), data=np.ones(len(indices), np.float32),
    )  # fmt: skip
    return path


MIB = 1 << 20


def npy_bytes(array: np.ndarray) -> bytes:
    """``array`` as the bytes of a ``.npy`` file."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def deflated_zeros(dtype: str, n: int) -> tuple[bytes, bytes]:
    """A raw deflate stream of a ``.npy`` of ``n`` zeros of ``dtype``, and that ``.npy``'s
    header; made in milliseconds whatever ``n``: 1 MiB of zeros compressed after a full flush
    refers to nothing before it, so its ~1 KB block is repeated (``n * itemsize``: whole MiB)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": (n,)}
    )
    header, size = buffer.getvalue(), n * np.dtype(dtype).itemsize
    assert size % MIB == 0
    pack = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = pack.compress(header) + pack.flush(zlib.Z_FULL_FLUSH)
    block = pack.compress(bytes(MIB)) + pack.flush(zlib.Z_FULL_FLUSH)
    return head + block * (size // MIB) + pack.flush(zlib.Z_FINISH), header


def write_bomb_npz(
    path: Path, name: str, dtype: str, n: int, others: dict[str, np.ndarray] | None = None,
    crc: bool = True,
) -> Path:  # fmt: skip
    """An ``.npz`` whose member ``name`` is :func:`deflated_zeros` (``n`` zeros), beside
    ``others`` stored as ``np.savez`` stores them. ``crc``: the bomb's real CRC-32 (False: 0,
    for sizes whose CRC takes seconds to compute; only a full inflation would notice)."""
    payload, header = deflated_zeros(dtype, n)
    size = len(header) + n * np.dtype(dtype).itemsize
    check = zlib.crc32(header)
    for _ in range(size // MIB if crc else 0):
        check = zlib.crc32(bytes(MIB), check)
    members = [(f"{k}.npy", npy_bytes(v), 0) for k, v in (others or {}).items()]
    members.append((f"{name}.npy", payload, 8))
    out, central = bytearray(), bytearray()
    for member, data, method in members:
        inflated, crc32 = (len(data), zlib.crc32(data)) if method == 0 else (size, check * crc)
        fields = (method, 0, 0x21, crc32, 0xFFFFFFFF, 0xFFFFFFFF)  # 1980-01-01, ZIP64 sizes
        raw, extra = member.encode(), struct.pack("<HHQQ", 1, 16, inflated, len(data))
        central += struct.pack("<IHHH", 0x02014B50, 45, 45, 0)
        central += struct.pack("<HHHIII", *fields)
        central += struct.pack("<HHHHHII", len(raw), len(extra), 0, 0, 0, 0, len(out))
        central += raw + extra
        local = struct.pack("<IHH", 0x04034B50, 45, 0) + struct.pack("<HHHIII", *fields)
        out += local + struct.pack("<HH", len(raw), len(extra)) + raw + extra + data
    count = len(members)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), len(out), 0)
    path.write_bytes(bytes(out + central + end))
    return path
