"""Hierarchical label tree: structure, balance, determinism, clustering quality, save/load."""

from __future__ import annotations

import logging
from functools import partial

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import TreeConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.linear import tree as tree_mod
from xmc_core.linear.tree import LabelTree, binary_depth, check_chain, tree_depths
from xmc_core.progress import RateLog


def random_z(n_labels: int, n_dims: int = 60, seed: int = 0, zero_rows: float = 0.0):
    """Row-normalized sparse label features, csr (n_labels, n_dims) float32."""
    rng = np.random.default_rng(seed)
    z = sp.random(n_labels, n_dims, density=0.15, random_state=rng, format="csr")
    z = sp.csr_matrix(z.multiply(1.0 / np.maximum(sp.linalg.norm(z, axis=1), 1e-12)[:, None]))
    keep = rng.random(n_labels) >= zero_rows
    return sp.csr_matrix(sp.diags(keep.astype(float)) @ z).astype(np.float32)


def planted_z(n_groups: int = 8, per_group: int = 50, seed: int = 0):
    """Well-separated groups with shuffled label ids: (csr (n, d) float32, group int (n,))."""
    rng = np.random.default_rng(seed)
    group = rng.permutation(np.arange(n_groups * per_group) % n_groups)
    centers = np.zeros((n_groups, n_groups * 10 + 20))
    for g in range(n_groups):
        centers[g, g * 10 : (g + 1) * 10] = rng.uniform(0.5, 1.0, 10)
    x = centers[group] + 0.02 * np.abs(rng.standard_normal((group.size, centers.shape[1])))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return sp.csr_matrix(x.astype(np.float32)), group


def cluster_sizes(tree: LabelTree, level: int) -> np.ndarray:
    """Number of labels in each cluster of ``level``."""
    return np.bincount(tree.label_to_cluster(level), minlength=tree.level_sizes()[level])


def assert_well_formed(tree: LabelTree, cfg: TreeConfig) -> None:
    """Chain shapes, one 1 per row, contiguous siblings, balance, leaf size, label mapping."""
    assert check_chain(tree.C) is None
    assert tree.C[0].shape == (tree.level_sizes()[0], 1)
    for t in range(1, tree.depth):
        assert tree.C[t].shape == (tree.level_sizes()[t], tree.level_sizes()[t - 1])
        assert np.array_equal(tree.C[t].sum(axis=1).A1, np.ones(tree.C[t].shape[0]))
    for t in range(1, tree.depth - 1):
        assert np.all(np.diff(tree.C[t].indices) >= 0), "siblings must be contiguous"
    for t in range(tree.depth - 1):
        sizes = cluster_sizes(tree, t)
        parents = tree.C[t].indices
        for p in np.unique(parents):
            siblings = sizes[parents == p]
            assert siblings.max() - siblings.min() <= 1, f"unbalanced siblings at level {t}"
        child = tree.label_to_cluster(t + 1)
        assert np.array_equal(tree.label_to_cluster(t), tree.C[t + 1].indices[child])
    assert cluster_sizes(tree, tree.depth - 2).max() <= cfg.max_leaf_size
    assert np.array_equal(tree.label_to_cluster(-1), np.arange(tree.n_labels))


@pytest.mark.parametrize(
    ("n_labels", "branching", "leaf", "expected"),
    [
        (1000, 4, 100, [4, 16, 1000]),  # D = 4 binary depths, levels at depths 2 and 4
        (1000, 16, 100, [16, 1000]),
        (997, 8, 60, [4, 32, 997]),  # D = 5: depths 2 and 5 (the top level takes the rest)
        (300, 2, 100, [2, 4, 300]),
        (50, 16, 100, [2, 50]),  # fewer labels than a leaf holds: still one level of clusters
        (100, 16, 100, [2, 100]),
    ],
)
def test_level_sizes_structure_and_balance(n_labels, branching, leaf, expected):
    cfg = TreeConfig(branching=branching, max_leaf_size=leaf)
    tree = LabelTree.build(random_z(n_labels), cfg)
    assert tree.level_sizes() == expected
    assert tree.depth == len(expected)
    assert_well_formed(tree, cfg)


def test_depth_arithmetic_matches_pecos_layout():
    assert binary_depth(42_850, 100) == 9
    assert [2**d for d in tree_depths(9, 16)] == [2, 32, 512]  # as PECOS's ClusterChain
    assert tree_depths(8, 16) == [4, 8]
    assert tree_depths(1, 16) == [1]
    assert binary_depth(1600, 100) == 4 and binary_depth(1601, 100) == 5


def test_zero_rows_are_placed():
    cfg = TreeConfig(branching=4, max_leaf_size=20)
    z = random_z(333, zero_rows=0.3, seed=3)
    assert (np.diff(z.indptr) == 0).sum() > 50
    tree = LabelTree.build(z, cfg)
    assert_well_formed(tree, cfg)
    all_zero = LabelTree.build(sp.csr_matrix((64, 10), dtype=np.float32), cfg)
    assert_well_formed(all_zero, cfg)


@pytest.mark.parametrize(
    ("n_labels", "leaf", "expected"), [(1, 100, [1, 1]), (2, 100, [2, 2]), (2, 1, [2, 2])]
)
def test_tiny_inputs(n_labels, leaf, expected):
    cfg = TreeConfig(branching=16, max_leaf_size=leaf)
    tree = LabelTree.build(random_z(n_labels, n_dims=5), cfg)
    assert tree.level_sizes() == expected
    assert_well_formed(tree, cfg)


def test_single_labels_are_not_split_further():
    cfg = TreeConfig(branching=2, max_leaf_size=1)
    tree = LabelTree.build(random_z(3), cfg)  # D = 2 but a third-of-a-pair cannot split
    assert tree.level_sizes() == [2, 3, 3]
    assert_well_formed(tree, cfg)


def test_same_seed_same_tree_any_thread_count():
    z = random_z(700, seed=1)
    cfg = TreeConfig(branching=4, max_leaf_size=30, seed=7)
    first = LabelTree.build(z, cfg)
    saved = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = LabelTree.build(z, cfg)
    finally:
        numba.set_num_threads(saved)
    for a, b in zip(first.C, single.C, strict=True):
        assert (a != b).nnz == 0 and a.shape == b.shape
    other = LabelTree.build(z, cfg.model_copy(update={"seed": 8}))
    assert not np.array_equal(other.label_to_cluster(-2), first.label_to_cluster(-2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_groups_get_their_own_subtree(seed):
    z, group = planted_z(seed=seed)
    for branching, level in ((8, 0), (2, 2)):  # the level with 8 clusters
        cfg = TreeConfig(branching=branching, max_leaf_size=50, seed=seed)
        tree = LabelTree.build(z, cfg)
        assert tree.level_sizes()[level] == 8
        cluster = tree.label_to_cluster(level)
        for g in range(8):
            assert np.unique(cluster[group == g]).size == 1, f"group {g} was split"
        assert np.unique(cluster).size == 8


def split_objective(z: sp.csr_matrix, side: np.ndarray) -> float:
    """Spherical 2-means objective of a split: sum over halves of |sum of unit rows|."""
    unit = z.multiply(1.0 / np.maximum(sp.linalg.norm(z, axis=1), 1e-12)[:, None]).toarray()
    return sum(np.linalg.norm(unit[side == s].sum(axis=0)) for s in (0, 1))


def test_restarts_keep_the_best_split():
    gains = []
    for seed in range(6):
        z = random_z(150, seed=seed)  # D = 1: a single binary split
        objective = {}
        for restarts in (1, 4):
            cfg = TreeConfig(branching=2, max_leaf_size=100, seed=seed, kmeans_restarts=restarts)
            tree = LabelTree.build(z, cfg)
            assert tree.level_sizes() == [2, 150]
            objective[restarts] = split_objective(z, tree.label_to_cluster(0))
        # restart 1 draws the same seed pair as a single run, so the best of 4 is never worse
        assert objective[4] >= objective[1] - 1e-9
        gains.append(objective[4] - objective[1])
    assert max(gains) > 1e-6


def test_save_load_roundtrip(tmp_path):
    cfg = TreeConfig(branching=4, max_leaf_size=25, seed=3)
    tree = LabelTree.build(random_z(400), cfg)
    tree.save(tmp_path / "tree")
    loaded = LabelTree.load(tmp_path / "tree")
    assert loaded.level_sizes() == tree.level_sizes()
    assert loaded.config == cfg
    for a, b in zip(tree.C, loaded.C, strict=True):
        assert a.shape == b.shape and (a != b).nnz == 0


def test_corrupted_or_foreign_folder_fails(tmp_path):
    tree = LabelTree.build(random_z(200), TreeConfig(branching=4, max_leaf_size=25))
    tree.save(tmp_path / "tree")
    path = tmp_path / "tree" / "C1.npz"
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError):
        LabelTree.load(tmp_path / "tree")
    with pytest.raises(ArtifactError):
        LabelTree.load(tmp_path / "missing")


def test_rejects_bad_inputs():
    with pytest.raises(InputError):
        LabelTree.build(np.ones((3, 3)), TreeConfig())
    with pytest.raises(InputError):
        LabelTree.build(sp.csr_matrix((0, 5), dtype=np.float32), TreeConfig())
    with pytest.raises(ValueError, match="one 1 per row"):
        LabelTree([sp.csr_matrix(np.ones((2, 1))), sp.csr_matrix(np.ones((3, 2)))])


def test_duplicate_entries_and_unnormalized_rows_are_handled():
    z = random_z(150, seed=5)
    cfg = TreeConfig(branching=4, max_leaf_size=20)
    rows = [slice(z.indptr[r], z.indptr[r + 1]) for r in range(z.shape[0])]
    copies = [1 + r % 2 for r in range(z.shape[0])]  # odd rows store every entry twice
    doubled = sp.csr_matrix(
        (
            np.concatenate(
                [np.tile(z.data[s], k) * 1.5 for s, k in zip(rows, copies, strict=True)]
            ),
            np.concatenate([np.tile(z.indices[s], k) for s, k in zip(rows, copies, strict=True)]),
            np.r_[0, np.cumsum(np.diff(z.indptr) * copies)],
        ),
        shape=z.shape,
    )
    assert not doubled.has_canonical_format
    reference = LabelTree.build(z, cfg).label_to_cluster(-2)
    assert np.array_equal(LabelTree.build(doubled, cfg).label_to_cluster(-2), reference)


def test_top_half_matches_a_stable_sort():
    from xmc_core.linear._tree_kernels import _top_half

    rng = np.random.default_rng(0)
    for n in (2, 3, 10, 101, 1000):
        for n_distinct in (1, 3, n):
            scores = rng.integers(0, n_distinct, n).astype(np.float64)
            n_a = (n + 1) // 2
            expected = np.zeros(n, dtype=np.int8)
            expected[np.argsort(-scores, kind="stable")[:n_a]] = 1
            side = np.full(n, -1, dtype=np.int8)
            assert _top_half(scores, n_a, side)
            assert np.array_equal(side, expected)
            assert not _top_half(scores, n_a, side)


def test_long_builds_log_the_depths_done(monkeypatch, caplog):
    z, cfg = random_z(1000, seed=2), TreeConfig(branching=4, max_leaf_size=100)
    quiet = LabelTree.build(z, cfg)
    ticks = iter(range(10, 1000, 10))  # every clock reading 10 s after the previous one
    monkeypatch.setattr(tree_mod, "RateLog", partial(RateLog, clock=lambda: next(ticks)))
    with caplog.at_level(logging.INFO, logger=tree_mod.log.name):
        logged = LabelTree.build(z, cfg)
    # 4 binary depths, 10 s each: after the third, 30 s have passed (0.1 depths/s, 1 left)
    assert [r.getMessage() for r in caplog.records] == [
        "label tree of 1,000 labels: 3/4 depths (75%), 0.1 depths/s, 10s left"
    ]
    assert all((a != b).nnz == 0 for a, b in zip(quiet.C, logged.C, strict=True))
