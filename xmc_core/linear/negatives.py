"""Negatives from outside the tree's own levels: an external matcher's shortlists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import scipy.sparse as sp

from xmc_core.storage.artifacts import load_csr, meta_fields, read_meta, save_csr, write_meta


@dataclass(frozen=True)
class MatcherShortlists:
    """Per ranker level ``t``: csr (n_docs, K_t) binary, the extra parents each training
    document joins at that level (None where a level has none, e.g. level 0); ``nnz``-wise
    the matcher's hard negatives (see ``transformer.ranker.matcher_parent_shortlists``).
    ``matcher_level``: the matcher tree level the shortlists come from."""

    levels: list[sp.csr_matrix | None]
    matcher_level: int

    def level(self, t: int) -> sp.csr_matrix | None:
        """The extra parents of ranker level ``t``, or None."""
        return self.levels[t] if t < len(self.levels) else None

    def save(self, folder: str | Path) -> None:
        """``level-<t>.npz`` for each level that has shortlists, and ``meta.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        listed = [t for t, m in enumerate(self.levels) if m is not None]
        n_docs = next((m.shape[0] for m in self.levels if m is not None), 0)
        for t in listed:
            save_csr(folder / f"level-{t}.npz", self.levels[t])
        write_meta(
            folder, "MatcherShortlists",
            {
                "levels": listed, "n_levels": len(self.levels),
                "nnz": [int(self.levels[t].nnz) for t in listed],  # type: ignore[union-attr]
                "n_docs": n_docs, "matcher_level": self.matcher_level,
            },
        )  # fmt: skip

    @classmethod
    def load(cls, folder: str | Path) -> MatcherShortlists:
        """Read a folder written by :meth:`save` (checksums verified)."""
        folder = Path(folder)
        meta = read_meta(folder, "MatcherShortlists")
        with meta_fields(folder):
            listed = {int(t) for t in meta["levels"]}
            n_levels = int(meta.get("n_levels", max(listed, default=-1) + 1))
            matcher_level = int(meta["matcher_level"])
        levels = [
            load_csr(folder / f"level-{t}.npz") if t in listed else None for t in range(n_levels)
        ]
        return cls(levels, matcher_level)
