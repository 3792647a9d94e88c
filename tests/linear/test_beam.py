"""Beam search: chunked scoring equals exhaustive scoring."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import PredictConfig, RankerConfig
from xmc_core.linear import beam
from xmc_core.linear.beam import ChunkedLevel, beam_search, beam_to_csr, root_beam, score_level
from xmc_core.linear.model import XRLinearModel
from xmc_core.linear.tree import LabelTree
from xmc_core.storage.artifacts import load_csr, save_csr, save_csr_rows

RNG = np.random.default_rng(0)


def assignment(parents: list[int], n_parents: int) -> sp.csr_matrix:
    n = len(parents)
    return sp.csr_matrix((np.ones(n), (np.arange(n), parents)), shape=(n, n_parents))


def transform(s: np.ndarray, kind: str) -> np.ndarray:
    if kind == "sigmoid":
        return 1 / (1 + np.exp(-s))
    if kind == "l3-hinge":
        return np.exp(-(np.maximum(1 - s, 0) ** 3))
    return s


def with_bias(X: sp.csr_matrix, bias: float) -> sp.csr_matrix:
    return sp.hstack([X, np.full((X.shape[0], 1), bias)], format="csr")


@pytest.mark.parametrize("kind", ["noop", "sigmoid", "l3-hinge"])
def test_level_scores_equal_dense_computation(kind: str) -> None:
    X = sp.random(40, 25, density=0.3, format="csr", random_state=1, dtype=np.float32)
    W = sp.random(26, 9, density=0.4, format="csc", random_state=2, dtype=np.float32)
    C = assignment([2, 0, 1, 0, 2, 2, 1, 0, 1], 3)
    beam_ids = np.tile([0, 2, -1], (40, 1))  # parent 1 not in the beam; one empty slot
    beam_scores = np.tile(np.float32([0.5, 0.25, 9.0]), (40, 1))
    ids, scores = score_level(X, ChunkedLevel.build(W, C), beam_ids, beam_scores, 4, kind, 0.7)
    S = transform((with_bias(X, 0.7) @ W).toarray(), kind)
    parent_score = {0: 0.5, 2: 0.25}
    cand = [j for j in range(9) if C[j].indices[0] in parent_score]
    for i in range(40):
        full = {
            j: S[i, j] if kind == "noop" else S[i, j] * parent_score[C[j].indices[0]] for j in cand
        }
        best = sorted(full.values(), reverse=True)[:4]
        np.testing.assert_allclose(scores[i], best, rtol=1e-5, atol=1e-6)
        reported = [full[j] for j in ids[i]]  # each returned id carries its own true score
        np.testing.assert_allclose(reported, scores[i], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["noop", "l3-hinge"])
def test_table_and_search_lookups_and_any_split_of_the_documents_score_alike(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parent's documents find its chunk's features through a dense table or by binary
    search, and the documents are scored a block at a time: every way gives the same bits."""
    rng = np.random.default_rng(3)
    X = sp.random(300, 60, density=0.2, format="csr", random_state=4, dtype=np.float32)
    W = sp.random(61, 40, density=0.3, format="csc", random_state=5, dtype=np.float32)
    level = ChunkedLevel.build(W, assignment(list(rng.integers(0, 5, 40)), 5))
    beam_ids = np.stack([rng.permutation(5)[:3] for _ in range(300)])
    beam_ids[::7, 2] = -1
    beam_scores = rng.random(beam_ids.shape, dtype=np.float32)
    runs = []
    for cost, block in ((0.0, 1 << 24), (np.inf, 1 << 24), (2.0, 50), (0.0, 1)):
        monkeypatch.setattr(beam, "TABLE_COST", cost)
        monkeypatch.setattr(beam, "BLOCK_CANDIDATES", block)
        runs.append(score_level(X, level, beam_ids, beam_scores, 7, kind, 0.5))
    for ids, scores in runs[1:]:
        np.testing.assert_array_equal(ids, runs[0][0])
        np.testing.assert_array_equal(scores, runs[0][1])
    S = transform((with_bias(X, 0.5) @ W).toarray(), kind)  # the first doc, by hand
    parent = {int(p): float(beam_scores[0, b]) for b, p in enumerate(beam_ids[0]) if p >= 0}
    full = [S[0, j] * (1 if kind == "noop" else parent[level_parent])
            for j in range(40) if (level_parent := int(np.searchsorted(
                level.child_ptr, np.flatnonzero(level.children == j)[0], side="right") - 1))
            in parent]  # fmt: skip
    np.testing.assert_allclose(runs[0][1][0], sorted(full, reverse=True)[:7], rtol=1e-5)


def test_width_larger_than_candidates_pads_with_minus_one() -> None:
    X = sp.csr_matrix(np.eye(3, dtype=np.float32))
    W = sp.csc_matrix(np.ones((4, 2), dtype=np.float32))
    ids, scores = score_level(
        X, ChunkedLevel.build(W, assignment([0, 0], 1)), *root_beam(3), 5, "noop", 1.0
    )
    assert (ids[:, 2:] == -1).all() and (ids[:, :2] >= 0).all()
    assert beam_to_csr(ids, scores, 2).nnz == 6


def test_beam_covering_every_cluster_equals_exhaustive_scoring() -> None:
    # 2 levels: 4 clusters -> 12 labels (3 per cluster)
    tree = LabelTree([sp.csr_matrix(np.ones((4, 1))), assignment([i // 3 for i in range(12)], 4)])
    d = 15
    W0 = sp.random(d + 1, 4, density=0.6, format="csc", random_state=3, dtype=np.float32)
    W1 = sp.random(d + 1, 12, density=0.6, format="csc", random_state=4, dtype=np.float32)
    X = sp.random(30, d, density=0.4, format="csr", random_state=5, dtype=np.float32)
    model = XRLinearModel(RankerConfig(bias=1.0), PredictConfig()).set_levels(tree, [W0, W1], d)
    pred = model.predict(X, beam_size=4, topk=12, post_processor="l3-hinge").toarray()
    Xb = with_bias(X, 1.0)
    s0 = transform((Xb @ W0).toarray(), "l3-hinge")
    s1 = transform((Xb @ W1).toarray(), "l3-hinge")
    exhaustive = s1 * s0[:, [j // 3 for j in range(12)]]
    np.testing.assert_allclose(pred, exhaustive, rtol=1e-5, atol=1e-7)
    narrow = model.predict(X, beam_size=1, topk=3).toarray()
    assert ((narrow > 0).sum(axis=1) == 3).all()  # one cluster in the beam: its 3 labels


def test_chunked_level_rejects_children_without_one_parent() -> None:
    W = sp.csc_matrix(np.ones((3, 2), dtype=np.float32))
    bad = sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="exactly one parent"):
        ChunkedLevel.build(W, bad)


def test_beam_search_hook_sees_every_level_and_changes_nothing() -> None:
    # 3 levels: 2 clusters -> 4 clusters -> 8 labels (2 children each)
    C = [sp.csr_matrix(np.ones((2, 1))), assignment([0, 0, 1, 1], 2)]
    C.append(assignment([i // 2 for i in range(8)], 4))
    d = 12
    weights = [
        sp.random(d + 1, c.shape[0], density=0.6, format="csc", random_state=10 + t)
        for t, c in enumerate(C)
    ]
    levels = [ChunkedLevel.build(W, c) for W, c in zip(weights, C, strict=True)]
    X = sp.random(25, d, density=0.4, format="csr", random_state=6, dtype=np.float32)
    widths = [2, 3, 4]
    plain = beam_search(X, levels, widths, "sigmoid", 1.0)
    seen: list[tuple[int, np.ndarray, np.ndarray]] = []
    hooked = beam_search(
        X, levels, widths, "sigmoid", 1.0, on_level=lambda t, i, s: seen.append((t, i, s))
    )
    assert np.array_equal(plain.indptr, hooked.indptr)
    assert np.array_equal(plain.indices, hooked.indices)
    assert np.array_equal(plain.data, hooked.data) and plain.shape == (25, 8)
    assert [t for t, _, _ in seen] == [0, 1, 2]
    assert [ids.shape for _, ids, _ in seen] == [(25, 2), (25, 3), (25, 4)]
    # the hook sees the same beams as the level-by-level loop it replaces
    ids, scores = root_beam(25)
    for t, level in enumerate(levels):
        ids, scores = score_level(X, level, ids, scores, widths[t], "sigmoid", 1.0)
        assert np.array_equal(seen[t][1], ids) and np.array_equal(seen[t][2], scores)
    assert (beam_to_csr(ids, scores, 8) != hooked).nnz == 0
    # a generator of levels works too; a width per level is required
    assert (beam_search(X, iter(levels), widths, "sigmoid", 1.0) != plain).nnz == 0
    with pytest.raises(ValueError):
        beam_search(X, levels, widths[:2], "sigmoid", 1.0)
    with pytest.raises(ValueError, match="at least one level"):
        beam_search(X, [], [], "sigmoid", 1.0)


def test_chunked_level_layout_by_hand() -> None:
    # 3 features + bias row; 4 children: parent 0 has 1 and 3, parent 1 has 0 and 2, parent 2 none
    W = sp.csr_matrix(
        np.array([[0, 5, 1, 0], [2, 0, 0, 7], [0, 0, 3, 0], [4, 6, 0, 0]], dtype=np.float32)
    )  # csr in, any order: the layout is the same
    level = ChunkedLevel.build(W, assignment([1, 0, 1, 0], 3))
    assert level.child_ptr.tolist() == [0, 2, 4, 4]
    assert level.children.tolist() == [1, 3, 0, 2]  # parent 0: children 1, 3; parent 1: 0, 2
    # parent 0's chunk: feature 0 (child 1: 5), 1 (child 3: 7), 3 = bias (child 1: 6)
    # parent 1's chunk: feature 0 (child 2: 1), 1 (child 0: 2), 2 (child 2: 3), bias (child 0: 4)
    assert level.feat_ptr.tolist() == [0, 3, 7, 7]
    assert level.feat.tolist() == [0, 1, 3, 0, 1, 2, 3]
    assert level.entry_ptr.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert level.local.tolist() == [0, 1, 0, 1, 0, 1, 0]
    assert level.val.tolist() == [5, 7, 6, 1, 2, 3, 4]
    assert (level.n_features, level.n_nodes) == (3, 4)
    # what a level keeps per weight: a 2-byte child place (up to 65,536 siblings) and a 4-byte
    # value, each its own array (a view into a larger block would keep the whole block alive:
    # 2.6 GB more at 1M labels); per (parent, feature): a 4-byte feature id and start
    assert (level.local.dtype, level.val.dtype) == (np.uint16, np.float32)
    assert level.local.base is None and level.val.base is None
    assert (level.feat.dtype, level.entry_ptr.dtype) == (np.int32, np.int32)


def test_a_level_gives_back_the_weights_it_was_built_from() -> None:
    # the model keeps only the chunks: saving and warm starts rebuild W from them, exactly
    W = sp.random(31, 40, density=0.3, format="csc", random_state=7, dtype=np.float32)
    parents = np.random.default_rng(8).integers(0, 6, size=40)
    parents[:6] = np.arange(6)  # every parent has a child
    for given in (W, W.tocsr()):
        back = ChunkedLevel.build(given, assignment(parents.tolist(), 6)).to_csr()
        assert back.has_sorted_indices and back.dtype == np.float32
        assert back.indices.dtype == np.int32 and back.shape == W.shape
        assert back.nnz == W.nnz and (back != W).nnz == 0
    empty = sp.csc_matrix((31, 40), dtype=np.float32)  # a level without weights
    assert ChunkedLevel.build(empty, assignment(parents.tolist(), 6)).to_csr().nnz == 0


def _pieces(W: sp.csc_matrix, groups: list[list[int]]) -> list[tuple[np.ndarray, ...]]:
    """W's columns as the solver's pieces: (nodes, counts, rows, values), one per group of
    nodes, each node's rows in a shuffled order (the solver's are unsorted)."""
    rng = np.random.default_rng(3)
    pieces = []
    for nodes in groups:
        cols = [W[:, [j]] for j in nodes]
        shuffled = [rng.permutation(len(c.indices)) for c in cols]
        pairs = list(zip(cols, shuffled, strict=True))
        pieces.append((
            np.array(nodes, dtype=np.int64),
            np.array([c.nnz for c in cols], dtype=np.int64),
            np.concatenate([c.indices[r] for c, r in pairs]).astype(np.int32),
            np.concatenate([c.data[r] for c, r in pairs]),
        ))  # fmt: skip
    return pieces


def test_a_level_from_pieces_is_the_level_of_their_matrix() -> None:
    W = sp.random(31, 40, density=0.3, format="csc", random_state=7, dtype=np.float32)
    parents = np.random.default_rng(8).integers(0, 6, size=40)
    parents[:6] = np.arange(6)
    C = assignment(parents.tolist(), 6)
    whole = ChunkedLevel.build(W, C)
    by_parent = [np.flatnonzero(parents == p).tolist() for p in (4, 0, 5, 2, 1, 3)]
    split = [by_parent[0] + by_parent[1], by_parent[2], by_parent[3] + by_parent[4] + by_parent[5]]
    spread = [list(range(0, 40, 3)), list(range(1, 40, 3)), list(range(2, 40, 3))]  # parents cut
    missing = [[j for j in range(40) if j not in (5, 17)]]  # nodes 5 and 17 without weights
    W_missing = W.tolil()
    W_missing[:, [5, 17]] = 0
    without = ChunkedLevel.build(sp.csc_matrix(W_missing), C)
    for groups, expected in ((split, whole), (spread, whole), (missing, without)):
        pieces = _pieces(W, groups)
        level = ChunkedLevel.from_pieces(pieces, C, 31)
        assert pieces == []  # consumed: each piece is dropped once laid out
        for name in ("child_ptr", "children", "feat_ptr", "feat", "entry_ptr", "local", "val"):
            got, want = getattr(level, name), getattr(expected, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert (whole.to_csr() != W).nnz == 0


def test_pieces_that_do_not_fit_are_refused() -> None:
    W = sp.random(5, 4, density=0.6, format="csc", random_state=1, dtype=np.float32)
    C = assignment([0, 0, 1, 1], 2)
    good = _pieces(W, [[0, 1], [2, 3]])
    nodes, counts, rows, values = good[0]
    bad = {
        "counts do not add up": (nodes, counts + 1, rows, values),
        "nodes outside": (nodes + 3, counts, rows, values),
        "weights outside rows": (nodes, counts, rows + 5, values),
    }
    for message, piece in bad.items():
        with pytest.raises(ValueError, match=message):
            ChunkedLevel.from_pieces([piece, good[1]], C, 5)
    with pytest.raises(ValueError, match="more than one piece"):
        ChunkedLevel.from_pieces([good[0], good[0]], C, 5)


@pytest.mark.parametrize("part_entries", [1, 7, 50, 1 << 24])
def test_a_level_saved_by_ranges_of_rows_is_the_file_of_its_matrix(
    tmp_path: Path, part_entries: int
) -> None:
    # saving never holds a level's whole matrix: the file is written a range of rows at a time,
    # byte for byte the one scipy's save_npz writes of the matrix (ranges of 1 entry to all)
    W = sp.random(31, 40, density=0.3, format="lil", random_state=5, dtype=np.float32)
    W[3, :] = 0  # an empty row among them
    W = W.tocsc()
    parents = np.random.default_rng(6).integers(0, 6, size=40)
    for matrix in (W, sp.csc_matrix(W.shape, dtype=np.float32)):
        level = ChunkedLevel.build(matrix, assignment(parents.tolist(), 6))
        indptr = level.csr_indptr()
        save_csr(tmp_path / "whole.npz", level.to_csr())
        rows = partial(level.csr_rows, indptr)
        save_csr_rows(tmp_path / "ranges.npz", W.shape, indptr, rows, part_entries)
        assert (tmp_path / "ranges.npz").read_bytes() == (tmp_path / "whole.npz").read_bytes()
        assert (load_csr(tmp_path / "ranges.npz") != matrix).nnz == 0


def test_cost_ranges_by_hand() -> None:
    assert beam.cost_ranges(np.array([3, 4, 2, 9, 0, 1]), 7) == [(0, 2), (2, 3), (3, 4), (4, 6)]
    assert beam.cost_ranges(np.array([], dtype=np.int64), 5) == []
