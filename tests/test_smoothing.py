"""Exponential smoothing: closed-form batches, debiasing, alpha <-> window."""

from __future__ import annotations

import pytest
import torch

from torchstream.explain.smoothing import ExponentialSmoother, alpha_for_window


def test_batch_fold_equals_sequential_updates():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(257, 4, generator=g, dtype=torch.float64)
    a, b = ExponentialSmoother(0.01, 4), ExponentialSmoother(0.01, 4)
    a.update(u[:100])
    a.update(u[100:])
    for row in u:
        b.update(row[None])
    assert a.n == b.n == 257
    assert torch.allclose(a.raw, b.raw, atol=1e-14, rtol=0)
    assert torch.allclose(a.debiased, b.debiased, atol=1e-13, rtol=0)
    assert torch.allclose(a.sq_dev, b.sq_dev, atol=1e-12, rtol=0)  # deviations too


def test_long_batches_with_large_alpha_do_not_overflow():
    u = torch.ones(5000, 1, dtype=torch.float64)
    for alpha in (0.5, 1.0):
        s = ExponentialSmoother(alpha, 1)
        s.update(u)
        assert s.debiased.item() == pytest.approx(1.0)
        assert s.sq_dev.item() == pytest.approx(0.0)


@pytest.mark.parametrize("alpha, n", [(0.01, 100), (0.001, 500), (0.5, 3)])
def test_zero_init_bias_and_debiasing(alpha, n):
    """Spec check 3 on a constant stream: raw = (1 - (1 - alpha)^n) c, debiased = c exactly."""
    s = ExponentialSmoother(alpha, 2)
    c = torch.tensor([2.0, -3.0], dtype=torch.float64)
    s.update(c.expand(n, 2))
    factor = 1 - (1 - alpha) ** n
    assert torch.allclose(s.raw, factor * c, rtol=1e-12)
    assert torch.allclose(s.debiased, c, rtol=1e-12)
    if (alpha, n) == (0.01, 100):
        assert factor == pytest.approx(0.634, abs=1e-3)  # the spec's worked value


def test_first_value_init():
    s = ExponentialSmoother(0.1, 1, init="first")
    s.update(torch.tensor([[5.0], [5.0]]))
    assert s.raw.item() == pytest.approx(5.0)
    assert s.debiased.item() == pytest.approx(5.0)
    s.update(torch.tensor([[15.0]]))
    assert s.raw.item() == pytest.approx(6.0)


def test_alpha_for_window_matches_spec_values():
    expected = {100: 0.0198, 500: 0.00399, 1000: 0.001998, 2000: 0.0009995}
    for w, a in expected.items():
        assert alpha_for_window(w) == pytest.approx(a, rel=1e-3)


def test_reactivity_after_abrupt_change():
    """Spec check 20 (deterministic form): after a switch from a to b at T, the debiased value
    at T + delta is b + (1 - alpha)^delta (a - b) once T >> 1/alpha."""
    alpha, T = 0.01, 5000
    s = ExponentialSmoother(alpha, 1)
    s.update(torch.full((T, 1), 3.0))
    for delta in (0, 100, 500):
        if delta:
            s.update(torch.full((delta - (0 if delta == 100 else 100), 1), 1.0))
        expected = 1.0 + (1 - alpha) ** delta * (3.0 - 1.0)
        assert s.debiased.item() == pytest.approx(expected, abs=2 * (1 - alpha) ** T + 1e-12)


def test_half_width_shrinks_with_alpha_and_is_inf_before_data():
    g = torch.Generator().manual_seed(1)
    u = torch.randn(5000, 1, generator=g, dtype=torch.float64)
    wide, narrow = ExponentialSmoother(0.02, 1), ExponentialSmoother(0.005, 1)
    assert torch.isinf(wide.half_width()).all()
    wide.update(u)
    narrow.update(u)
    # sigma^2 ~ 1: half-width = sqrt(alpha / (2 - alpha) / delta); 0.02 -> 0.447, 0.005 -> 0.224
    assert wide.half_width().item() == pytest.approx((0.02 / 1.98 / 0.05) ** 0.5, rel=0.25)
    assert narrow.half_width().item() < wide.half_width().item()


def test_state_round_trip_and_validation():
    s = ExponentialSmoother(0.1, 3)
    s.update(torch.ones(4, 3))
    t = ExponentialSmoother(0.1, 3)
    t.load_state_dict(s.state_dict())
    s.update(torch.full((2, 3), 2.0))
    t.update(torch.full((2, 3), 2.0))
    assert torch.equal(s.raw, t.raw) and s.n == t.n
    with pytest.raises(ValueError, match="alpha"):
        ExponentialSmoother(0.0, 1)
    with pytest.raises(ValueError, match="alpha"):
        ExponentialSmoother(1.5, 1)
    with pytest.raises(ValueError, match="init"):
        ExponentialSmoother(0.1, 1, init="last")
    with pytest.raises(ValueError, match="shape"):
        s.update(torch.ones(2, 4))
    with pytest.raises(ValueError, match="alpha"):
        ExponentialSmoother(0.2, 3).load_state_dict(s.state_dict())
