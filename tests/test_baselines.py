"""The seven baselines of the baselines paper and the EWMA baseline: closed forms, the
static / dynamic and deterministic / stochastic taxonomy, streaming state and bad input
(spec §3 and §7 checks 16, 18, 19)."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter1d

from torchstream.explain.baselines import (
    BASELINES,
    BlurredBaseline,
    ConstantBaseline,
    EWMABaseline,
    ExpectationBaseline,
    GaussianBaseline,
    MaxDistanceBaseline,
    NeutralBaseline,
    UniformBaseline,
    make_baseline,
)

F64 = torch.float64


def data(n: int = 300, d: int = 4, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, d, generator=g, dtype=F64) * torch.arange(1, d + 1, dtype=F64)


def fitted(name: str, seed: int = 0):
    b = (
        make_baseline(name, seed=seed)
        if name != "neutral"
        else NeutralBaseline(level=0.0, seed=seed)
    )
    b.update(data())
    return b


def linear(z: torch.Tensor) -> torch.Tensor:
    return z @ torch.tensor([1.0, -0.5, 0.25, 2.0], dtype=z.dtype) - 3.0


def test_expectation_baseline_of_a_linear_model():
    # check 16: E_b[s(b)] = s(E[b]) for an affine score; not for the sigmoid probability
    b = ExpectationBaseline(size=50, seed=1)
    b.update(data())
    x = torch.tensor([[4.0, 0.0, 3.0, 4.0]], dtype=F64)
    draws = b.sample(x, n_samples=200)[:, 0]  # [200, d]
    assert torch.allclose(linear(draws).mean(), linear(draws.mean(0, keepdim=True))[0], atol=1e-12)
    prob_gap = torch.sigmoid(linear(draws)).mean() - torch.sigmoid(linear(draws.mean(0)[None]))
    assert abs(float(linear(x) - linear(draws.mean(0)[None]))) > 3  # |w'(x - E x)| is large
    assert abs(float(prob_gap)) > 0.01


def test_taxonomy_static_dynamic_deterministic_stochastic():
    # check 18
    X = data(5, seed=3)
    flags = {name: (fitted(name).static, fitted(name).stochastic) for name in BASELINES}
    assert flags == {
        "constant": (True, False),
        "max_distance": (False, False),
        "blurred": (False, True),
        "gaussian": (False, True),
        "uniform": (False, True),
        "expectation": (True, True),
        "neutral": (False, False),
        "ewma": (True, False),
    }
    for name in BASELINES:
        b1, b2 = fitted(name, seed=1), fitted(name, seed=2)
        fn = linear if name == "neutral" else None
        out1, out2 = b1(X, fn), b2(X, fn)
        assert out1.shape == X.shape
        same_rows = bool((out1 == out1[0]).all())
        assert same_rows == b1.static, name  # static: one baseline for every row
        assert torch.equal(out1, out2) != b1.stochastic, name  # seeds matter iff stochastic
        again = fitted(name, seed=1)(X, fn)
        assert torch.equal(out1, again), name  # a seed reproduces the draws


def test_max_distance_is_the_farthest_corner():
    # check 19: brute force over the 2^d corners of the observed box
    b = fitted("max_distance")
    lo, hi = b.ranges()
    X = lo + (hi - lo) * torch.rand(20, 4, generator=torch.Generator().manual_seed(4), dtype=F64)
    corners = torch.tensor(list(itertools.product(*zip(lo.tolist(), hi.tolist()))), dtype=F64)
    out = b(X)
    for x, got in zip(X, out):
        best = corners[torch.cdist(x[None], corners, p=1).argmax()]
        assert torch.equal(got, best)


def test_ewma_recursion_and_windowed_ranges():
    X = data(50)
    b = EWMABaseline(beta=0.1)
    b.update(X[:5])
    ref = X[:5].mean(0)
    for row in X[5:]:
        ref = 0.1 * row + 0.9 * ref
    b.update(X[5:20])
    for row in X[20:]:
        b.update(row[None])
    assert torch.allclose(b.mean, ref, atol=1e-12)
    u = UniformBaseline(window=10)
    u.update(X)
    lo, hi = u.ranges()
    assert torch.equal(lo, X[-10:].min(0).values) and torch.equal(hi, X[-10:].max(0).values)


def test_stochastic_baselines_have_the_stated_distributions():
    X = data()
    lo, hi = X.min(0).values, X.max(0).values
    u = UniformBaseline(seed=0)
    u.update(X)
    draws = u.sample(X[:1], n_samples=20000)[:, 0]
    assert bool(((draws >= lo) & (draws <= hi)).all())
    # mean of 20000 uniforms: sd = (hi - lo) / sqrt(12 * 20000) <= 4 / 490 = 0.008; 5 sd
    assert torch.allclose(draws.mean(0), (lo + hi) / 2, atol=0.045)
    g = GaussianBaseline(sigma=0.5, clip=False, seed=0)
    noise = g.sample(X[:1], n_samples=20000)[:, 0] - X[0]
    # sd of the mean 0.5 / sqrt(20000) = 0.0035; of the sd ~0.5 / sqrt(40000) = 0.0025
    assert torch.allclose(noise.mean(0), torch.zeros(4, dtype=F64), atol=0.02)
    assert torch.allclose(noise.std(0), torch.full((4,), 0.5, dtype=F64), atol=0.02)
    clipped = GaussianBaseline(sigma=5.0, seed=0)
    clipped.update(X)
    c = clipped.sample(X[:3], 50)
    assert bool(((c >= lo) & (c <= hi)).all())


def test_blur_is_scipy_gaussian_filter_along_a_permutation():
    b = BlurredBaseline(sigma=1.5, seed=7)
    x = torch.tensor([[1.0, 5.0, -2.0, 0.5, 3.0]], dtype=F64)
    gen = copy.deepcopy(b.generator)
    out = b.sample(x, n_samples=3)[:, 0]
    for draw in out:
        perm = torch.randperm(5, generator=gen)
        blurred = gaussian_filter1d(x[0, perm].numpy(), 1.5, mode="reflect")
        expect = np.empty(5)
        expect[perm.numpy()] = blurred
        np.testing.assert_allclose(draw.numpy(), expect, atol=1e-12)
    assert torch.allclose(b(torch.full((1, 5), 2.0, dtype=F64)), torch.full((1, 5), 2.0, dtype=F64))


def test_neutral_baseline_lies_on_the_decision_level():
    b = NeutralBaseline(level=0.0, n_iter=40)
    b.update(data())
    X = data(30, seed=5)
    out = b(X, linear)
    r = b.reference(X)
    crosses = ~b.last_fallback
    assert bool(crosses.any()) and bool(b.last_fallback.any())
    assert torch.allclose(
        linear(out[crosses]), torch.zeros(int(crosses.sum()), dtype=F64), atol=1e-9
    )
    # on the segment from the reference to x
    t = ((out - r) / (X - r))[:, 0]
    assert torch.allclose((out - r), t[:, None] * (X - r), atol=1e-9)
    assert torch.equal(out[b.last_fallback], r[b.last_fallback])


def test_state_dict_resumes_every_baseline():
    X = data(5)
    for name in BASELINES:
        b = fitted(name, seed=3)
        fn = linear if name == "neutral" else None
        state = copy.deepcopy(b.state_dict())
        first = b.sample(X, 4, fn)
        other = (
            make_baseline(name, seed=99)
            if name != "neutral"
            else NeutralBaseline(level=0.0, seed=99)
        )
        other.load_state_dict(state)
        assert torch.equal(other.sample(X, 4, fn), first), name


def test_bad_input():
    with pytest.raises(ValueError, match="n_features=3"):
        ConstantBaseline([0.0, 0.0, 0.0])(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="value has 2 entries"):
        ConstantBaseline([0.0, 0.0], n_features=3)
    for empty in (
        ExpectationBaseline(),
        EWMABaseline(),
        UniformBaseline(),
        MaxDistanceBaseline(),
        GaussianBaseline(),
    ):
        with pytest.raises(ValueError, match="update"):
            empty(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="row 1"):
        UniformBaseline().update(torch.tensor([[0.0], [float("nan")]]))
    with pytest.raises(ValueError, match="model_fn"):
        fitted("neutral")(data(2))
    with pytest.raises(ValueError, match="baseline must be one of"):
        make_baseline("zero")
    with pytest.raises(ValueError, match="sigma"):
        GaussianBaseline(sigma=0)
    with pytest.raises(ValueError, match="beta"):
        EWMABaseline(beta=0)
    with pytest.raises(ValueError, match="this baseline has"):
        EWMABaseline(beta=0.2).load_state_dict(EWMABaseline(beta=0.1).state_dict())
