"""The building blocks of the iPDP drift experiments (``torchstream reproduce ipdp``): the
concepts' own PDs, the batch PDP, and the Thm 3.1 reference of the iPDP under a model change."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchstream.reproductions import load
from torchstream.streams import Agrawal


@pytest.fixture(scope="module")
def ipdp():
    return load("ipdp")


@pytest.mark.parametrize(("function", "name"), [(1, "_agrawal_f1"), (2, "_agrawal_f2")])
def test_agrawal_functions_give_the_stream_labels(ipdp, function, name):
    # the concepts' PDs are computed from these functions: they must label every row as the
    # generator does (exactly: both are deterministic functions of the row)
    X, y = next(Agrawal(function, seed=3, n_samples=3000).batches(3000, dtype=torch.float64))
    labels = getattr(ipdp, name)(X)
    assert torch.equal(labels.long(), y.long())


def test_hyperplane_pd_matches_the_generator(ipdp):
    # P(Y = 1 | X1 = z) by simulation, with X2 and eps drawn as the generator draws them;
    # N = 20,000 draws per point give a binomial sd <= 0.5 / sqrt(N) = 0.0035: 4 sd = 0.014
    rng = np.random.default_rng(0)
    grid = np.array([90.0, 97.0, 100.0, 104.0, 190.0, 200.0, 205.0, 215.0])
    N = 20_000
    for phase in (0, 1):
        _, _, mu2, var2, b1, b2 = ipdp.HYPERPLANE[phase]
        x2 = rng.normal(mu2, math.sqrt(var2), N)
        eps = rng.normal(0.0, ipdp.EPS_SD, N)
        z = b1 * grid[:, None] + b2 * x2 + eps
        simulated = (1 / (1 + np.exp(-z)) >= ipdp.TAU).mean(1)
        np.testing.assert_allclose(ipdp._hyperplane_pd(phase, grid), simulated, atol=0.014)


def test_hyperplane_rows_follow_the_paper(ipdp):
    # means and variances as in the paper; P(Y = 1) ~ 0.65 (E[Z] = 0, logit 0.1 = -2.2)
    rng = np.random.default_rng(1)
    for phase in (0, 1):
        X, y = ipdp._hyperplane_rows(phase, 40_000, rng)
        mu1, var1, mu2, var2, _, _ = ipdp.HYPERPLANE[phase]
        # sd of a mean of 40,000 rows: sqrt(var / 40,000) <= 0.032; of a variance ~ var / 141
        np.testing.assert_allclose(X.double().mean(0).numpy(), [mu1, mu2], atol=0.15)
        np.testing.assert_allclose(X.double().var(0).numpy(), [var1, var2], rtol=0.04)
        assert abs(y.double().mean().item() - 0.65) < 0.03


def test_batch_pd_and_slope(ipdp):
    X = torch.rand(500, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    grid = np.linspace(-1.0, 1.0, 7)
    pd = ipdp._batch_pd(lambda Z: Z[:, 0] ** 2 + 3 * Z[:, 1], X, 0, grid)
    np.testing.assert_allclose(pd, grid**2 + 3 * X[:, 1].mean().item(), atol=1e-12)
    assert ipdp._slope(grid, 2.5 * grid + 1.0) == pytest.approx(2.5)
    assert ipdp._slope(grid, -0.5 * grid) == pytest.approx(-0.5)


class _SwitchingModel:
    """Class-1 probability sigmoid(+-(x1 - 100) / 3); the sign flips after ``at`` learned rows
    (an abrupt real drift of the model)."""

    def __init__(self, at: int) -> None:
        self.at, self.seen = at, 0

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        sign = 1.0 if self.seen < self.at else -1.0
        p = torch.sigmoid(sign * (X[:, 0].double() - 100.0) / 3.0)
        return torch.stack([1 - p, p], 1)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.seen += len(X)


def test_thm31_reference_and_reaction_after_an_abrupt_model_change(ipdp):
    at = 5_000
    rng = np.random.default_rng(0)
    X, y = ipdp._hyperplane_rows(0, at + 1_000, rng)
    run = ipdp._test_then_train(_SwitchingModel(at), X, y, {"x1": 0}, marks=(at, at + 700),
                                ref_every=50)
    # the model's output depends on x1 only, so every ICE curve equals the PD and neither the
    # iPDP nor the reference has sampling noise: they differ by the blocks' discretisation
    # (at most 50 rows of weight alpha with a PD change <= 1: 0.05) and the float rounding
    assert ipdp._ref_tolerance(True) == pytest.approx(0.08)
    for mark in (at, at + 700):
        _, pd = run["snap"][mark]["x1"]
        assert np.abs(pd - run["ref"][mark]["x1"]).max() < 0.05
    # 700 rows after the switch (just past the half-life of 693) the iPDP is the mix
    # w PD_old + (1 - w) PD_new with w = (1 - alpha)^700 = 0.496
    grid, pd = run["snap"][at + 700]["x1"]
    old = ipdp._batch_pd(lambda Z: torch.sigmoid((Z[:, 0].double() - 100) / 3), X, 0, grid)
    w = (1 - ipdp.ALPHA) ** 700
    np.testing.assert_allclose(pd, w * old + (1 - w) * (1 - old), atol=0.05)
    # the slope turns negative once the new model weighs more: the first trace point past
    # the half-life (trace every 100 rows), give or take one point for the moving grid
    flips = [row - at for row, plots in run["trace"] if row > at and ipdp._slope(*plots["x1"]) < 0]
    assert ipdp.HALF_LIFE == pytest.approx(692.8, abs=0.1)
    assert flips and 600 <= flips[0] <= 800
