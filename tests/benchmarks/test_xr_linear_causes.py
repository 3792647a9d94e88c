"""benchmarks/xr_linear_causes.py: its variants, the old PIFA it compares with, its medians."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import xr_linear_causes as causes

from xmc_core.features.pifa import pifa, pifa_partial

# doc 0 [3, 4, 0] with label 0; doc 1 [0, 0, 2] with labels 0 and 1
X = sp.csr_matrix(np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]], dtype=np.float32))
Y = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 1.0]], dtype=np.float32))


def test_the_old_pifa_weighs_every_document_one_and_ours_one_over_sqrt_labels() -> None:
    old = causes.y1_pifa(X, Y).toarray()
    # label 0 = [.6, .8, 0] + [0, 0, 1], norm sqrt(2); label 1 = [0, 0, 1]
    np.testing.assert_allclose(old, [[0.6 / np.sqrt(2), 0.8 / np.sqrt(2), 1 / np.sqrt(2)],
                                     [0, 0, 1]], rtol=1e-6)  # fmt: skip
    new = pifa([pifa_partial(X, Y)]).toarray()
    # doc 1 counts 1/sqrt(2) in label 0: [.6, .8, .7071] / sqrt(1.5)
    np.testing.assert_allclose(new[0], np.array([0.6, 0.8, 1 / np.sqrt(2)]) / np.sqrt(1.5),
                               rtol=1e-6)  # fmt: skip
    np.testing.assert_allclose(new[1], [0, 0, 1], rtol=1e-6)


def test_variants_parse_with_the_default_first_and_refuse_repeats() -> None:
    got = causes.parse_variants(["iter100:ranker.max_iter=100", "two:a.b=1,c.d=[1.0]"])
    assert got == {"default": [], "iter100": ["ranker.max_iter=100"], "two": ["a.b=1", "c.d=[1.0]"]}
    for bad in (["x:a=1", "x:b=2"], ["no-colon"], ["default:a=1"]):
        with pytest.raises(SystemExit):
            causes.parse_variants(bad)


def test_medians_and_table_over_seeds() -> None:
    def seed(p1: float) -> dict:
        return {"runs": {"default/ours": {"P@1": p1, "P@5": 1.0, "PSP@5": 2.0}}}

    seeds = [seed(64.0), seed(65.0), seed(63.0)]
    medians = causes.medians(seeds)
    assert medians == {"default/ours": {"P@1": 64.0, "P@5": 1.0, "PSP@5": 2.0}}
    table = causes.table({"bibtex-bow": {"medians": medians, "seeds": seeds}})
    assert (
        table.splitlines()[-1]
        == "| bibtex-bow | default/ours | 64.00 | 1.00 | 2.00 | 64.00, 65.00, 63.00 |"
    )
