"""One tree level of linear rankers, trained like PECOS's XR-Linear (liblinear dual CD).

Node j of the level has parent p = parent(j) (from C). Its binary problem is trained on the
documents of p, ``{i : M[i, p] = 1}``: label +1 where Y[i, j] = 1, else -1; cost Cp for
positives and Cn for negatives, times R[i, j] where R holds that pair. Positive pairs whose
document is not in M[:, p] are *not* trained on: put teacher forcing into M when wanted
(PECOS adds them implicitly). Each problem minimizes, over w of length n_features + 1,

- ``squared_hinge``: 0.5 ||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i)^2 (liblinear's
  solve_l2r_l1l2_svc, L2 loss, with shrinking);
- ``logistic``: 0.5 ||w||^2 + sum_i C_i log(1 + exp(-y_i w.x_i)) (liblinear's
  solve_l2r_lr_dual),

where x_i is the document's row followed by the constant ``cfg.bias`` (the bias weight is
regularized, as in liblinear and PECOS). Epochs visit examples in a random order drawn from
(cfg.seed, parent), stopping at ``cfg.eps`` or after ``cfg.max_iter`` epochs. Weights (float32,
as PECOS's) with |w| < cfg.threshold are pruned.

Parents are processed in batches of bounded memory: each batch copies its parents' rows into
local blocks with renumbered features, then solves groups of up to 16 sibling nodes in
parallel (numba threads), each group in lockstep over its parent's rows (one pass over a row
serves every sibling: :mod:`xmc_core.linear._batch`, :mod:`xmc_core.linear._dual_cd`). The
batches are independent (:class:`LevelJob`): a mapper (:mod:`xmc_core.linear.level_batches`)
trains them in this process or elsewhere (a Dask cluster: ``tasks/dask_ranker.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from xmc_core.config import RankerConfig
from xmc_core.linear import _solver_kernels as kernels
from xmc_core.linear._batch import Level, assemble, parent_entries, train_batch
from xmc_core.linear.beam import ChunkedLevel
from xmc_core.linear.level_batches import BatchMapper, Pieces, current_mapper
from xmc_core.progress import RateLog

log = logging.getLogger(__name__)

BATCH_ENTRIES = 1 << 22
"""Soft cap per batch of parents on the local row entries and on the weight slots."""


@dataclass(frozen=True)
class LevelJob:
    """One level's training split into independent batches of parents (:func:`plan_level`).

    A batch trains on its own (:meth:`train`, in any process: a job is arrays and numbers,
    sent by value), :meth:`assemble` joins the pieces of every batch; neither where nor in
    which order the batches ran changes the result (each node's random stream comes from
    (seed, node)).
    """

    level: Level  # the validated inputs (what a remote worker needs)
    params: tuple  # the kernels' parameters
    batches: list[np.ndarray]  # parents (int64) per batch
    parent_entries: np.ndarray  # (P,) int64: entries of each parent's block (its work)
    n_rows: int  # rows of W: n_features + 1

    @property
    def n_nodes(self) -> int:
        """K, the nodes of the level (columns of W)."""
        return int(self.level.parent.size)

    @property
    def total_work(self) -> int:
        """The work of every node: the entries of its parent's block, summed."""
        return int(self.parent_entries[self.level.parent].sum())

    def batch_size(self, parents: np.ndarray) -> tuple[int, int]:
        """(nodes, work) of a batch: the children of ``parents`` and the entries of their
        parents' blocks, as :meth:`train` counts them into its progress."""
        children = np.bincount(self.level.parent, minlength=self.parent_entries.size)[parents]
        return int(children.sum()), int((children * self.parent_entries[parents]).sum())

    def train(
        self,
        parents: np.ndarray,
        progress: RateLog | None = None,
        nodes: np.ndarray | None = None,
    ) -> Pieces:
        """Train the children of ``parents`` (a batch), or only ``nodes`` among them (node ids of
        the level: a chunk of a large parent's children); returns their (nodes, counts, rows,
        values): node ids, weights kept per node, then the rows and values of those weights,
        node after node. Counts the nodes solved into ``progress`` when given."""
        if progress is None:  # a log that never speaks
            progress = RateLog(log, "", total=0, every_s=math.inf)
        level = self.level if nodes is None else _only(self.level, nodes)
        return train_batch(level, parents, self.params, progress)

    def assemble(self, pieces: list[Pieces]) -> sp.csc_matrix:
        """W: csc (n_features + 1, K) from the pieces of the batches (in any order)."""
        return assemble(pieces, self.n_rows, self.n_nodes)


def train_level(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None = None,
    what: str = "rankers",
    mapper: BatchMapper | None = None,
    report_idle: bool = True,
) -> sp.csc_matrix:
    """Train the rankers of every node of one level (a level taking longer than 30 s logs
    ``what: i/K nodes (pct), rate, time left`` at least every 30 s).

    ``X``: csr (n_docs, n_features), rows L2-normalized; ``Y``: csr (n_docs, K) binary
    relevant nodes; ``C``: csr (K, P) binary, one parent per node; ``M``: csr (n_docs, P)
    binary, the parents whose problems each document takes part in; ``R``: optional csr
    (n_docs, K) importance weights multiplying the cost of (doc, node) pairs (absent pairs
    weigh 1). Returns W: csc (n_features + 1, K) float32, sorted indices; the last row holds
    the bias weights (scores are ``X @ W[:-1] + cfg.bias * W[-1]``; empty when bias == 0).

    ``mapper``: what trains the batches (:class:`~xmc_core.linear.level_batches.BatchMapper`);
    default the one set by :func:`~xmc_core.linear.level_batches.use_mapper`, else this
    process. The result is the same whichever runs them. ``report_idle``: log the nodes no
    document reaches (False where ``M`` leaves parents out by design, as a sample does).
    """
    job, pieces = _train_pieces(X, Y, C, M, cfg, R, what, mapper, report_idle)
    return job.assemble(pieces)


def train_level_chunks(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None = None,
    what: str = "rankers",
    mapper: BatchMapper | None = None,
) -> ChunkedLevel:
    """:func:`train_level`'s rankers as the level's beam chunks, what a model keeps to predict
    (:meth:`~xmc_core.linear.beam.ChunkedLevel.from_pieces`: the matrix is never formed)."""
    job, pieces = _train_pieces(X, Y, C, M, cfg, R, what, mapper, report_idle=True)
    return ChunkedLevel.from_pieces(pieces, C, job.n_rows)


def _train_pieces(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None,
    what: str,
    mapper: BatchMapper | None,
    report_idle: bool,
) -> tuple[LevelJob, list[Pieces]]:
    """The level's job and the pieces of its batches (arguments as :func:`train_level`)."""
    job = plan_level(X, Y, C, M, cfg, R)
    idle = int(np.count_nonzero(np.diff(job.level.M.indptr)[job.level.parent] == 0))
    if idle and report_idle:
        log.info(
            "%s: %s of %s nodes skipped (no weights): no training document reaches their parent",
            what, f"{idle:,}", f"{job.n_nodes:,}",
        )  # fmt: skip
    # a node's work: the entries of its parent's block (the time left follows it, not nodes)
    progress = RateLog(log, what, total=job.n_nodes, unit="nodes", total_work=job.total_work)
    return job, (mapper or current_mapper())(job, progress)


def plan_level(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    C: sp.csr_matrix,
    M: sp.csr_matrix,
    cfg: RankerConfig,
    R: sp.csr_matrix | None = None,
) -> LevelJob:
    """One level's training as independent batches of parents of bounded memory (arguments
    as :func:`train_level`)."""
    level = _validate(X, Y, C, M, R)
    n_features = X.shape[1]
    params = (
        kernels.LOGISTIC if cfg.loss == "logistic" else kernels.SQUARED_HINGE,
        int(cfg.max_iter),
        int(cfg.seed) & (2**63 - 1),
        int(n_features),
        float(cfg.Cp),
        float(cfg.Cn),
        float(cfg.eps),
        float(cfg.bias),
        float(cfg.threshold),
    )
    batches = _plan_batches(level)
    return LevelJob(level, params, batches, parent_entries(level), n_features + 1)


def _only(level: Level, nodes: np.ndarray) -> Level:
    """``level`` with every node but ``nodes`` moved under an extra parent that no document
    joins, so a batch solves only ``nodes`` of its parents' children; node ids and their
    parents (hence the order their rows are visited in, and their results) stay."""
    n_docs, n_parents = level.M.shape
    parent = np.full_like(level.parent, n_parents)
    parent[nodes] = level.parent[nodes]
    indptr = np.append(level.M.indptr, level.M.indptr[-1])
    M = sp.csc_matrix((level.M.data, level.M.indices, indptr), shape=(n_docs, n_parents + 1))
    return dataclasses.replace(level, M=_int64_csc(M), parent=parent)


def _validate(
    X: sp.spmatrix, Y: sp.spmatrix, C: sp.spmatrix, M: sp.spmatrix, R: sp.spmatrix | None
) -> Level:
    """Check shapes, and convert every matrix to the canonical layout the kernels read."""
    n_docs, _ = X.shape
    n_nodes, n_parents = C.shape
    expected = {"Y": (n_docs, n_nodes), "M": (n_docs, n_parents)}
    if R is not None:
        expected["R"] = (n_docs, n_nodes)
    for name, matrix in (("Y", Y), ("M", M), ("R", R)):
        if name in expected and matrix.shape != expected[name]:
            raise ValueError(f"{name} has shape {matrix.shape}, expected {expected[name]}")
    C = _pattern(sp.csr_matrix(C))
    if np.any(np.diff(C.indptr) != 1):
        raise ValueError("C must have exactly one parent (one nonzero) per row")
    Xc = sp.csr_matrix(X, dtype=np.float32)  # shares X's arrays when nothing needs changing
    if not Xc.has_canonical_format:
        Xc = Xc.copy()
        Xc.sum_duplicates()
    Xc.indices = Xc.indices.astype(np.int32, copy=False)
    Xc.indptr = Xc.indptr.astype(np.int64, copy=False)
    Rc = sp.csc_matrix((n_docs, n_nodes)) if R is None else sp.csc_matrix(R, copy=True)
    return Level(
        X=Xc,
        Y=_int64_csc(_pattern(sp.csc_matrix(Y))),
        R=_int64_csc(Rc.astype(np.float64)),
        M=_int64_csc(_pattern(sp.csc_matrix(M))),
        parent=C.indices.astype(np.int64),
    )


def _pattern(A: sp.spmatrix) -> sp.spmatrix:
    """The nonzero pattern of A with unit values (same format, duplicates merged)."""
    A = A.copy()
    A.sum_duplicates()
    A.eliminate_zeros()
    A.data = np.ones_like(A.data, dtype=np.float64)
    return A


def _int64_csc(A: sp.csc_matrix) -> sp.csc_matrix:
    """A with sorted int64 row indices and int64 column pointers."""
    A.sum_duplicates()
    A.indices = A.indices.astype(np.int64, copy=False)
    A.indptr = A.indptr.astype(np.int64, copy=False)
    return A


def _plan_batches(level: Level) -> list[np.ndarray]:
    """Parents (int64 arrays) grouped so each batch holds about ``BATCH_ENTRIES`` entries.

    Parents without children or without documents are left out: their nodes get no weights.
    """
    n_parents = level.M.shape[1]
    children = np.bincount(level.parent, minlength=n_parents)
    nnz = parent_entries(level)
    slots = children * (np.minimum(nnz, level.X.shape[1]) + 1)
    batches: list[np.ndarray] = []
    current: list[int] = []
    used_nnz = used_slots = 0
    for p in np.flatnonzero((children > 0) & (np.diff(level.M.indptr) > 0)):
        if current and (used_nnz + nnz[p] > BATCH_ENTRIES or used_slots + slots[p] > BATCH_ENTRIES):
            batches.append(np.array(current, dtype=np.int64))
            current, used_nnz, used_slots = [], 0, 0
        current.append(int(p))
        used_nnz += int(nnz[p])
        used_slots += int(slots[p])
    if current:
        batches.append(np.array(current, dtype=np.int64))
    return batches
