"""Approximate-nearest-neighbour indexes (faiss, imported here only).

:class:`AnnIndex` holds a faiss inner-product index over unit vectors (HNSW, or an exact flat
index) and the id of each of its rows: label ids for the index over label vectors (labels
without a vector are left out), training-document rows for the instance kNN. It is saved as
faiss's own serialization, a uint8 array in an ``.npz`` (loaded with ``allow_pickle=False``),
whose sha256 the caller keeps in ``meta.json`` and checks before faiss reads a byte of it
(:meth:`AnnIndex.from_arrays`).

faiss parallelises with OpenMP: :func:`faiss_threads` sets its threads for a block (``threads``
of the config; torch has its own pool). The HNSW graph is always built on one thread: faiss
inserts nodes concurrently on more, in an order that differs from run to run, so two builds
would give two graphs; queries are read-only and deterministic on any number of threads.
"""

from __future__ import annotations

import hashlib
import logging
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np

from xmc_core.errors import ArtifactError
from xmc_core.threads import scoped_threads

if TYPE_CHECKING:
    from pathlib import Path

    from xmc_core.families.astec.config import AstecConfig


def faiss_module() -> Any:
    """``faiss``, imported on first use (only the astec family needs it; its loader's lines
    about the SIMD builds it tried are kept out of the log)."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    import faiss

    return faiss


def faiss_threads(threads: int | None) -> AbstractContextManager[None]:
    """faiss's OpenMP threads set to ``threads`` for the block (None: left as they are)."""
    if threads is None:
        return nullcontext()
    faiss = faiss_module()
    return scoped_threads(faiss.omp_get_max_threads, faiss.omp_set_num_threads, threads)


def digest(blob: np.ndarray) -> str:
    """Hex sha256 of an index's serialized bytes."""
    return hashlib.sha256(np.ascontiguousarray(blob).tobytes()).hexdigest()


class AnnIndex:
    """An inner-product index over unit vectors: ``index`` (faiss, ``ntotal`` rows) and
    ``ids`` int64 (ntotal,), what each row is (a label id, a training document)."""

    def __init__(self, index: Any, ids: np.ndarray, ef_search: int) -> None:
        if index.ntotal != len(ids):
            raise ValueError(f"index of {index.ntotal} vectors for {len(ids)} ids")
        self.index, self.ids, self.ef_search = index, ids.astype(np.int64), ef_search

    @classmethod
    def build(cls, vectors: np.ndarray, ids: np.ndarray, cfg: AstecConfig) -> AnnIndex:
        """Index ``vectors`` float32 (m, D) (unit rows) with ``ids`` int64 (m,)."""
        faiss = faiss_module()
        dim = vectors.shape[1]
        if cfg.ann == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.ef_construction
        with faiss_threads(1):
            index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        return cls(index, ids, cfg.ef_search)

    @property
    def kind(self) -> str:
        return "hnsw" if hasattr(self.index, "hnsw") else "flat"

    def search(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` rows of largest inner product with each row of ``Q`` float32 (n, D), best
        first: (similarities float32 (n, k), their ids int64 (n, k); -1 where the index has
        fewer than ``k`` rows to give)."""
        if hasattr(self.index, "hnsw"):
            self.index.hnsw.efSearch = self.ef_search
        k = max(1, min(k, self.index.ntotal))
        sims, rows = self.index.search(np.ascontiguousarray(Q, dtype=np.float32), k)
        ids = np.where(rows >= 0, self.ids[np.maximum(rows, 0)], -1)
        return sims.astype(np.float32), ids.astype(np.int64)

    def arrays(self) -> tuple[dict[str, np.ndarray], str]:
        """(``index`` (faiss's serialization, uint8) and ``ids`` for an ``.npz``, the
        serialization's sha256)."""
        blob = faiss_module().serialize_index(self.index)
        return {"index": blob, "ids": self.ids}, digest(blob)

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], sha256: str, ef_search: int, path: Path
    ) -> AnnIndex:
        """The index saved by :meth:`arrays` (``path``: its file, for errors); its bytes
        must hash to ``sha256`` before faiss parses them."""
        blob, ids = arrays["index"], arrays["ids"]
        if blob.dtype != np.uint8 or blob.ndim != 1 or digest(blob) != sha256:
            raise ArtifactError(
                path, "the ANN index does not match its sha256 in meta.json", "re-train the model"
            )
        try:
            index = faiss_module().deserialize_index(blob)
        except RuntimeError as err:
            raise ArtifactError(
                path, f"faiss cannot read the ANN index ({err})", "re-train the model"
            ) from err
        if index.ntotal != len(ids) or ids.ndim != 1:
            problem = f"index of {index.ntotal} vectors, ids {ids.shape}"
            raise ArtifactError(path, problem, "re-train the model")
        return cls(index, ids, ef_search)
