"""Nogueira feature-set stability (spec fires_erics §4, check 12) and its windowed tracker."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from torchstream.select import StabilityTracker, nogueira_stability, selection_matrix


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ([{0, 1}, {0, 1}, {0, 2}], 1 / 3),
        ([{0, 1}, {2, 3}], -1.0),
        ([{0, 1}, {0, 2}], 0.0),
        ([{1, 3}] * 5, 1.0),
    ],
)
def test_hand_values(sets, expected):
    # check 12. By hand for the first: p = (1, 2/3, 1/3, 0), s^2 = 3/2 p(1-p) = (0, 1/3, 1/3, 0),
    # mean 1/6, denominator (1/2)(1/2) = 1/4 -> 1 - (1/6)/(1/4) = 1/3.
    assert nogueira_stability(sets, n_features=4) == pytest.approx(expected, abs=1e-15)


def test_indicator_tensor_input_equals_index_input():
    sets = [{0, 1}, {0, 1}, {0, 2}]
    Z = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0]])
    assert nogueira_stability(Z) == nogueira_stability(sets, 4)
    assert nogueira_stability(Z.bool()) == nogueira_stability(sets, 4)


def _kuncheva_mean(sets, d, k):
    """Mean pairwise Kuncheva index; Nogueira et al. (2017) show it equals their measure when
    every set has the same size k: an independent formula to compare with."""
    vals = [
        (len(set(a) & set(b)) * d - k * k) / (k * (d - k))
        for a, b in itertools.combinations(sets, 2)
    ]
    return sum(vals) / len(vals)


def test_equals_mean_pairwise_kuncheva_and_is_permutation_invariant():
    rng = random.Random(0)
    for _ in range(200):
        d = rng.randint(3, 15)
        k = rng.randint(1, d - 1)
        r = rng.randint(2, 8)
        sets = [rng.sample(range(d), k) for _ in range(r)]
        value = nogueira_stability(sets, d)
        assert value == pytest.approx(_kuncheva_mean(sets, d, k), abs=1e-12)
        perm = list(range(d))
        rng.shuffle(perm)
        permuted = [[perm[j] for j in s] for s in sets]
        assert nogueira_stability(permuted, d) == pytest.approx(value, abs=1e-12)
        # the order of the sets does not matter either
        assert nogueira_stability(sets[::-1], d) == pytest.approx(value, abs=1e-12)
        assert value <= 1.0 + 1e-12


def test_tracker_matches_function_on_the_window():
    rng = random.Random(1)
    d, k, window = 8, 3, 4
    tracker = StabilityTracker(d, window=window)
    sets = [rng.sample(range(d), k) for _ in range(20)]
    for t, s in enumerate(sets):
        value = tracker.update(s)
        if t < window - 1:
            assert math.isnan(value)
        else:
            assert value == pytest.approx(
                nogueira_stability(sets[t - window + 1 : t + 1], d), abs=1e-12
            )
    assert tracker.n_updates == 20
    mask = torch.zeros(d, dtype=torch.bool)
    mask[[0, 1, 2]] = True
    assert tracker.update(mask) == pytest.approx(
        nogueira_stability(sets[-3:] + [[0, 1, 2]], d), abs=1e-12
    )


def test_tracker_resume_is_exact():
    rng = random.Random(2)
    sets = [rng.sample(range(6), 2) for _ in range(30)]
    a = StabilityTracker(6, window=5)
    for s in sets[:12]:
        a.update(s)
    b = StabilityTracker(6, window=5)
    b.load_state_dict(a.state_dict())
    for s in sets[12:]:
        assert a.update(s) == b.update(s)
    with pytest.raises(ValueError, match="window"):
        StabilityTracker(6, window=4).load_state_dict(a.state_dict())


def test_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        nogueira_stability([{0}], 3)
    with pytest.raises(ValueError, match=r"selections\[1\] has feature index 5"):
        nogueira_stability([{0}, {5}], 3)
    with pytest.raises(ValueError, match=r"selections\[0\] repeats"):
        selection_matrix([[0, 0], [1, 2]], 3)
    with pytest.raises(ValueError, match="n_features is required"):
        nogueira_stability([{0}, {1}])
    with pytest.raises(ValueError, match="row 0, column 1"):
        nogueira_stability(torch.tensor([[1, 2], [1, 0]]))
    with pytest.raises(ValueError, match="undefined"):
        nogueira_stability([{0, 1}, {0, 1}], 2)  # every set holds all features
    with pytest.raises(ValueError, match="window"):
        StabilityTracker(4, window=1)
    with pytest.raises(ValueError, match="n_features"):
        StabilityTracker(0)
    with pytest.raises(ValueError, match=r"shape \[4\]"):
        StabilityTracker(4).update(torch.ones(3, dtype=torch.bool))
