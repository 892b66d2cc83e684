"""FIRES' per-step costs: the probit head computes ``X * X`` once per gradient step and checks
``X`` in one fused read, FIRES checks ``(mu, sigma)`` in one fused read and selects without
sorting every weight. Results are bit-for-bit those of the earlier code (values recorded from it
below, as exact float hex; the selection against the full stable sort), and a bad value is still
named by its row and column (its index)."""

from __future__ import annotations

import math

import pytest
import torch

from torchstream.models.distributional import ProbitHead
from torchstream.models.distributional.probit import (
    probit_log_likelihood,
    probit_log_likelihood_grad,
)
from torchstream.select.fires import FIRES, top_k_stable

# mu, sigma, raw weights after 4 learn() steps of the run in _run(), then the first three
# log marginal likelihoods and predicted probabilities of the last batch
RECORDED = {
    torch.float64: (
        ["0x1.60f2a44d99592p-4", "0x1.18cbd04b8d60dp+0", "-0x1.fb6f86d71967cp-5",
         "-0x1.3a2529c2b05eep-1", "0x1.8fbf2fbec3b0ap-5"],
        ["0x1.f172c371a36cbp-1", "0x1.853b873107b62p-1", "0x1.fcab1bde9c648p-1",
         "0x1.d583377cf168ap-1", "0x1.ec893730cc332p-1"],
        ["-0x1.9c9599f862181p-4", "0x1.deedd085cba8ep+5", "-0x1.34e8917ad75d1p-2",
         "0x1.267129469798ep+4", "-0x1.5fe566bf311c7p-2"],
        ["-0x1.2a70dd168cfc5p-4", "-0x1.82ff1761de9e0p-4", "-0x1.4cbd6bc98b9e6p-4"],
        ["0x1.1fd3e83dfc5e0p-4", "0x1.7146e0628025cp-4", "0x1.3f955dbec1854p-4"],
    ),
    torch.float32: (
        ["-0x1.deaff11740ec0p-4", "0x1.3c1ba0ded7b92p+0", "-0x1.8e889af6753a0p-11",
         "-0x1.b70021ba455a0p-2", "0x1.44f6b0e5e13cap-4"],
        ["0x1.ed9e0fbf19fc1p-1", "0x1.7bd9e8c6208c5p-1", "0x1.f9b67bb645581p-1",
         "0x1.d71bd1be02402p-1", "0x1.e979747259b76p-1"],
        ["0x1.bec76fb3ed70ep-3", "0x1.2fd7fc61cab8bp+6", "-0x1.f379283fdebaep-2",
         "0x1.1885f3ac4a7cfp+3", "-0x1.23571666bd2bcp-3"],
        ["-0x1.0df0e708fbf97p-1", "-0x1.5b582672b912ep-3", "-0x1.cc7d99744f7d2p-3"],
        ["0x1.a39883ed935d6p-2", "0x1.b020e28e64e5ep-1", "0x1.98e6ee045f54ep-1"],
    ),
}


def _hex(t: torch.Tensor) -> list[str]:
    return [float(v).hex() for v in t.tolist()]


def test_fires_steps_are_the_recorded_values() -> None:
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float64, torch.float32):  # float32 rows go to the float64 head
        fires = FIRES(ProbitHead(5, lr_mu=0.5, lr_sigma=0.3, epochs=2), n_selected=2,
                      scale_weights=False)
        scale = torch.tensor([1.0, 3.0, 0.5, 2.0, 1.0])
        for _ in range(4):
            X = (torch.randn(16, 5, generator=g) * scale).to(dtype)
            y = (X[:, 1] - X[:, 3] + 0.3 * X[:, 0] > 0).long()
            fires.learn(X, y)
        assert fires.head is not None and fires.raw_weights is not None
        mu, sigma = fires.head.feature_stats()
        head = fires.head
        assert isinstance(head, ProbitHead)
        got = (mu, sigma, fires.raw_weights, head.log_marginal_likelihood(X, y)[:3],
               head.predict_proba(X)[:3])
        for name, value, want in zip(("mu", "sigma", "omega", "lml", "proba"), got,
                                     RECORDED[dtype], strict=True):
            # the recorded values to a few units in the last place: the vectorised kernels
            # torch picks for a CPU (and its libm) may round the last bit otherwise
            recorded = torch.tensor([float.fromhex(h) for h in want], dtype=torch.float64)
            assert torch.allclose(value.to(torch.float64), recorded, rtol=1e-13, atol=1e-300), (
                dtype, name, _hex(value), want)
        assert fires.selected is not None and fires.selected.tolist() == [1, 3]


def _reference_grad(
    X: torch.Tensor, y: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The closed-form gradients written out directly (``X * X`` formed twice, as the paper's
    two formulas read)."""
    s = X @ mu
    rho = torch.sqrt(1.0 + (X * X) @ (sigma * sigma))
    z = y * s / rho
    lam = torch.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - torch.special.log_ndtr(z))
    n = X.shape[0]
    return (lam * y / rho) @ X / n, ((-lam * y * s / rho**3) @ (X * X)) * sigma / n


def test_gradient_equals_the_direct_formulas_bit_for_bit_and_autograd() -> None:
    g = torch.Generator().manual_seed(1)
    X = torch.randn(40, 7, generator=g, dtype=torch.float64)
    y = torch.where(torch.rand(40, generator=g) < 0.5, 1.0, -1.0).double()
    mu = torch.randn(7, generator=g, dtype=torch.float64)
    sigma = torch.rand(7, generator=g, dtype=torch.float64) + 0.1
    g_mu, g_sigma = probit_log_likelihood_grad(X, y, mu, sigma)
    r_mu, r_sigma = _reference_grad(X, y, mu, sigma)
    assert torch.equal(g_mu, r_mu) and torch.equal(g_sigma, r_sigma)
    m, s = mu.clone().requires_grad_(), sigma.clone().requires_grad_()
    probit_log_likelihood(X, y, m, s).mean().backward()
    assert m.grad is not None and s.grad is not None
    torch.testing.assert_close(g_mu, m.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g_sigma, s.grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_input_names_row_and_column(bad: float) -> None:
    fires = FIRES(ProbitHead(4), n_selected=1)
    X = torch.ones(6, 4, dtype=torch.float64)
    X[4, 2] = bad
    X[5, 1] = bad  # the first one in row-major order is named
    before = fires.head.feature_stats() if fires.head is not None else None
    with pytest.raises(ValueError, match=rf"ProbitHead: X row 4, column 2 is not finite \({bad}\)"):
        fires.learn(X, torch.ones(6))
    assert fires.n_updates == 0
    assert before is not None and fires.head is not None
    assert all(torch.equal(a, b) for a, b in zip(before, fires.head.feature_stats(), strict=True))


def test_finite_rows_whose_sum_overflows_are_accepted() -> None:
    """The fused check reads a sum: finite values that overflow it are checked one by one and
    pass (only a NaN or inf is an error)."""
    X = torch.full((3, 2), 1e308, dtype=torch.float64)
    assert not math.isfinite(X.sum().item())
    head = ProbitHead(2)
    head.learn(X, torch.tensor([1, 0, 1]))
    assert head.n_steps == 1  # no error: every value is finite
    X[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"X row 2, column 1 is not finite \(nan\)"):
        head.learn(X, torch.tensor([1, 0, 1]))


@pytest.mark.parametrize("seed", range(6))
def test_top_k_equals_the_full_stable_sort(seed: int) -> None:
    """Many ties (few distinct values), also at the k-th place, and non-finite weights; more
    weights than the full sort is used for."""
    g = torch.Generator().manual_seed(seed)
    n = 3000
    w = torch.randint(0, 5, (n,), generator=g).double() - 2.0
    if seed == 4:  # distinct values
        w = torch.randn(n, generator=g, dtype=torch.float64)
    if seed % 2:
        w[torch.randint(0, n, (5,), generator=g)] = float("inf")
    if seed == 5:
        w[17] = float("nan")
    full = torch.sort(w, descending=True, stable=True).indices
    for k in (1, 3, 40, 41, 599, 600, 601, 2999, 3000):
        assert torch.equal(top_k_stable(w, k), full[:k])


def test_fires_selection_with_ties_is_the_stable_order() -> None:
    fires = FIRES(n_selected=4, scale_weights=False)
    mu = torch.tensor([0.1, 0.5, -0.5, 0.5, 0.2, -0.5, 0.5], dtype=torch.float64)
    fires.update(mu, torch.ones(7, dtype=torch.float64))
    assert fires.selected is not None and fires.selected.tolist() == [1, 2, 3, 5]
    grouped = FIRES(n_selected=2, scale_weights=False,
                    feature_groups={"a": [0, 1], "b": [2, 3], "c": [4, 5], "d": [6]})
    grouped.update(torch.tensor([0.5, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0], dtype=torch.float64),
                   torch.ones(7, dtype=torch.float64))
    assert grouped.raw_feature_weights is not None
    assert len(set(grouped.raw_feature_weights.tolist()[:3])) == 1  # a, b and c tie exactly
    assert grouped.selected_features == ["a", "b"]  # the earlier groups


@pytest.mark.parametrize(("name", "index", "value", "message"), [
    ("mu", 3, float("nan"), r"mu\[3\] is not finite \(nan\)"),
    ("mu", 0, float("-inf"), r"mu\[0\] is not finite \(-inf\)"),
    ("sigma", 2, float("inf"), r"sigma\[2\] is not finite \(inf\)"),
    ("sigma", 4, -0.5, r"sigma\[4\] is negative \(-0.5\); sigma is a std dev"),
])
def test_bad_mu_or_sigma_is_named_by_index(name: str, index: int, value: float,
                                           message: str) -> None:
    mu = torch.zeros(6, dtype=torch.float64)
    sigma = torch.ones(6, dtype=torch.float64)
    (mu if name == "mu" else sigma)[index] = value
    fires = FIRES(n_selected=2)
    with pytest.raises(ValueError, match=message):
        fires.update(mu, sigma)
    assert fires.n_updates == 0 and fires.raw_weights is None


def test_finite_mu_whose_sum_overflows_is_accepted() -> None:
    fires = FIRES(n_selected=1, scale_weights=False)
    mu = torch.tensor([1e308, 1e308, 0.0], dtype=torch.float64)
    fires.update(mu, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    assert fires.n_updates == 1  # finite values: no error (their weights overflow to inf)
    assert fires.selected is not None and fires.selected.tolist() == [0]
