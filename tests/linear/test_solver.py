"""Per-level linear rankers: agreement with liblinear (scikit-learn), parent restriction,
importance weights, pruning, determinism and degenerate problems."""

from __future__ import annotations

import logging
import warnings
from functools import partial

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from xmc_core.config import RankerConfig
from xmc_core.linear import _batch, solver
from xmc_core.linear.solver import train_level
from xmc_core.progress import RateLog, duration

TIGHT = {"threshold": 0.0, "eps": 1e-9, "max_iter": 100_000}


def _problem(seed: int, n: int = 120, d: int = 30, k: int = 3) -> tuple[sp.csr_matrix, ...]:
    """X: csr (n, d) L2-normalized rows; Y: csr (n, k) learnable but noisy labels."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr", dtype=np.float64)
    X = X + sp.csr_matrix((np.ones(n), (np.arange(n), rng.integers(0, d, n))), shape=(n, d))
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1))), dtype=np.float32)
    scores = X @ rng.normal(size=(d, k)) + 0.3 * rng.normal(size=(n, k))
    Y = sp.csr_matrix((scores > np.median(scores, axis=0)).astype(np.float32))
    return X, Y


def _one_parent(n: int, k: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """C: (k, 1) and M: (n, 1), every node under one parent holding every document."""
    return sp.csr_matrix(np.ones((k, 1))), sp.csr_matrix(np.ones((n, 1)))


def _dense(W: sp.csc_matrix) -> np.ndarray:
    return W.toarray().astype(np.float64)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _sklearn_weights(
    model: LinearSVC | LogisticRegression, X: sp.csr_matrix, y: np.ndarray, bias: float
) -> np.ndarray:
    """(d + 1,) weights of a liblinear fit, the last one for the constant feature ``bias``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConvergenceWarning would void the comparison
        model.fit(X, y)
    intercept = model.intercept_[0] / bias if bias > 0 else 0.0
    return np.r_[model.coef_.ravel(), intercept]


@pytest.mark.parametrize(("Cp", "Cn", "bias"), [(1.0, 1.0, 1.0), (2.0, 0.5, 0.7), (1.0, 1.0, 0.0)])
def test_squared_hinge_matches_liblinear(Cp: float, Cn: float, bias: float) -> None:
    X, Y = _problem(0)
    C, M = _one_parent(*Y.shape)
    cfg = RankerConfig(loss="squared_hinge", Cp=Cp, Cn=Cn, bias=bias, **TIGHT)
    W = _dense(train_level(X, Y, C, M, cfg))
    for j in range(Y.shape[1]):
        y = np.where(Y[:, [j]].toarray().ravel() > 0, 1, -1)
        svc = LinearSVC(
            C=1.0, class_weight={1: Cp, -1: Cn}, dual=True, fit_intercept=bias > 0,
            intercept_scaling=bias or 1.0, tol=1e-8, max_iter=100_000, random_state=0,
        )  # fmt: skip
        ref = _sklearn_weights(svc, X, y, bias)
        assert _rel(W[:, j], ref) < 1e-5
        ours = X @ W[:-1, j] + bias * W[-1, j]
        np.testing.assert_allclose(ours, svc.decision_function(X), atol=1e-5)


@pytest.mark.parametrize("dual", [True, False])
@pytest.mark.parametrize(("Cp", "Cn", "bias"), [(1.0, 1.0, 1.0), (4.0, 0.5, 2.0)])
def test_logistic_matches_liblinear(Cp: float, Cn: float, bias: float, dual: bool) -> None:
    X, Y = _problem(1)
    C, M = _one_parent(*Y.shape)
    W = _dense(
        train_level(X, Y, C, M, RankerConfig(loss="logistic", Cp=Cp, Cn=Cn, bias=bias, **TIGHT))
    )
    for j in range(Y.shape[1]):
        y = np.where(Y[:, [j]].toarray().ravel() > 0, 1, -1)
        lr = LogisticRegression(
            C=1.0, class_weight={1: Cp, -1: Cn}, solver="liblinear", dual=dual,
            intercept_scaling=bias, tol=1e-10, max_iter=100_000, random_state=0,
        )  # fmt: skip
        assert _rel(W[:, j], _sklearn_weights(lr, X, y, bias)) < 1e-5


def test_documents_train_only_the_children_of_their_parents() -> None:
    # Feature 0 marks the positives of node 0 inside parent 0, but twice as many documents of
    # parent 1 carry it too: trained on them, node 0 would learn a negative weight (no bias).
    X = sp.csr_matrix(np.r_[np.tile([[1.0, 0, 0]], (10, 1)), np.tile([[0, 1.0, 0]], (10, 1)),
                            np.tile([[1.0, 0, 0]], (20, 1))], dtype=np.float32)  # fmt: skip
    Y = sp.lil_matrix((40, 3), dtype=np.float32)
    Y[:10, 0] = 1
    Y[10:20, 1] = 1
    Y[20:30, 2] = 1
    C = sp.csr_matrix([[1.0, 0], [1, 0], [0, 1]])
    M = sp.csr_matrix((np.ones(40), (np.arange(40), np.arange(40) // 20)), shape=(40, 2))
    cfg = RankerConfig(threshold=0.0, bias=0.0)
    W = _dense(train_level(X, Y.tocsr(), C, M, cfg))
    assert W[0, 0] > 0.1
    everyone = sp.csr_matrix(np.c_[np.ones(40), M[:, [1]].toarray()])
    assert _dense(train_level(X, Y.tocsr(), C, everyone, cfg))[0, 0] < -0.1
    # Same weights as training parent 0's documents alone; positives outside M are ignored.
    alone = _dense(train_level(X[:20], Y.tocsr()[:20], C, M[:20], cfg))
    np.testing.assert_array_equal(W[:, :2], alone[:, :2])
    Y[25, 0] = 1
    np.testing.assert_array_equal(W, _dense(train_level(X, Y.tocsr(), C, M, cfg)))


def test_documents_in_several_parents() -> None:
    X, Y = _problem(2, n=150, k=8)
    rng = np.random.default_rng(2)
    M = sp.csr_matrix((rng.random((150, 4)) < 0.4).astype(np.float32))
    parent = np.arange(8) % 4
    C = sp.csr_matrix((np.ones(8), (np.arange(8), parent)), shape=(8, 4))
    cfg = RankerConfig()
    W = _dense(train_level(X, Y, C, M, cfg))
    for j in range(8):  # a parent's documents alone give its children the same weights
        rows = np.flatnonzero(M[:, [parent[j]]].toarray().ravel())
        only = sp.csr_matrix(M[rows].multiply(np.arange(4) == parent[j]))
        alone = train_level(X[rows], Y[rows], C, only, cfg)
        np.testing.assert_array_equal(W[:, j], _dense(alone)[:, j])


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_importance_weight_equals_duplicating_the_example(loss: str) -> None:
    X, Y = _problem(3, n=80, k=2)
    C, M = _one_parent(80, 2)
    heavy = np.array([3, 10, 41, 57])  # positives and negatives of node 0
    R = sp.csr_matrix((np.full(4, 3.0), (heavy, np.zeros(4))), shape=(80, 2))
    cfg = RankerConfig(loss=loss, **TIGHT)
    weighted = _dense(train_level(X, Y, C, M, cfg, R))
    rows = np.r_[np.arange(80), heavy, heavy]
    duplicated = _dense(train_level(X[rows], Y[rows], *_one_parent(rows.size, 2), cfg))
    assert _rel(weighted[:, 0], duplicated[:, 0]) < 1e-5


def test_pruning_shape_and_bias_row() -> None:
    X, Y = _problem(4, n=200, d=40, k=5)
    C, M = _one_parent(200, 5)
    full = train_level(X, Y, C, M, RankerConfig(threshold=0.0))
    pruned = train_level(X, Y, C, M, RankerConfig(threshold=0.1))
    assert pruned.shape == full.shape == (41, 5)
    assert pruned.dtype == np.float32 and pruned.has_sorted_indices
    assert np.all(np.abs(pruned.data) >= 0.1)
    dense = full.toarray()
    np.testing.assert_array_equal(pruned.toarray(), np.where(np.abs(dense) >= 0.1, dense, 0))
    assert np.count_nonzero(dense[-1]) == 5  # every node has a bias weight
    no_bias = train_level(X, Y, C, M, RankerConfig(threshold=0.0, bias=0.0))
    assert no_bias.shape == (41, 5) and no_bias[-1].nnz == 0


def test_same_seed_same_weights_any_thread_count() -> None:
    X, Y = _problem(5, n=300, k=6)
    C = sp.csr_matrix((np.ones(6), (np.arange(6), np.arange(6) % 2)), shape=(6, 2))
    M = sp.csr_matrix(np.ones((300, 2)))
    cfg = RankerConfig(max_iter=3, threshold=0.0)
    first = train_level(X, Y, C, M, cfg)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        single = train_level(X, Y, C, M, cfg)
    finally:
        numba.set_num_threads(threads)
    for other in (train_level(X, Y, C, M, cfg), single):
        np.testing.assert_array_equal(first.toarray(), other.toarray())
    reseeded = train_level(X, Y, C, M, cfg.model_copy(update={"seed": 1}))
    assert not np.array_equal(first.toarray(), reseeded.toarray())


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_a_node_learns_the_same_weights_whatever_siblings_share_its_group(loss: str) -> None:
    # 20 children of parent 0 are solved as 2 groups of 10 lanes (padded to 16); alone under
    # parent 0 (its siblings moved to parent 1, which has no documents), each is 1 lane.
    X, Y = _problem(9, n=200, k=20)
    M = sp.csr_matrix((np.ones(200), (np.arange(200), np.zeros(200))), shape=(200, 2))
    cfg = RankerConfig(loss=loss, threshold=0.0)
    together = train_level(X, Y, sp.csr_matrix(np.c_[np.ones(20), np.zeros(20)]), M, cfg)
    for j in (0, 9, 10, 19):
        parent = np.where(np.arange(20) == j, 0, 1)
        C = sp.csr_matrix((np.ones(20), (np.arange(20), parent)), shape=(20, 2))
        alone = train_level(X, Y, C, M, cfg)
        assert alone.nnz and np.array_equal(_dense(alone)[:, j], _dense(together)[:, j])


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_parents_without_documents_and_nodes_without_positives(loss: str, caplog) -> None:
    X, Y = _problem(6, n=60, k=4)
    Y = Y.tolil()
    Y[:, 1] = 0  # node 1: no positives
    C = sp.csr_matrix((np.ones(4), (np.arange(4), [0, 0, 1, 2])), shape=(4, 3))
    M = sp.csr_matrix((np.ones(60), (np.arange(60), np.arange(60) % 2)), shape=(60, 3))
    with caplog.at_level(logging.INFO, logger=solver.log.name):
        W = train_level(X, Y.tocsr(), C, M, RankerConfig(loss=loss, threshold=0.0), what="lvl")
    assert [r.getMessage() for r in caplog.records] == [
        "lvl: 1 of 4 nodes skipped (no weights): no training document reaches their parent"
    ]
    assert W.shape == (31, 4)
    assert W[:, 3].nnz == 0  # parent 2 has no documents
    scores = X @ _dense(W)[:-1, 1] + _dense(W)[-1, 1]
    assert np.all(scores[M[:, [0]].toarray().ravel() > 0] < 0)
    empty = train_level(X[:0], Y.tocsr()[:0], C, M[:0], RankerConfig(loss=loss))
    assert empty.shape == (31, 4) and empty.nnz == 0


def test_rejects_malformed_inputs() -> None:
    X, Y = _problem(7, n=20, k=2)
    C, M = _one_parent(20, 2)
    with pytest.raises(ValueError, match="one parent"):
        train_level(
            X, Y, sp.csr_matrix(np.ones((2, 2))), sp.csr_matrix(np.ones((20, 2))), RankerConfig()
        )
    with pytest.raises(ValueError, match="M has shape"):
        train_level(X, Y, C, M[:10], RankerConfig())


def test_long_levels_log_the_nodes_done(monkeypatch, caplog) -> None:
    X, Y = _problem(8, n=80, k=6)
    C = sp.csr_matrix(np.eye(6))  # one node per parent: one group, one progress update each
    M = sp.lil_matrix((80, 6))
    M[:, :3], M[:20, 3:] = 1, 1  # parents 0-2 hold every document, parents 3-5 the first 20
    cfg = RankerConfig(max_iter=3)
    quiet = train_level(X, Y, C, M.tocsr(), cfg)
    ticks = iter(range(10, 1000, 10))  # every clock reading 10 s after the previous one
    monkeypatch.setattr(solver, "RateLog", partial(RateLog, clock=lambda: next(ticks)))
    monkeypatch.setattr(_batch, "CHUNK_SLOTS", 1)  # one group per chunk: 6 progress updates
    with caplog.at_level(logging.INFO, logger=solver.log.name):
        logged = train_level(X, Y, C, M.tocsr(), cfg, what="level 3")
    # a node every 10 s, the biggest problems first: after 30 s, parents 0-2's nodes are
    # done, the share of the work of their blocks (entries of 80 docs against 20)
    entries = np.diff(X.indptr)
    big, small = int(entries.sum()), int(entries[:20].sum())
    assert 0.7 < big / (big + small) < 0.9
    assert [r.getMessage() for r in caplog.records] == [
        f"level 3: 3/6 nodes ({100 * big / (big + small):.0f}% of the work), 0.1 nodes/s, "
        f"{duration(30 * small / big)} left"
    ]
    np.testing.assert_array_equal(quiet.toarray(), logged.toarray())
