"""Score-to-probability maps: isotonic (pool adjacent violators) and Platt, on hand-made pairs."""

from __future__ import annotations

import numpy as np
import pytest

from xmc_core.calibration.maps import IsotonicMap, PlattMap, map_from_dict


def test_isotonic_pools_the_violators_and_interpolates_between_block_centres() -> None:
    m = IsotonicMap.fit(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 1, 0, 1]))
    # blocks: {1} -> 0, {2, 3} -> 0.5 (1 then 0 violates; centre 2.5), {4} -> 1
    assert m.x.tolist() == [1.0, 2.5, 4.0] and m.y.tolist() == [0.0, 0.5, 1.0]
    got = m(np.array([0.0, 1.75, 2.5, 3.25, 10.0]))
    assert np.allclose(got, [0.0, 0.25, 0.5, 0.75, 1.0], rtol=0, atol=1e-15)


def test_isotonic_pools_equal_scores_first_and_weighs_the_pairs() -> None:
    m = IsotonicMap.fit(np.array([1.0, 1.0, 2.0]), np.array([0, 1, 1]))
    assert m.x.tolist() == [1.0, 2.0] and m.y.tolist() == [0.5, 1.0]
    w = IsotonicMap.fit(np.array([1.0, 2.0]), np.array([1, 0]), np.array([3.0, 1.0]))
    # one block: value (3 * 1 + 0) / 4, centre (3 * 1 + 1 * 2) / 4
    assert w.x.tolist() == [1.25] and w.y.tolist() == [0.75]
    assert w(np.array([0.0, 5.0])).tolist() == [0.75, 0.75]


def test_platt_rises_with_the_score_and_sits_at_its_log_loss_minimum() -> None:
    rng = np.random.default_rng(0)
    s = rng.uniform(0.001, 1.0, 2000)
    y = (rng.uniform(size=2000) < s).astype(np.float64)  # relevant with probability = score
    m = PlattMap.fit(s, y)
    assert m.a > 0 and np.all(np.diff(m(np.sort(s))) >= 0)
    n_pos, n_neg = y.sum(), len(y) - y.sum()
    target = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    p, t = m(s), np.log(s)
    gradient = [np.dot(p - target, t), np.sum(p - target)]
    assert np.abs(gradient).max() < 1e-6 * len(s)


def test_platt_falls_back_to_the_prior_when_scores_fall_with_relevance() -> None:
    m = PlattMap.fit(np.array([0.9, 0.8, 0.2, 0.1]), np.array([0, 0, 1, 1]))
    assert m.a == 0.0 and m.b == pytest.approx(np.log(3 / 3))
    assert m(np.array([0.5])) == pytest.approx([0.5])


def test_maps_round_trip_and_bad_ones_are_refused() -> None:
    iso = IsotonicMap.fit(np.array([1.0, 2.0]), np.array([0, 1]))
    again = map_from_dict(iso.to_dict())
    assert isinstance(again, IsotonicMap) and again.x.tolist() == iso.x.tolist()
    assert map_from_dict(PlattMap(1.5, -0.5).to_dict()) == PlattMap(1.5, -0.5)
    for bad in (
        {"kind": "isotonic", "x": [2.0, 1.0], "y": [0.1, 0.2]},
        {"kind": "isotonic", "x": [1.0, 2.0], "y": [0.2, 0.1]},
        {"kind": "isotonic", "x": [1.0], "y": [1.5]},
        {"kind": "platt", "a": -1.0, "b": 0.0},
        {"kind": "pickle"},
    ):
        with pytest.raises(ValueError):
            map_from_dict(bad)


def test_bad_pairs_are_refused() -> None:
    with pytest.raises(ValueError, match="outcomes"):
        IsotonicMap.fit(np.array([1.0]), np.array([2]))
    with pytest.raises(ValueError, match="finite"):
        PlattMap.fit(np.array([np.nan]), np.array([1]))
    with pytest.raises(ValueError, match="equal"):
        IsotonicMap.fit(np.array([1.0, 2.0]), np.array([1]))
