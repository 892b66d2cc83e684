"""Windowed and fading aggregates of per-step scores (spec check C3) and their bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchstream.evaluate.measures import ewma, fading_mean, sliding_window_mean, sliding_window_var

LOSSES = [1, 0, 0, 1, 0]


def test_sliding_window_mean_c3() -> None:
    out = sliding_window_mean(LOSSES, window=2)
    assert out[-1] == 0.5
    # every entry is the mean of the last (up to) two losses
    assert out.tolist() == [1.0, 0.5, 0.0, 0.5, 0.5]
    # a window as long as the series is the cumulative mean
    np.testing.assert_allclose(sliding_window_mean(LOSSES, 5), np.cumsum(LOSSES) / np.arange(1, 6))


def test_sliding_window_var_matches_numpy() -> None:
    x = np.random.default_rng(0).normal(size=30)
    out = sliding_window_var(x, window=4, ddof=1)
    assert np.isnan(out[0])  # one value: no sample variance
    for t in range(1, 30):
        np.testing.assert_allclose(out[t], np.var(x[max(0, t - 3) : t + 1], ddof=1))


def test_gama_fading_c3() -> None:
    p = fading_mean(LOSSES, alpha=0.9)
    # P_5 = (0.9^4 + 0.9) / (1 + 0.9 + 0.81 + 0.729 + 0.6561), written out by hand
    assert p[-1] == pytest.approx(1.5561 / 4.0951, abs=1e-12)
    assert round(float(p[-1]), 4) == 0.3800
    # alpha = 1 is the cumulative mean
    np.testing.assert_allclose(fading_mean(LOSSES, 1.0), np.cumsum(LOSSES) / np.arange(1, 6))
    assert fading_mean(LOSSES, 1.0)[-1] == pytest.approx(0.4, abs=1e-15)


def test_float_ewma_c3() -> None:
    mean, var = ewma(LOSSES, decay_rate=0.5)
    assert mean.tolist() == [1.0, 0.5, 0.25, 0.625, 0.3125]
    # v_t = (1 - lam)(v_{t-1} + lam d^2), d = x_t - m_{t-1}, by hand:
    # 0.5 * (0 + 0.5), 0.5 * (0.25 + 0.125), 0.5 * (0.1875 + 0.28125), 0.5 * (0.234375 + 0.1953125)
    np.testing.assert_allclose(var, [0.0, 0.25, 0.1875, 0.234375, 0.21484375], rtol=1e-15)


def test_nan_steps_are_skipped() -> None:
    x = [np.nan, 1.0, np.nan, 0.0]
    assert np.isnan(sliding_window_mean(x, 2)[0])
    assert sliding_window_mean(x, 2).tolist()[1:] == [1.0, 1.0, 0.0]
    mean, _ = ewma(x, 0.5)
    assert np.isnan(mean[0]) and mean[1:].tolist() == [1.0, 1.0, 0.5]
    f = fading_mean(x, 0.5)
    # the NaN step neither counts nor decays: P_4 = (0 + 0.5 * 1) / (1 + 0.5)
    assert np.isnan(f[0]) and f[2] == 1.0 and f[3] == pytest.approx(1 / 3)


def test_tensor_input() -> None:
    assert sliding_window_mean(torch.tensor(LOSSES), 2).tolist() == [1.0, 0.5, 0.0, 0.5, 0.5]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sliding_window_mean(LOSSES, 0), "window"),
        (lambda: sliding_window_mean(LOSSES, 2.5), "window"),
        (lambda: sliding_window_mean([[1, 2]], 2), "values"),
        (lambda: sliding_window_mean([1, np.inf], 2), r"values\[1\]"),
        (lambda: fading_mean(LOSSES, 0.0), "alpha"),
        (lambda: fading_mean(LOSSES, 1.5), "alpha"),
        (lambda: ewma(LOSSES, 0.0), "decay_rate"),
        (lambda: sliding_window_var(LOSSES, 2, ddof=-1), "ddof"),
        (lambda: sliding_window_mean(["a", "b"], 2), "values"),
    ],
)
def test_bad_input(call, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()
