"""Noise variability, drift performance deterioration and restoration time (C4, C5, C6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import river.metrics
import torch
from sklearn.metrics import accuracy_score, f1_score, zero_one_loss

from torchstream.evaluate.measures import (
    MetricSpec,
    drift_performance_deterioration,
    drift_restoration_time,
    mean_drift_performance_deterioration,
    mean_drift_restoration_time,
    noise_variability,
)
from torchstream.evaluate.metrics import Accuracy, LogLoss


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def threshold(X: torch.Tensor) -> torch.Tensor:
    return (X[:, 0] > 0).to(X.dtype)


# -- noise variability (C4) --------------------------------------------------------------------


def test_nv_zero_for_predictor_ignoring_x() -> None:
    X = torch.randn(16, 3, generator=_gen(1))
    y = torch.randint(2, (16,), generator=_gen(2))
    const = lambda X: torch.full((X.shape[0],), 1.0, dtype=X.dtype)
    assert noise_variability(const, X, y, generator=_gen(), noise_scale=100.0) == 0.0


def test_nv_zero_without_noise() -> None:
    X = torch.randn(16, 3, generator=_gen(1))
    w = torch.tensor([0.5, -1.0, 2.0])
    model = lambda X: torch.sigmoid(X @ w)
    y = torch.randint(2, (16,), generator=_gen(2))
    assert noise_variability(model, X, y, generator=_gen(), noise_scale=0.0) == 0.0
    assert noise_variability(model, X, y, "cross_entropy", generator=_gen(), noise_scale=0.0) == 0.0


def test_nv_threshold_classifier_is_one_half() -> None:
    # x ~ U(-0.01, 0.01), labels = the model's own predictions, z ~ N(0, 1): a noisy copy flips
    # the prediction with probability E[Phi(-|x|)] ~ 0.5 - 0.005 * 0.399 = 0.498. Each NV term is
    # a mean of B Bernoulli flips, so NV over N * B = 20,000 draws has std <= 0.5 / sqrt(20,000)
    # = 0.0035; the spec's tolerance 0.05 is > 14 std, the tighter 0.02 still > 5 std.
    X = (torch.rand(20, 1, generator=_gen(3)) - 0.5) * 0.02
    y = threshold(X)
    nv = noise_variability(
        threshold, X, y, "zero_one", generator=_gen(), n_samples=1000, noise_scale=1.0
    )
    assert nv == pytest.approx(0.5, abs=0.05)
    assert nv == pytest.approx(0.498, abs=0.02)
    # the batched torch loss and a scikit-learn loss looped per draw agree on the same noise
    kw = {"n_samples": 100, "noise_scale": 1.0}
    nv_torch = noise_variability(threshold, X, y, "zero_one", generator=_gen(9), **kw)
    nv_sk = noise_variability(threshold, X, y, MetricSpec(zero_one_loss), generator=_gen(9), **kw)
    assert nv_sk == pytest.approx(nv_torch, abs=1e-12)


def test_nv_sign_follows_the_measure() -> None:
    X = (torch.rand(50, 1, generator=_gen(3)) - 0.5) * 0.02
    y = threshold(X)
    f1 = MetricSpec(f1_score, zero_division=0)
    nv = noise_variability(threshold, X, y, f1, generator=_gen(), n_samples=50, noise_scale=1.0)
    assert nv < -0.2  # a score drops under noise: negative


def test_nv_is_reproducible_from_the_generator() -> None:
    X = torch.randn(32, 2, generator=_gen(5))
    y = threshold(X)
    a = noise_variability(threshold, X, y, generator=_gen(7), n_samples=5, noise_scale=0.5)
    b = noise_variability(threshold, X, y, generator=_gen(7), n_samples=5, noise_scale=0.5)
    c = noise_variability(threshold, X, y, generator=_gen(8), n_samples=5, noise_scale=0.5)
    assert a == b and a != c


def test_nv_categorical_replacement() -> None:
    # column 0 is categorical {0, 1}; the model predicts it. A draw from {0, 1} differs from the
    # row's own value with probability 1/2: NV = mean of 2,000 Bernoulli(1/2), std 0.011.
    X = torch.tensor([[0.0, 5.0], [1.0, -5.0]] * 10)
    model = lambda X: (X[:, 0] > 0.5).double()
    y = model(X)
    nv = noise_variability(
        model, X, y, generator=_gen(), n_samples=100, cat_features=[0], noise_scale=0.0
    )
    assert nv == pytest.approx(0.5, abs=0.05)
    same = noise_variability(
        model,
        X[::2],
        y[::2],
        generator=_gen(),
        n_samples=20,
        cat_features=[0],
        cat_values={0: [0.0]},
    )
    assert same == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise_scale": -1.0}, "noise_scale"),
        ({"n_samples": 0}, "n_samples"),
        ({"generator": 0}, "generator"),
        ({"cat_features": [3]}, "cat_features"),
        ({"cat_values": {1: [0.0]}}, "cat_values"),
        ({"loss": 3}, "loss"),
    ],
)
def test_nv_bad_input(kwargs, match) -> None:
    X = torch.randn(4, 2)
    args = {"generator": _gen(), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        noise_variability(threshold, X, threshold(X), **args)


def test_nv_bad_shapes() -> None:
    with pytest.raises(ValueError, match="X"):
        noise_variability(threshold, torch.randn(4), torch.zeros(4), generator=_gen())
    with pytest.raises(ValueError, match="y"):
        noise_variability(threshold, torch.randn(4, 2), torch.zeros(3), generator=_gen())


# -- drift performance deterioration (C5) ------------------------------------------------------


def test_dpd_hand_values() -> None:
    losses = [0.1] * 5 + [0.5] * 5
    assert drift_performance_deterioration(losses, drift=5, window=5) == pytest.approx(
        0.4, abs=1e-12
    )
    accuracy = [0.9] * 5 + [0.5] * 5
    assert drift_performance_deterioration(accuracy, 5, 5) == pytest.approx(-0.4, abs=1e-12)
    # (start, end) uses the start; a longer series around it does not matter
    longer = [0.3] * 3 + losses + [0.7] * 3
    assert drift_performance_deterioration(longer, (8, 9), 5) == pytest.approx(0.4, abs=1e-12)


def test_dpd_clips_windows_and_skips_nan() -> None:
    losses = [0.2, np.nan, 0.4, 1.0, 0.0]
    # before: mean(0.2, 0.4) = 0.3; after: mean(1.0, 0.0) = 0.5 (window 5 clipped at both ends)
    assert drift_performance_deterioration(losses, 3, 5) == pytest.approx(0.2)


def test_mean_dpd_over_drifts() -> None:
    losses = [0.1, 0.1, 0.5, 0.5, 0.2, 0.2, 0.6, 0.6]
    # drift 2: 0.5 - 0.1 = 0.4; drift 6: 0.6 - 0.2 = 0.4
    assert mean_drift_performance_deterioration(losses, [2, 6], 2) == pytest.approx(0.4)


# -- drift restoration time (C6) ---------------------------------------------------------------

LOSS_SERIES = [0.2, 0.2, 0.2, 0.6, 0.5, 0.3, 0.2, 0.1]


def test_drt_hand_value() -> None:
    assert drift_restoration_time(LOSS_SERIES, drift=3, window=3, metric=zero_one_loss) == 3.0
    already = [0.2, 0.2, 0.2, 0.15, 0.5]
    assert drift_restoration_time(already, 3, 3, metric="zero_one") == 0.0


@pytest.mark.parametrize(
    "metric",
    [
        accuracy_score,
        "accuracy_score",
        river.metrics.Accuracy(),
        Accuracy(),
        MetricSpec(accuracy_score),
    ],
)
def test_drt_direction_comes_from_the_metric(metric) -> None:
    accuracy = [1.0 - v for v in LOSS_SERIES]  # 0.8, ..., 0.4, 0.5, 0.7, 0.8, 0.9
    assert drift_restoration_time(accuracy, 3, 3, metric=metric) == 3.0


def test_drt_wrong_direction_differs() -> None:
    accuracy = [1.0 - v for v in LOSS_SERIES]
    # read as a loss, 0.4 <= 0.8 "restores" at once: the failure mode of a separate flag
    assert drift_restoration_time(accuracy, 3, 3, higher_is_better=False) == 0.0
    assert drift_restoration_time(LOSS_SERIES, 3, 3, metric=LogLoss()) == 3.0


def test_drt_not_restored_and_mean() -> None:
    losses = [0.1, 0.1, 0.9, 0.8, 0.7]
    assert drift_restoration_time(losses, 2, 2, metric="mse") == 3.0  # steps observed since
    # drift 3 of LOSS_SERIES with window 3 restores after 3 steps; drift 5 (before: 0.6, 0.5 ->
    # 0.55) at once: mean (3 + 0) / 2
    assert mean_drift_restoration_time(LOSS_SERIES, [3, 5], 3, "zero_one") == 1.5
    assert math.isnan(drift_restoration_time([np.nan, 0.5], 1, 1, "zero_one"))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: drift_restoration_time(LOSS_SERIES, 3, 3), "direction"),
        (lambda: drift_restoration_time(LOSS_SERIES, 3, 3, metric="my_score"), "unknown"),
        (lambda: drift_restoration_time(LOSS_SERIES, 3, 3, lambda a, b: 0.0), "unknown"),
        (lambda: drift_restoration_time(LOSS_SERIES, 8, 3, "mse"), "drift"),
        (lambda: drift_restoration_time(LOSS_SERIES, 0, 3, "mse"), "drift"),
        (lambda: drift_performance_deterioration(LOSS_SERIES, -2, 3), "drift"),
        (lambda: drift_performance_deterioration(LOSS_SERIES, 3, 0), "window"),
        (lambda: drift_performance_deterioration(LOSS_SERIES, (5, 3), 3), "ends before"),
        (lambda: mean_drift_performance_deterioration(LOSS_SERIES, [], 3), "drifts"),
        (lambda: drift_restoration_time(LOSS_SERIES, 3, 3, "mse", higher_is_better=1), "bool"),
    ],
)
def test_drift_measures_bad_input(call, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()
