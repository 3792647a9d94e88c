"""Astec's saved parts: the fused score by hand, prediction scores exactly the ANN shortlist,
the index round-trips without pickle and a damaged one is refused before faiss reads it."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.config import PredictConfig
from xmc_core.errors import ArtifactError
from xmc_core.evaluation.ranking import top_k_dense
from xmc_core.families.astec import ann as ann_module
from xmc_core.families.astec.ann import AnnIndex
from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.dense import Block, unit_rows
from xmc_core.families.astec.parts import AstecEncoder, AstecRanker
from xmc_core.families.astec.shortlist import Shortlister
from xmc_core.storage.artifacts import save_arrays, sha256_file

FLAT = AstecConfig(ann="flat", shortlist_size=3, n_neighbours=0, threads=1)


def sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))


def three_label_ranker(cfg: AstecConfig = FLAT, beta: float = 0.3) -> AstecRanker:
    V = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], np.float32)  # unit label vectors
    shortlister = Shortlister(cfg, AnnIndex.build(V, np.arange(3), cfg))
    W = np.array([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]], np.float32)
    b = np.array([0.0, 1.0, -2.0], np.float32)
    ranker = AstecRanker(cfg, PredictConfig(topk=3))
    return ranker.set_parts(shortlister, W, b, Block.identity(2), beta)


def test_the_fused_score_by_hand() -> None:
    ranker = three_label_ranker()
    z = np.array([[3.0, 4.0]], np.float32)  # unit: (0.6, 0.8)
    got = ranker.predict(sp.csr_matrix(z)).toarray()[0]
    # label j: 0.3 * sigmoid(W_j . z + b_j) + 0.7 * sigmoid(cos(z, v_j))
    want = [
        0.3 * sigmoid(1 * 3 + 2 * 4 + 0) + 0.7 * sigmoid(0.6),
        0.3 * sigmoid(-1 * 3 + 0.5 * 4 + 1) + 0.7 * sigmoid(0.6 * 0.6 + 0.8 * 0.8),
        0.3 * sigmoid(3 * 4 - 2) + 0.7 * sigmoid(0.8),
    ]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    top1 = ranker.predict(sp.csr_matrix(z), topk=1)
    assert top1.indices.tolist() == [int(np.argmax(want))]


@pytest.mark.parametrize("n_neighbours", [0, 2])
def test_prediction_scores_exactly_the_ann_shortlist(n_neighbours: int) -> None:
    rng = np.random.default_rng(0)
    cfg = AstecConfig(hnsw_m=8, ef_construction=40, ef_search=40, shortlist_size=7,
                      n_neighbours=n_neighbours, threads=1)  # fmt: skip
    U = unit_rows(rng.standard_normal((40, 8)).astype(np.float32))  # training documents
    Y = sp.random(40, 60, density=0.03, format="csr", random_state=2, dtype=np.float32)
    Y.data[:] = 1.0
    shortlister = Shortlister.build(U, Y, cfg)[0]
    W = rng.standard_normal((60, 8)).astype(np.float32)
    ranker = AstecRanker(cfg, PredictConfig()).set_parts(
        shortlister, W, np.zeros(60, np.float32), Block.identity(8), 0.5
    )
    Z = rng.standard_normal((10, 8)).astype(np.float32)
    scores = ranker.predict(sp.csr_matrix(Z), topk=60)
    _, by_label = shortlister.labels.search(unit_rows(Z), cfg.shortlist_size)
    by_docs = [set()] * 10
    if n_neighbours:
        _, neighbours = shortlister.docs.search(unit_rows(Z), n_neighbours)
        by_docs = [set(Y[row].indices.tolist()) for row in neighbours]
        assert max(len(labels) for labels in by_docs) <= 7  # the cap on votes does not bind
    for row in range(10):
        got = scores.indices[scores.indptr[row] : scores.indptr[row + 1]]
        want = set(by_label[row][by_label[row] >= 0].tolist()) | by_docs[row]
        assert sorted(got.tolist()) == sorted(want)
        assert set(got) <= set(np.flatnonzero(Y.getnnz(axis=0)))  # labels with documents


def test_prediction_queries_on_predict_threads_with_the_same_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    U = unit_rows(rng.standard_normal((200, 8)).astype(np.float32))
    Y = sp.random(200, 30, density=0.1, format="csr", random_state=3, dtype=np.float32)
    Y.data[:] = 1.0
    Z = sp.csr_matrix(rng.standard_normal((300, 8)).astype(np.float32))
    W = rng.standard_normal((30, 8)).astype(np.float32)
    cfg = AstecConfig(hnsw_m=8, ef_construction=40, ef_search=20, shortlist_size=5,
                      n_neighbours=3, threads=1)  # fmt: skip
    shortlister = Shortlister.build(U, Y, cfg)[0]
    seen: list[int | None] = []
    real = ann_module.faiss_threads
    monkeypatch.setattr(
        "xmc_core.families.astec.shortlist.faiss_threads", lambda t: seen.append(t) or real(t)
    )
    got = []
    for threads in (1, 2):
        ranker = AstecRanker(cfg.model_copy(update={"predict_threads": threads}), PredictConfig())
        ranker.set_parts(shortlister, W, np.zeros(30, np.float32), Block.identity(8), 0.5)
        got.append(ranker.predict(Z, topk=5))
        assert seen[-1] == threads
    assert got[0].nnz == 1500
    assert np.array_equal(got[0].indices, got[1].indices)
    assert np.array_equal(got[0].data, got[1].data)


def test_ranking_is_by_score_then_lower_label() -> None:
    labels = np.array([[5, 2, -1, 7]], np.int64)
    scores = np.array([[0.5, 0.5, 0.875, 0.75]], np.float32)  # -1: never ranked
    top, vals = top_k_dense(scores, 4, labels)
    assert top.tolist() == [[7, 2, 5, -1]] and vals[0, :3].tolist() == [0.75, 0.5, 0.5]


def test_ranker_round_trips_without_pickle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    cfg = AstecConfig(hnsw_m=4, ef_construction=8, ef_search=8, shortlist_size=5, n_neighbours=2)
    U = unit_rows(rng.standard_normal((30, 4)).astype(np.float32))
    Y = sp.csr_matrix((rng.random((30, 12)) < 0.2).astype(np.float32))
    W = rng.standard_normal((12, 4)).astype(np.float32)
    block = Block(np.eye(4, dtype=np.float32), np.ones(4, np.float32), 0.5)
    ranker = AstecRanker(cfg, PredictConfig(topk=4)).set_parts(
        Shortlister.build(U, Y, cfg)[0], W, np.zeros(12, np.float32), block, 0.3
    )
    ranker.save(tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["ann"] == "hnsw" and meta["beta"] == 0.3
    assert len(meta["label_index_sha256"]) == len(meta["doc_index_sha256"]) == 64

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    loaded = AstecRanker.load(tmp_path / "r")
    Z = sp.csr_matrix(rng.standard_normal((6, 4)).astype(np.float32))
    assert (loaded.predict(Z) != ranker.predict(Z)).nnz == 0 and ranker.predict(Z).nnz == 24
    assert loaded.shortlister_.docs is not None and loaded.block_.gate == 0.5


def test_a_damaged_index_is_refused_before_faiss_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("damaged", "forged"):
        three_label_ranker().save(tmp_path / name)
    faiss = ann_module.faiss_module()
    read: list[object] = []
    monkeypatch.setattr(faiss, "deserialize_index", lambda blob: read.append(blob))
    damaged = tmp_path / "damaged" / "label_index.npz"
    damaged.write_bytes(damaged.read_bytes()[:-100])  # meta.json's checksum no longer fits
    with pytest.raises(ArtifactError, match=r"label_index\.npz: checksum mismatch"):
        AstecRanker.load(tmp_path / "damaged")
    # a forged index whose file checksum in meta.json was updated too: the index's own sha256
    forged = tmp_path / "forged" / "label_index.npz"
    with np.load(forged, allow_pickle=False) as data:
        arrays = {k: data[k].copy() for k in data.files}
    arrays["index"][-1] ^= 0xFF
    save_arrays(forged, **arrays)
    meta_path = forged.with_name("meta.json")
    meta = json.loads(meta_path.read_text())
    meta["files"]["label_index.npz"] = sha256_file(forged)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match=r"label_index\.npz: the ANN index does not match"):
        AstecRanker.load(tmp_path / "forged")
    assert read == []  # faiss parsed neither


def test_encoder_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    block = Block(rng.standard_normal((3, 3)).astype(np.float32), np.ones(3, np.float32), 0.25)
    encoder = AstecEncoder(AstecConfig(), rng.standard_normal((5, 3)).astype(np.float32), block,
                           {"best_epoch": 2})  # fmt: skip
    encoder.save(tmp_path / "e")
    loaded = AstecEncoder.load(tmp_path / "e")
    X = sp.random(4, 5, density=0.6, format="csr", dtype=np.float32, random_state=0)
    assert np.array_equal(loaded.encode(X), encoder.encode(X))
    assert loaded.record == {"best_epoch": 2} and loaded.block.gate == 0.25


def test_predicting_imports_neither_torch_nor_faiss_until_an_index_is_read() -> None:
    code = (
        "import sys, xmc_core.families.astec.parts, xmc_core.families.astec.graph\n"
        "print('torch' in sys.modules, 'faiss' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
