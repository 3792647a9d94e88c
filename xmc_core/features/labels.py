"""The label index: label names <-> columns of the label matrix ``Y``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from xmc_core.storage.artifacts import load_strings, read_meta, save_strings, write_meta


class LabelIndex:
    """Label names and their column ids: sorted (code-point order), or, for a warm start
    (:meth:`extended`), the base's names first, then the new ones sorted."""

    def __init__(self, names: pa.Array | Sequence[str]) -> None:
        self.names = pa.array(names, type=pa.large_string())

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def from_label_lists(cls, batches: Iterable[pa.ListArray | pa.ChunkedArray]) -> LabelIndex:
        """Every distinct label in ``batches`` of ``list<string>`` columns."""
        uniques = [pc.unique(_flat(b).cast(pa.large_string())) for b in batches]
        merged = pc.unique(pa.chunked_array(uniques, type=pa.large_string()))
        return cls(pc.take(merged, pc.sort_indices(merged)))

    @classmethod
    def extended(
        cls, base: LabelIndex, batches: Iterable[pa.ListArray | pa.ChunkedArray]
    ) -> LabelIndex:
        """``base``'s labels keeping their ids, then those of ``batches`` it lacks, sorted: a
        warm start's index, in which a label of the champion keeps its column."""
        seen = cls.from_label_lists(batches).names
        new = seen.filter(pc.invert(pc.is_in(seen, value_set=base.names)))
        return cls(pa.concat_arrays([base.names, new]))

    def encode(self, labels: pa.ListArray | pa.ChunkedArray) -> tuple[sp.csr_matrix, int]:
        """Binary label matrix csr (n_docs, n_labels) float32 and the count of unknown labels."""
        if isinstance(labels, pa.ChunkedArray):
            labels = labels.combine_chunks()
        offsets = labels.offsets.to_numpy()
        flat = labels.flatten().cast(pa.large_string())
        ids = pc.index_in(flat, value_set=self.names).fill_null(-1).to_numpy(zero_copy_only=False)
        rows = np.repeat(np.arange(len(labels)), np.diff(offsets))
        known = ids >= 0
        y = sp.csr_matrix(
            (np.ones(int(known.sum()), dtype=np.float32), (rows[known], ids[known])),
            shape=(len(labels), len(self)),
        )
        y.sum_duplicates()
        y.data[:] = 1.0
        return y, int((~known).sum())

    def decode(self, ids: np.ndarray) -> list[str]:
        """Label names of column ids."""
        return self.names.take(pa.array(np.asarray(ids, dtype=np.int64))).to_pylist()

    def save(self, folder: str | Path) -> None:
        """Write ``labels.parquet`` and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_strings(folder / "labels.parquet", self.names)
        write_meta(folder, "LabelIndex", {"n_labels": len(self)})

    @classmethod
    def load(cls, folder: str | Path) -> LabelIndex:
        """Read a folder written by :meth:`save`."""
        folder = Path(folder)
        read_meta(folder, "LabelIndex")
        return cls(load_strings(folder / "labels.parquet"))


def _flat(batch: pa.ListArray | pa.ChunkedArray) -> pa.Array:
    if isinstance(batch, pa.ChunkedArray):
        batch = batch.combine_chunks()
    return batch.flatten()
