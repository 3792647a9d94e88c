"""The one row ranking (score descending, ties by the lower column, NaN last), hand-checked."""

from __future__ import annotations

from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from xmc_core.app.predictions import ranked_lists
from xmc_core.evaluation.metrics import ranked_labels
from xmc_core.evaluation.ranking import RankedRows, top_k
from xmc_core.features.labels import LabelIndex

NAN, INF = np.nan, np.inf


def tied_scores(with_nan: bool = True) -> sp.csr_matrix:
    """4 rows stored out of column order (not canonical).

    row 0: a tie at 0.5 (columns 3, 1) and an explicit zero; row 1: empty;
    row 2: a tie at -1 (columns 5, 2), -inf and NaN (or -2); row 3: column 1 stored twice
    (0.25 + 0.25 = 0.5, tied with column 0).
    """
    data = [0.5, 0.5, 0.9, 0.0, -1.0, -1.0, -INF, NAN if with_nan else -2.0, 0.25, 0.5, 0.25]
    indices = [3, 1, 4, 0, 5, 2, 0, 1, 1, 0, 1]
    return sp.csr_matrix((np.float32(data), indices, [0, 4, 4, 8, 11]), shape=(4, 6))


def rows_of(ranked: RankedRows) -> list[list[int]]:
    return [ranked.cols[lo:hi].tolist() for lo, hi in pairwise(ranked.offsets.tolist())]


def test_full_ranking_breaks_ties_by_lower_column_and_puts_nan_last() -> None:
    scores = tied_scores()
    stored = scores.indices.copy()
    ranked = top_k(scores)
    assert rows_of(ranked) == [[4, 1, 3, 0], [], [2, 5, 0, 1], [0, 1]]
    assert ranked.offsets.tolist() == [0, 4, 4, 8, 10]
    np.testing.assert_array_equal(
        ranked.vals, np.float32([0.9, 0.5, 0.5, 0.0, -1, -1, -INF, NAN, 0.5, 0.5])
    )
    assert ranked.vals.dtype == np.float32 and ranked.shape == (4, 6)
    assert np.array_equal(scores.indices, stored)  # the input is not modified


def test_top_k_cuts_rows_pads_and_marks() -> None:
    ranked = top_k(tied_scores(), 2)
    assert rows_of(ranked) == [[4, 1], [], [2, 5], [0, 1]]
    assert ranked.padded(3).tolist() == [[4, 1, -1], [-1, -1, -1], [2, 5, -1], [0, 1, -1]]
    marks = ranked.indicator()
    assert marks.dtype == np.float32 and marks.has_canonical_format
    assert marks.toarray().tolist() == [
        [0, 1, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 1],
        [1, 1, 0, 0, 0, 0],
    ]


def test_rows_of_very_different_lengths_rank_the_same_way() -> None:
    # row 1 has 100 equal scores (a longer length class than rows 0 and 2), stored backwards.
    long_cols = np.arange(199, 99, -1)
    indices = np.r_[[7, 5], long_cols, [2, 9, 4]]
    data = np.r_[[3.0, 2.0], np.ones(100), [1.0, 1.0, 5.0]]
    scores = sp.csr_matrix((data, indices, [0, 2, 102, 105]), shape=(3, 200))
    ranked = top_k(scores, 3)
    assert rows_of(ranked) == [[7, 5], [100, 101, 102], [4, 2, 9]]
    assert rows_of(top_k(scores))[1] == list(range(100, 200))


def test_every_caller_ranks_alike() -> None:
    scores = tied_scores(with_nan=False)
    uncalibrated = SimpleNamespace(labels=LabelIndex(list("abcdef")), calibrator=None)
    cols = ranked_lists(uncalibrated, scores)  # type: ignore[arg-type]
    names, vals = cols["labels"], cols["scores"]
    assert cols["probabilities"] == [None] * 4
    assert names == [["e", "b", "d", "a"], [], ["c", "f", "b", "a"], ["a", "b"]]
    assert vals[3] == [0.5, 0.5]
    ids, valid = ranked_labels(scores, 4)
    assert ids.tolist() == [[4, 1, 3, 0], [-1] * 4, [2, 5, 1, 0], [0, 1, -1, -1]]
    assert valid.sum() == 10


def test_k_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="k=0"):
        top_k(tied_scores(), 0)
