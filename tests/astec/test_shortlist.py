"""Module 2 by hand: label vectors, the neighbours' votes, the merged shortlist."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.astec.shortlist import (
    Shortlister,
    drop_own,
    label_vectors,
    merge,
    neighbour_votes,
    top_per_row,
)


def test_label_vectors_are_unit_means_of_their_documents() -> None:
    U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], np.float32)
    Y = sp.csr_matrix(np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32))
    V, has = label_vectors(U, Y)
    s = np.sqrt(0.5)
    assert np.allclose(V, [[s, s], [1.0, 0.0], [0.0, 0.0]])
    assert has.tolist() == [True, True, False]  # label 2 has no document: left out of the index


def test_a_training_document_is_not_its_own_neighbour() -> None:
    neighbours = np.array([[4, 2, 7], [1, 3, 0]])  # document 2 found itself; document 9 not
    sims = np.array([[0.875, 0.75, 0.125], [0.5, 0.25, 0.0]], np.float32)
    ids, kept = drop_own(neighbours, sims, np.array([2, 9]))
    assert ids.tolist() == [[4, 7], [1, 3]] and kept.tolist() == [[0.875, 0.125], [0.5, 0.25]]


def test_votes_are_cosine_weighted_shares_of_the_neighbours() -> None:
    doc_labels = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], np.float32))
    neighbours = np.array([[0, 1, 2], [2, -1, 0]])
    sims = np.array([[0.6, 0.2, -0.5], [0.5, 0.9, 0.5]], np.float32)
    votes = neighbour_votes(neighbours, sims, doc_labels, cap=4).toarray()
    # document 0: weights 0.6, 0.2, 0 (negative cosine) over 0.8; document 1: 0.5, -, 0.5
    assert np.allclose(votes, [[0.75, 1.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    capped = neighbour_votes(neighbours, sims, doc_labels, cap=1).toarray()
    assert np.allclose(capped, [[0.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])  # ties: lower


def test_top_per_row_keeps_the_largest() -> None:
    M = sp.csr_matrix(np.array([[0.125, 0.5, 0.25], [0.0, 0.75, 0.0]], np.float32))
    assert top_per_row(M, 2).toarray().tolist() == [[0, 0.5, 0.25], [0, 0.75, 0]]


def test_the_shortlist_is_the_union_with_the_votes_as_similarity() -> None:
    labels = np.array([[3, 0, -1], [1, 2, 4]])
    votes = sp.csr_matrix(np.array([[0.0, 0.0, 0.5, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]]))
    got, sims = merge(labels, votes)
    assert got.tolist() == [[0, 2, 3], [1, 2, 4]]
    assert sims.tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]


def test_without_neighbours_the_similarity_is_the_label_cosine() -> None:
    cfg = AstecConfig(ann="flat", n_neighbours=0, shortlist_size=2)
    U = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1]], np.float32))
    shortlister = Shortlister.build(U, Y, cfg)[0]
    assert shortlister.docs is None
    labels, sims = shortlister.shortlists(np.array([[0.6, 0.8]], np.float32))
    assert labels.tolist() == [[2, 0]] and np.allclose(sims, [[0.8, 0.6]])
    with_docs = Shortlister.build(U, Y, cfg.model_copy(update={"n_neighbours": 1}))[0]
    labels, sims = with_docs.shortlists(np.array([[0.6, 0.8]], np.float32))
    assert labels.tolist() == [[0, 2]] and np.allclose(sims, [[0.0, 1.0]])  # the vote
    labels, _ = with_docs.shortlists(U[:1], own=np.array([0]))  # its neighbour: document 1
    assert labels.tolist() == [[0, 2]]
