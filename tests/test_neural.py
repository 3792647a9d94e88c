"""The neural families' shared training pieces, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from xmc_core.families.astec.config import AstecConfig
from xmc_core.families.neural_xc.config import NeuralXcConfig
from xmc_core.families.xml_cnn.config import XmlCnnConfig
from xmc_core.neural import epoch_seed, prior_logits, split_rows, torch_threads
from xmc_core.threads import scoped_threads


@pytest.mark.parametrize("section", [AstecConfig, NeuralXcConfig, XmlCnnConfig])
def test_validation_rows_are_a_seeded_part_of_train(section: type) -> None:
    cfg = section(val_fraction=0.1, val_max_docs=25, seed=5)
    train, val = split_rows(300, cfg)
    assert len(val) == 25 and len(train) == 275  # 10% = 30, at most 25
    assert not set(train) & set(val) and set(train) | set(val) == set(range(300))
    assert np.array_equal(split_rows(300, cfg)[1], val)
    assert not np.array_equal(split_rows(300, cfg.model_copy(update={"seed": 6}))[1], val)
    assert len(split_rows(1, cfg)[1]) == 0 and len(split_rows(2, cfg)[1]) == 1


def test_prior_logits_are_the_smoothed_log_odds_of_each_target() -> None:
    Y = sp.csr_matrix(np.array([[1, 0, 1], [1, 0, 0], [1, 0, 0]], dtype=np.float32))
    p = np.array([3.5, 0.5, 1.5]) / 4.0  # (count + 0.5) / (n + 1)
    assert prior_logits(Y) == pytest.approx(np.log(p / (1 - p)), rel=1e-6)
    assert prior_logits(Y).dtype == np.float32


def test_torch_threads_are_restored_and_epoch_seeds_differ() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
    assert len({epoch_seed(0, e) for e in range(-2, 5)}) == 7
    assert epoch_seed(3, 1) == epoch_seed(3, 1) != epoch_seed(4, 1)


def test_scoped_threads_set_back_after_an_error_and_leave_none_alone() -> None:
    pool = {"n": 4}
    calls: list[int] = []

    def put(n: int) -> None:
        calls.append(n)
        pool["n"] = n

    with pytest.raises(RuntimeError), scoped_threads(lambda: pool["n"], put, 1):
        assert pool["n"] == 1
        raise RuntimeError("stop")
    assert pool["n"] == 4 and calls == [1, 4]
    with scoped_threads(lambda: pool["n"], put, None):
        assert pool["n"] == 4
    assert calls == [1, 4]
