"""Feature-set stability and reduction rate (spec checks C10, C11)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchstream.evaluate.measures import (
    feature_set_stability,
    reduction_rate,
    windowed_feature_set_stability,
)
from torchstream.select.stability import StabilityTracker


def test_unchanged_selection_is_one() -> None:
    assert feature_set_stability([[1, 4, 7]] * 6, n_features=10) == pytest.approx(1.0)


def test_disjoint_halves_is_minus_one() -> None:
    assert feature_set_stability([[0, 1], [2, 3]], n_features=4) == pytest.approx(-1.0)


def test_one_swap_w2() -> None:
    # p = 1 on 4 features, 1/2 on the 2 swapped ones: s^2 = 2 * 1/4 = 1/2 on 2 of 10 features,
    # mean 0.1; denominator 0.5 * 0.5 -> 1 - 0.4 = 0.6
    assert feature_set_stability([[0, 1, 2, 3, 4], [0, 1, 2, 3, 5]], 10) == pytest.approx(0.6)


def test_one_swap_in_last_of_three() -> None:
    # p = 2/3 and 1/3 on the swapped pair: s^2 = 3/2 * 2/9 = 1/3 each, mean 1/15; 1 - 4/15
    sets = [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 5]]
    value = feature_set_stability(sets, 10)
    assert value == pytest.approx(11 / 15)
    assert round(value, 4) == 0.7333


def test_random_selection_has_mean_zero() -> None:
    # 2,000 trials of w = 10 random 10-of-50 sets; the per-trial std is about 0.021 (spec C10),
    # so the mean of 2,000 trials has std 0.021 / sqrt(2000) = 0.00047; 0.003 is > 6 std.
    g = torch.Generator().manual_seed(0)
    values = []
    for _ in range(2000):
        order = torch.rand(10, 50, generator=g).argsort(1)[:, :10]
        Z = torch.zeros(10, 50, dtype=torch.bool).scatter_(1, order, True)
        values.append(feature_set_stability(Z))
    assert abs(np.mean(values)) < 0.003
    assert 0.015 < np.std(values) < 0.03


def test_undefined_cases_are_nan() -> None:
    assert math.isnan(feature_set_stability([[], []], n_features=4))  # k = 0
    assert math.isnan(feature_set_stability([[0, 1, 2, 3]] * 3, n_features=4))  # k = m
    assert math.isnan(feature_set_stability([[0, 1]], n_features=4))  # fewer than 2 sets
    assert math.isnan(feature_set_stability(np.zeros((0, 4), dtype=bool)))


def test_windowed_matches_tracker() -> None:
    g = torch.Generator().manual_seed(1)
    sets = [torch.randperm(12, generator=g)[:4].tolist() for _ in range(25)]
    out = windowed_feature_set_stability(sets, 12, window=5)
    tracker = StabilityTracker(12, window=5)
    expected = [tracker.update(s) for s in sets]
    assert np.isnan(out[:4]).all()
    np.testing.assert_allclose(out[4:], expected[4:], rtol=1e-12)
    # a window of all-empty sets is undefined (NaN) instead of an error
    empty = windowed_feature_set_stability([[], [], [1]], 4, window=2)
    assert np.isnan(empty[0]) and np.isnan(empty[1])
    # {} then {1}: k = 1/2, mean s^2 = 2 * 1/4 / 4 = 1/8, denominator 1/8 * 7/8 -> 1 - 8/7
    assert empty[2] == pytest.approx(-1 / 7)


def test_windowed_bad_window() -> None:
    with pytest.raises(ValueError, match="window"):
        windowed_feature_set_stability([[0], [1]], 4, window=1)


def test_reduction_rate_c11() -> None:
    assert reduction_rate(5, n_features=20) == 0.75
    assert reduction_rate(20, n_features=20) == 0.0
    assert reduction_rate([0, 3, 4, 9, 19], n_features=20) == 0.75
    mask = torch.zeros(20, dtype=torch.bool)
    mask[:5] = True
    assert reduction_rate(mask, n_features=20) == 0.75


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: reduction_rate(21, 20), "selected"),
        (lambda: reduction_rate(-1, 20), "selected"),
        (lambda: reduction_rate(5, 0), "n_features"),
        (lambda: reduction_rate([0, 25], 20), "outside"),
        (lambda: reduction_rate(torch.zeros(3, dtype=torch.bool), 20), "mask"),
        (lambda: feature_set_stability([[0, 9]], n_features=4), "outside"),
        (lambda: feature_set_stability([[0, 1]]), "n_features"),
    ],
)
def test_bad_input(call, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()
