"""The parts of an ensemble model: the members' encoders side by side (:class:`EnsembleEncoder`)
and the members' rankers, whose scores are combined (:class:`EnsembleRanker`).

The combination rules are defined in :class:`~xmc_core.families.ensemble.config.EnsembleConfig` and
computed by :func:`combine_scores`. Both parts save their members into sub-folders
(``blocks/0/``, ``members/0/``, ...) whose ``meta.json`` names each member's class, loaded
through :func:`~xmc_core.model.registry.part_class`: no pickle, and a folder never chooses what
code is imported.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from xmc_core.config import PredictConfig
from xmc_core.errors import ArtifactError
from xmc_core.evaluation.ranking import top_k
from xmc_core.families.ensemble.config import EnsembleConfig
from xmc_core.model import registry
from xmc_core.model.contract import Encoder, Ranker
from xmc_core.storage.artifacts import meta_fields, read_meta, sha256_file, write_meta

BLOCKS_DIR = "blocks"
MEMBERS_DIR = "members"
_PARTS_CLASS = "EnsembleParts"
"""The ``meta.json`` of ``blocks/`` and ``members/``: the checksums of each part's meta.json,
so that the ensemble's own ``meta.json`` covers every member's files."""


def combine_scores(
    scores: Sequence[sp.csr_matrix], rule: str, temperature: float = 1.0
) -> sp.csr_matrix:
    """The members' scores, each csr (n_docs, n_labels) holding a member's ranked labels only,
    combined by ``rule`` (``average``, ``rank_average``, ``softmax_average`` at
    ``temperature``; defined in :class:`~xmc_core.families.ensemble.config.EnsembleConfig`): csr
    (n_docs, n_labels) float32, a label no member ranked absent."""
    if not scores:
        raise ValueError("no member scores to combine")
    total = _member_part(scores[0], rule, temperature)
    for S in scores[1:]:
        total = total + _member_part(S, rule, temperature)
    out = sp.csr_matrix(total / len(scores), dtype=np.float32)
    out.sort_indices()
    return out


def _member_part(S: sp.csr_matrix, rule: str, temperature: float) -> sp.csr_matrix:
    """One member's term of the sum: its scores, 1 / rank, or its row softmax (float64)."""
    S = sp.csr_matrix(S, dtype=np.float64, copy=True)
    S.sum_duplicates()
    if rule == "average":
        return S
    if rule == "rank_average":
        ranked = top_k(S)
        starts = np.repeat(ranked.offsets[:-1], np.diff(ranked.offsets))
        ranks = np.arange(len(ranked.cols), dtype=np.float64) - starts + 1
        out = sp.csr_matrix((1.0 / ranks, ranked.cols, ranked.offsets), shape=S.shape)
        out.sort_indices()
        return out
    if rule == "softmax_average":
        return _row_softmax(S, temperature)
    raise ValueError(f"unknown combine rule {rule!r}")


def _row_softmax(S: sp.csr_matrix, temperature: float) -> sp.csr_matrix:
    """Each row's softmax over its stored entries at ``temperature`` (empty rows stay empty)."""
    lengths = np.diff(S.indptr)
    rows = np.repeat(np.arange(S.shape[0]), lengths)
    full = lengths > 0
    best = np.zeros(S.shape[0])
    if S.nnz:
        best[full] = np.maximum.reduceat(S.data, S.indptr[:-1][full])
    e = np.exp((S.data - best[rows]) / temperature)
    z = np.bincount(rows, weights=e, minlength=S.shape[0])
    return sp.csr_matrix((e / z[rows], S.indices.copy(), S.indptr.copy()), shape=S.shape)


def top_k_scores(S: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """``S`` csr (n, L) cut to each row's ``k`` best entries (ties: the lower label id)."""
    ranked = top_k(S, k)
    out = sp.csr_matrix((ranked.vals, ranked.cols, ranked.offsets), shape=S.shape)
    out.sort_indices()
    return out


def part_digest(part: Any) -> str:
    """sha256 of a saved part's ``meta.json``, which holds its class, settings and the
    checksum of every file: two parts with the same digest are the same part."""
    with tempfile.TemporaryDirectory(prefix="xmc-part-") as tmp:
        part.save(Path(tmp) / "part")
        return sha256_file(Path(tmp) / "part" / "meta.json")


def _save_parts(folder: Path, parts: Sequence[Any]) -> list[str]:
    """Each part into ``folder/<i>/``, then ``folder/meta.json``; returns their class names."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(parts):
        part.save(folder / str(i))
    write_meta(folder, _PARTS_CLASS, {"n_parts": len(parts)})
    return [type(part).__name__ for part in parts]


class EnsembleEncoder:
    """The members' encoders side by side: ``transform`` returns their encodings hstacked, one
    column block per distinct encoder. Members whose encoders are the same (e.g. three
    ``TfidfEncoder``) share one block, so an ensemble of TF-IDF members copies nothing.

    ``blocks``: the distinct encoders; ``member_blocks``: member i's block.
    """

    def __init__(self, blocks: Sequence[Encoder], member_blocks: Sequence[int]) -> None:
        if sorted(set(member_blocks)) != list(range(len(blocks))):
            raise ValueError(f"member blocks {list(member_blocks)} for {len(blocks)} blocks")
        self.blocks = list(blocks)
        self.member_blocks = [int(b) for b in member_blocks]
        self.uses_text = any(b.uses_text for b in self.blocks)

    @classmethod
    def of(cls, encoders: Sequence[Encoder]) -> EnsembleEncoder:
        """The encoder of members with ``encoders``, the same ones (:func:`part_digest`)
        sharing a block."""
        digests: dict[str, int] = {}
        blocks: list[Encoder] = []
        member_blocks = []
        for encoder in encoders:
            digest = part_digest(encoder)
            if digest not in digests:
                digests[digest] = len(blocks)
                blocks.append(encoder)
            member_blocks.append(digests[digest])
        return cls(blocks, member_blocks)

    def transform(self, X: sp.csr_matrix, texts: Any = None) -> sp.csr_matrix:
        """csr (n, sum of the blocks' widths): each block's encoding of TF-IDF rows ``X`` and
        ``texts``, in block order (one block: its encoding itself)."""
        return self._stack([block.transform(X, texts) for block in self.blocks])

    def stack_members(self, encodings: Sequence[sp.csr_matrix]) -> sp.csr_matrix:
        """The members' own encodings of the same documents (one per member) as this
        encoder's output: each block's from its first member."""
        firsts = [self.member_blocks.index(b) for b in range(len(self.blocks))]
        return self._stack([encodings[i] for i in firsts])

    @staticmethod
    def _stack(encodings: list[sp.csr_matrix]) -> sp.csr_matrix:
        return encodings[0] if len(encodings) == 1 else sp.hstack(encodings, format="csr")

    def block_columns(self, widths: Sequence[int]) -> list[tuple[int, int]]:
        """Member i's columns ``(start, stop)`` given each block's width."""
        ends = np.cumsum([0, *widths]).tolist()
        return [(ends[b], ends[b + 1]) for b in self.member_blocks]

    def save(self, folder: str | Path) -> None:
        """``blocks/<b>/`` (each distinct encoder) and ``meta.json`` (their classes, the
        member -> block map)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        names = _save_parts(folder / BLOCKS_DIR, self.blocks)
        fields = {"blocks": names, "member_blocks": self.member_blocks}
        write_meta(folder, "EnsembleEncoder", fields)

    @classmethod
    def load(cls, folder: str | Path, device: str = "auto") -> EnsembleEncoder:
        folder = Path(folder)
        meta = read_meta(folder, "EnsembleEncoder")
        read_meta(folder / BLOCKS_DIR, _PARTS_CLASS)
        with meta_fields(folder):
            names, member_blocks = list(meta["blocks"]), [int(b) for b in meta["member_blocks"]]
        classes = [registry.part_class(str(n), folder / "meta.json") for n in names]
        blocks = [c.load(folder / BLOCKS_DIR / str(b), device) for b, c in enumerate(classes)]
        try:
            return cls(blocks, member_blocks)
        except ValueError as err:
            raise ArtifactError(folder / "meta.json", f"inconsistent ensemble: {err}") from err


class EnsembleRanker:
    """The members' rankers, member i reading columns ``columns_[i]`` of the ensemble's
    input; ``predict`` has each predict its top ``cfg.member_topk`` (at least the top-k asked
    for), combines their scores by ``cfg.combine`` (:func:`combine_scores`) and keeps the top
    k. ``predict``: the ensemble's saved predict settings."""

    def __init__(self, cfg: EnsembleConfig, predict: PredictConfig) -> None:
        self.cfg = cfg
        self.predict_cfg = predict

    def set_members(self, members: Sequence[Ranker], columns: Sequence[Sequence[int]]) -> Self:
        """Assemble from members trained elsewhere (one cached stage graph each)."""
        if not members or len(members) != len(columns):
            raise ValueError(f"{len(members)} member rankers, {len(columns)} column blocks")
        labels = {m.n_labels for m in members}
        if len(labels) != 1:
            raise ValueError(f"the members rank different label sets: {sorted(labels)} labels")
        spans = [(int(a), int(b)) for a, b in columns]
        if any(not 0 <= a < b for a, b in spans):
            raise ValueError(f"column blocks {spans} are not (start, stop) with start < stop")
        self.members_, self.columns_ = list(members), spans
        self.n_features_ = max(b for _, b in spans)
        return self

    @property
    def n_labels(self) -> int:
        return self.members_[0].n_labels

    def block(self, X: sp.csr_matrix, i: int) -> sp.csr_matrix:
        """Member i's columns of ``X`` (``X`` itself when they are all of it)."""
        a, b = self.columns_[i]
        return X if (a, b) == (0, X.shape[1]) else X[:, a:b]

    def _check(self, X: sp.csr_matrix) -> None:
        if X.shape[1] != self.n_features_:
            raise ValueError(f"X has {X.shape[1]} features, the ensemble {self.n_features_}")

    def fit(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, index: Any = None, negatives: Any = None
    ) -> Self:
        """Refit every member on its columns of ``X`` csr (n, d), ``Y`` csr (n, L).
        ``index``: one label index per member, or None: each member's own (its ``tree_``
        when it has one); ``negatives``: one per member, or None."""
        self._check(X)
        for i, member in enumerate(self.members_):
            own = getattr(member, "tree_", None) if index is None else index[i]
            extra = None if negatives is None else negatives[i]
            self.members_[i] = member.fit(self.block(X, i), Y, own, extra)
        return self

    def predict(
        self, X: sp.csr_matrix, beam_size: int | None = None, topk: int | None = None
    ) -> sp.csr_matrix:
        """csr (n_docs, n_labels): the ``topk`` best combined scores per document
        (``beam_size``: passed to every member, None: each member's own)."""
        self._check(X)
        k = topk or self.predict_cfg.topk
        member_k = max(self.cfg.member_topk, k)
        scores = [
            member.predict(self.block(X, i), beam_size=beam_size, topk=member_k)
            for i, member in enumerate(self.members_)
        ]
        return top_k_scores(combine_scores(scores, self.cfg.combine, self.cfg.temperature), k)

    def save(self, folder: str | Path) -> None:
        """``members/<i>/`` (each member's ranker) and ``meta.json`` (their classes, columns,
        the ensemble and predict settings)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        names = _save_parts(folder / MEMBERS_DIR, self.members_)
        fields = {
            "members": names,
            "columns": [list(c) for c in self.columns_],
            "ensemble": self.cfg.model_dump(mode="json"),
            "predict": self.predict_cfg.model_dump(mode="json"),
            "n_labels": self.n_labels,
            "n_features": self.n_features_,
        }
        write_meta(folder, "EnsembleRanker", fields)

    @classmethod
    def load(cls, folder: str | Path) -> EnsembleRanker:
        folder = Path(folder)
        meta = read_meta(folder, "EnsembleRanker")
        read_meta(folder / MEMBERS_DIR, _PARTS_CLASS)
        with meta_fields(folder):
            ranker = cls(
                EnsembleConfig.model_validate(meta["ensemble"]),
                PredictConfig.model_validate(meta["predict"]),
            )
            names, columns = list(meta["members"]), [list(c) for c in meta["columns"]]
        classes = [registry.part_class(str(n), folder / "meta.json") for n in names]
        members = [c.load(folder / MEMBERS_DIR / str(i)) for i, c in enumerate(classes)]
        try:
            return ranker.set_members(members, columns)
        except ValueError as err:
            raise ArtifactError(folder / "meta.json", f"inconsistent ensemble: {err}") from err
