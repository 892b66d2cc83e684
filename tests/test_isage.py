"""IncrementalSAGE: the checks of the explainer spec (§8 checks 10, 11, 12, 20 and the
bias-corrected variant of §7), batches versus single rows, the ``sage-importance`` package as a
batch reference, river versus torch models, checkpoints, bad input and the prequential plug-in.

Statistical checks use float64 linear models ``f(x) = beta^T x``, ``y = f(x) + eps`` and squared
loss with fresh Gaussian replacement rows. Then ``G_S = f_m(x, S) - y`` is Gaussian for every
coalition, with ``Var G_S = (1 + 1/m) u_S^T Sigma u_S + s^2`` (``u_S`` = beta on the removed
features, ``s`` = noise sd; no ``1/m`` term for the EMA'd empty prediction, ``s^2`` alone for
``S = D``) and ``Cov(G_S, G_S') = u_S^T Sigma u_S' + s^2`` (independent draws per coalition).
A contribution is ``G_S^2 - G_S'^2``, so its mean is ``Var G_S - Var G_S'`` and its variance
``2 Var G_S^2 + 2 Var G_S'^2 - 4 Cov^2`` plus the spread over permutations: :func:`moments`
computes the exact mean and variance of ``delta_i`` by enumerating all permutations. The
debiased EMA of ``n`` iid contributions then has sd ``sqrt(V[delta_i] sum_s w_s^2) / c_n``
(Thm 3.2 of [SAGE] with equality); tolerances are 5 of these, plus ``2 alpha A / d`` for the
EMA of the mean prediction, whose own noise enters the empty coalition's loss (``O(alpha)``).
"""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pytest
import torch
from _explain_checks import resumed_and_whole, river_linear_fn

from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.isage import IncrementalSAGE
from torchstream.explain.storage import FreshSampler, GeometricReservoir
from torchstream.losses import get_loss

F64 = torch.float64
SIGMA_EPS = 0.5


def t64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def linear(beta, intercept=0.0):
    b = t64(beta)
    return lambda Z: intercept + (Z * b.to(Z)).sum(1)


def ema_sd(alpha, n):
    """Standard deviation of the debiased zero-init EMA of ``n`` iid unit-variance values."""
    sum_w2 = alpha**2 * (1 - (1 - alpha) ** (2 * n)) / (1 - (1 - alpha) ** 2)
    return math.sqrt(sum_w2) / (1 - (1 - alpha) ** n)


def correlate(z, chol):
    """``z @ chol.T`` without a matmul (small float64 matmuls are slow on some CPU builds)."""
    if torch.equal(chol, torch.diag(torch.diagonal(chol))):
        return z * torch.diagonal(chol)
    return sum(z[:, j : j + 1] * chol[:, j] for j in range(chol.shape[1]))


def gaussian_fresh(mu, cov, seed):
    mu_t, chol = t64(mu), torch.linalg.cholesky(t64(cov))

    def draw(n, generator):
        return mu_t + correlate(torch.randn(n, len(mu), generator=generator, dtype=F64), chol)

    return FreshSampler(draw, len(mu), seed=seed)


def gaussian_batches(n_batches, batch, beta, cov, mu=None, sigma_eps=SIGMA_EPS, seed=0):
    d = len(beta)
    mu_t = t64(mu if mu is not None else [0.0] * d)
    chol = torch.linalg.cholesky(t64(cov))
    g = torch.Generator().manual_seed(seed)
    f = linear(beta)
    for _ in range(n_batches):
        X = mu_t + correlate(torch.randn(batch, d, generator=g, dtype=F64), chol)
        yield X, f(X) + sigma_eps * torch.randn(batch, generator=g, dtype=F64)


def diag(sd):
    return torch.diag(t64(sd) ** 2).tolist()


def moments(beta, cov, m, empty="ema", sigma_eps=SIGMA_EPS):
    """Exact mean and variance of the per-row contribution ``delta_i`` (see the module doc)."""
    d = len(beta)
    b, S2 = t64(beta), t64(cov)
    s2 = sigma_eps**2

    def u(S):
        keep = torch.ones(d, dtype=F64)
        keep[list(S)] = 0.0
        return b * keep

    def var(S):
        if len(S) == d:
            return s2
        w = float(u(S) @ S2 @ u(S))
        if len(S) == 0 and empty == "ema":
            return w + s2
        return w * (1 + 1 / m) + s2

    def cov_(S, T):
        return float(u(S) @ S2 @ u(T)) + s2

    mean, second = torch.zeros(d, dtype=F64), torch.zeros(d, dtype=F64)
    perms = list(itertools.permutations(range(d)))
    for perm in perms:
        for p, i in enumerate(perm):
            S, T = perm[:p], perm[: p + 1]
            mu_ = var(S) - var(T)
            v = 2 * var(S) ** 2 + 2 * var(T) ** 2 - 4 * cov_(S, T) ** 2
            mean[i] += mu_ / len(perms)
            second[i] += (v + mu_**2) / len(perms)
    return mean, second - mean**2


class Frozen:
    """A filled storage whose content no longer changes (update is ignored)."""

    def __init__(self, storage):
        self.storage = storage

    def sample(self, n):
        return self.storage.sample(n)

    def sample_indices(self, n):
        return self.storage.sample_indices(n)

    @property
    def rows(self):
        return self.storage.rows

    def update(self, X):
        pass

    def __len__(self):
        return len(self.storage)


# ---------------------------------------------------------------------------------- check 10
def softmax_model(Z):
    logits = torch.stack([Z[:, 0] * Z[:, 1], torch.sin(2 * Z[:, 2]), 0.5 * Z[:, 0] - Z[:, 3]], 1)
    return torch.softmax(logits, 1)


def regression_model(Z):
    return Z[:, 0] * Z[:, 1] + torch.sin(2 * Z[:, 2]) - Z[:, 3] ** 2


@pytest.mark.parametrize(
    ("model", "loss"), [(softmax_model, "cross_entropy"), (regression_model, "mse")]
)
def test_check10_efficiency_exact_at_every_step(model, loss):
    """sum_i phi_t(i) = EMA of l(y_empty_t, y_t) - l(f(x_t), y_t), y_empty_t the mean-prediction
    EMA after its update at row t (started at the first output), at every step (float64)."""
    alpha, d = 0.03, 4
    g = torch.Generator().manual_seed(0)
    isage = IncrementalSAGE(model, loss, d, alpha=alpha, storage_size=50, n_samples=2, seed=1)
    lf = get_loss(loss)
    y_empty, ref = None, 0.0
    for step in range(12):
        X = torch.randn(48, d, generator=g, dtype=F64)
        out = model(X)
        if loss == "cross_entropy":
            y = torch.multinomial(out, 1, generator=g).squeeze(1)
        else:
            y = out + 0.3 * torch.randn(48, generator=g, dtype=F64)
        isage.explain(X, y)
        if step == 0:  # only fills the storage
            assert isage.n_explained == 0
            continue
        for b in range(48):
            y_empty = out[b] if y_empty is None else (1 - alpha) * y_empty + alpha * out[b]
            gap = lf(y_empty[None], y[b : b + 1]) - lf(out[b : b + 1], y[b : b + 1])
            ref = (1 - alpha) * ref + alpha * float(gap)
        assert abs(float(isage.importance_raw.sum()) - ref) <= 1e-9 * max(1.0, abs(ref))
        torch.testing.assert_close(isage.y_empty, y_empty, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("empty", ["ema", "imputed"])
def test_single_feature(empty):
    """d = 1: no coalition strictly between the empty and the full set; efficiency still holds
    (the one contribution is l(y_empty) - l(f(x)))."""

    def model(Z):
        return 2 * Z[:, 0]

    isage = IncrementalSAGE(model, "mse", 1, alpha=0.2, n_samples=2, empty_prediction=empty, seed=0)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        X = torch.randn(8, 1, generator=g, dtype=F64)
        isage.explain(X, model(X))
    assert isage.n_explained == 32
    assert float(isage.importance[0]) > 0


# ---------------------------------------------------------------------------------- check 11
BETA3, SD3 = (1.0, 2.0, 0.5), (1.0, 1.0, 2.0)


@pytest.mark.parametrize(
    ("m", "imputer", "expected"),
    [(1, "joint", (0.0, 6.0, 0.0)), (5, "joint", (0.8, 4.4, 0.8)), (5, "product", (0.8, 4.4, 0.8))],
)
def test_check11_finite_m_bias_independent_features(m, imputer, expected):
    """E[iSAGE] = (1 + 1/m) a_j - A/(m d), a_j = beta_j^2 Var(x_j), A = sum a_j (spec §3.6.4)."""
    d, batch = 3, 256
    alpha, n_batches = (4e-5, 1000) if m == 1 else (1e-4, 400)  # 5 sd <= 0.28 in all cases
    a = [bj**2 * sj**2 for bj, sj in zip(BETA3, SD3)]
    formula = [(1 + 1 / m) * aj - sum(a) / (m * d) for aj in a]
    assert formula == pytest.approx(list(expected), abs=1e-12)
    mean, var = moments(BETA3, diag(SD3), m)
    torch.testing.assert_close(mean, t64(expected), rtol=0, atol=1e-12)
    isage = IncrementalSAGE(
        linear(BETA3),
        "mse",
        d,
        alpha=alpha,
        n_samples=m,
        imputer=imputer,
        storage=gaussian_fresh([0.0] * d, diag(SD3), seed=m),
        seed=7,
    )
    for X, y in gaussian_batches(n_batches, batch, BETA3, diag(SD3), seed=11 + m):
        isage.explain(X, y)
    tol = 5 * var.sqrt() * ema_sd(alpha, batch * n_batches) + 2 * alpha * sum(a) / d
    err = (isage.importance - t64(expected)).abs()
    assert bool((err <= tol).all()), (isage.importance.tolist(), tol.tolist())


BETA4, SD4 = (1.0, 2.0, 0.5, 0.0), (1.0, 1.0, 2.0, 1.0)


@pytest.mark.parametrize(
    ("m", "empty", "expected"),
    [
        # paper: (1 + 1/m) a - A/(m d) with A = 6, d = 4: the null feature gets -A/(m d)
        (1, "ema", (0.5, 6.5, 0.5, -1.5)),
        # bias-corrected: (1 + 1/m) a, null feature 0 (null player restored)
        (1, "imputed", (2.0, 8.0, 2.0, 0.0)),
        (5, "imputed", (1.2, 4.8, 1.2, 0.0)),
    ],
)
def test_check11_null_feature_and_imputed_empty_prediction(m, empty, expected):
    d, batch = 4, 256
    alpha, n_batches = (5e-5, 800) if m == 1 else (1e-4, 400)  # 5 sd <= 0.37 in all cases
    a = [bj**2 * sj**2 for bj, sj in zip(BETA4, SD4)]
    if empty == "ema":
        formula = [(1 + 1 / m) * aj - sum(a) / (m * d) for aj in a]
    else:
        formula = [(1 + 1 / m) * aj for aj in a]
    assert formula == pytest.approx(list(expected), abs=1e-12)
    mean, var = moments(BETA4, diag(SD4), m, empty)
    torch.testing.assert_close(mean, t64(expected), rtol=0, atol=1e-12)
    isage = IncrementalSAGE(
        linear(BETA4),
        "mse",
        d,
        alpha=alpha,
        n_samples=m,
        empty_prediction=empty,
        storage=gaussian_fresh([0.0] * d, diag(SD4), seed=20 + m),
        seed=8,
    )
    for X, y in gaussian_batches(n_batches, batch, BETA4, diag(SD4), seed=30 + m):
        isage.explain(X, y)
    tol = 5 * var.sqrt() * ema_sd(alpha, batch * n_batches) + 2 * alpha * sum(a) / d
    err = (isage.importance - t64(expected)).abs()
    assert bool((err <= tol).all()), (isage.importance.tolist(), tol.tolist())


# ---------------------------------------------------------------------------------- check 12
@pytest.mark.parametrize(("empty", "expected"), [("ema", (-0.375, 2.625)), ("imputed", (0.0, 3.0))])
def test_check12_correlated_features_joint_imputer(empty, expected):
    """d = 2, unit variances, rho = 0.7, beta = (0, 1.5), m = 3, joint removal:
    phi_j = beta_j (Sigma beta)_j = (0, 2.25); the paper's estimator targets
    (1 + 1/m) phi - beta^T Sigma beta / (m d) = (-0.375, 2.625) (spec check 12), the imputed
    empty prediction (1 + 1/m) phi = (0, 3) (linear f, joint removal: W(S) = V - nu(S))."""
    d, m, alpha, batch, n_batches, rho = 2, 3, 5e-5, 256, 800, 0.7
    beta, cov = (0.0, 1.5), [[1.0, rho], [rho, 1.0]]
    mean, var = moments(beta, cov, m, empty)
    torch.testing.assert_close(mean, t64(expected), rtol=0, atol=1e-12)
    isage = IncrementalSAGE(
        linear(beta),
        "mse",
        d,
        alpha=alpha,
        n_samples=m,
        imputer="joint",
        empty_prediction=empty,
        storage=gaussian_fresh([0.0, 0.0], cov, seed=3),
        seed=9,
    )
    for X, y in gaussian_batches(n_batches, batch, beta, cov, seed=40):
        isage.explain(X, y)
    tol = 5 * var.sqrt() * ema_sd(alpha, batch * n_batches) + 2 * alpha * 2.25 / d
    err = (isage.importance - t64(expected)).abs()
    assert bool((err <= tol).all()), (isage.importance.tolist(), tol.tolist())


# ---------------------------------------------------------------------------------- check 20
def test_check20_reactivity_after_abrupt_change():
    """Model a until T, model b after (same mean prediction 0, same A): the expected iSAGE at
    T + D is phi_b + (1 - alpha)^D (phi_a - phi_b) with phi = 2 a - A/3 (m = 1). Mean over 100
    runs; tolerance 5 sd of that mean + 2 alpha A / d (EMA of y_empty) + c_T error."""
    alpha, T, batch, runs, d = 0.01, 1000, 100, 100, 3
    beta_a, beta_b = (2.0, 0.5, 1.0), (0.5, 2.0, 1.0)
    cov = diag((1.0, 1.0, 1.0))
    phi_a, var_a = moments(beta_a, cov, 1)
    phi_b, var_b = moments(beta_b, cov, 1)
    torch.testing.assert_close(phi_a, t64([6.25, -1.25, 0.25]), rtol=0, atol=1e-12)
    deltas = [0, 100, 200, 300]
    est: dict[int, list[torch.Tensor]] = {D: [] for D in deltas}
    explained: dict[int, int] = {}
    for r in range(runs):
        isage = IncrementalSAGE(
            None, "mse", d, alpha=alpha, seed=r, storage=gaussian_fresh([0.0] * 3, cov, seed=r)
        )
        g = torch.Generator().manual_seed(5000 + r)
        for rows in range(batch, T + deltas[-1] + 1, batch):
            beta = beta_a if rows <= T else beta_b
            X = torch.randn(batch, d, generator=g, dtype=F64)
            y = linear(beta)(X) + SIGMA_EPS * torch.randn(batch, generator=g, dtype=F64)
            isage.model_fn = linear(beta)
            isage.explain(X, y)
            if rows - T in est:
                est[rows - T].append(isage.importance)
                explained[rows - T] = isage.n_explained
    for D in deltas:
        mean = torch.stack(est[D]).mean(0)
        expected = phi_b + (1 - alpha) ** D * (phi_a - phi_b)
        n = explained[D]  # rows explained (D of them after the change)
        w = alpha * (1 - alpha) ** torch.arange(n - 1, -1, -1, dtype=F64)
        c = 1 - (1 - alpha) ** n
        var = ((w[: n - D] ** 2).sum() * var_a + (w[n - D :] ** 2).sum() * var_b) / c**2
        tol = 5 * (var / runs).sqrt() + 2 * alpha * 5.25 / d + phi_a.abs() * (1 - alpha) ** (n - D)
        assert bool(((mean - expected).abs() <= tol).all()), (D, mean.tolist(), expected.tolist())


# ---------------------------------------------------------------------------------- batches
@pytest.mark.parametrize("empty", ["ema", "imputed"])
def test_batch_equals_single_rows_with_identical_draws(empty):
    """B = 1 loop versus one B-batch on a fixed model with a storage that does not change: the
    permutations (torch.rand(B, d).argsort(1)) and the imputer's draws come in the same order,
    so the estimates agree to float error (the y_empty EMA prefix is computed in closed form)."""
    d, B = 4, 64
    rows = torch.randn(100, d, dtype=F64, generator=torch.Generator().manual_seed(5))

    def frozen():
        res = GeometricReservoir(100, d, seed=7)
        res.update(rows)
        return Frozen(res)

    g = torch.Generator().manual_seed(9)
    X = torch.randn(B, d, generator=g, dtype=F64)
    y = regression_model(X) + 0.1 * torch.randn(B, generator=g, dtype=F64)
    kw = {"alpha": 0.05, "n_samples": 3, "empty_prediction": empty, "seed": 0}
    one = IncrementalSAGE(regression_model, "mse", d, storage=frozen(), **kw)
    for i in range(B):
        one.explain(X[i : i + 1], y[i : i + 1])
    many = IncrementalSAGE(regression_model, "mse", d, storage=frozen(), **kw)
    many.explain(X, y)
    torch.testing.assert_close(many.importance, one.importance, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(many.importance_raw, one.importance_raw, rtol=1e-10, atol=1e-12)
    if empty == "ema":
        torch.testing.assert_close(many.y_empty, one.y_empty, rtol=1e-12, atol=1e-12)


def test_one_model_call_per_batch_and_chunks():
    sizes = []

    def model(Z):
        sizes.append(Z.shape[0])
        return regression_model(Z)

    def run(chunk, empty="ema"):
        isage = IncrementalSAGE(
            model,
            "mse",
            4,
            alpha=0.1,
            n_samples=2,
            chunk_size=chunk,
            empty_prediction=empty,
            seed=3,
        )
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            X = torch.randn(32, 4, generator=g, dtype=F64)
            isage.explain(X, regression_model(X))
        return isage.importance

    full = run(None)
    assert sizes == [32 * (1 + 3 * 2)] * 3  # B (1 + (d - 1) m) rows, one call per batch
    sizes.clear()
    run(None, "imputed")
    assert sizes == [32 * (1 + 4 * 2)] * 3  # B (1 + d m) with the imputed empty coalition
    sizes.clear()
    chunked = run(40)
    assert max(sizes) == 40
    torch.testing.assert_close(chunked, full, rtol=0, atol=1e-12)


class ProtocolImputer(MarginalImputer):
    """The built-in marginal imputer behind the generic ``impute(x, mask, storage)`` protocol
    (the explainer gathers the draws itself only for the exact built-in class)."""


@pytest.mark.parametrize(
    ("imputer", "m", "dtype"), [("joint", 1, F64), ("joint", 3, torch.float32), ("product", 2, F64)]
)
@pytest.mark.parametrize("empty", ["ema", "imputed"])
def test_direct_gather_equals_the_imputer_protocol(imputer, m, dtype, empty):
    """Explaining with imputer="joint" / "product" (draws gathered straight into the model
    input) and with the same imputer called through its protocol (a [B, G m, d] mask, the
    result copied in) consume the same random numbers, so everything agrees bit for bit,
    including the mean over the m inner samples of [n, k] outputs."""

    def make(imp):
        return IncrementalSAGE(
            softmax_model,
            "cross_entropy",
            4,
            alpha=0.05,
            storage_size=30,
            n_samples=m,
            imputer=imp,
            empty_prediction=empty,
            seed=2,
        )

    fast, protocol = make(imputer), make(ProtocolImputer(imputer))
    g = torch.Generator().manual_seed(4)
    for B in (1, 5, 16, 1, 40):
        X = torch.randn(B, 4, generator=g, dtype=dtype)
        y = torch.multinomial(softmax_model(X), 1, generator=g).squeeze(1)
        fast.explain(X, y)
        protocol.explain(X, y)
    assert torch.equal(fast.importance, protocol.importance)
    assert torch.equal(fast.half_width(), protocol.half_width())
    if empty == "ema":
        assert torch.equal(fast.y_empty, protocol.y_empty)
        assert fast.y_empty.dtype == F64 and fast.y_empty.device == X.device


@pytest.mark.parametrize("imputer", ["joint", "product"])
def test_contributions_from_the_model_input(imputer):
    """Record the model input and output of one batch and rebuild every contribution by hand:
    the input holds the batch, then one group of B rows per coalition size 0..d-1 (imputed
    empty prediction, m = 1); row b of group s keeps x_b on s features (stored values are
    negative, X positive, so the present features can be read off), the sets grow by one
    feature per size (one permutation per row), and delta[b, j] is l(group s) - l(group s + 1)
    for the feature j added at size s + 1 (size d: the row itself). Joint imputation takes all
    absent features of a row from one stored row."""
    d, B = 5, 6
    stored = -1 - torch.rand(40, d, dtype=F64, generator=torch.Generator().manual_seed(1))
    seen = []

    def model(Z):
        seen.append(Z.clone())
        return regression_model(Z)

    isage = IncrementalSAGE(
        model,
        "mse",
        d,
        alpha=0.1,
        storage_size=40,
        imputer=imputer,
        empty_prediction="imputed",
        seed=5,
    )
    isage.explain(stored, torch.zeros(40, dtype=F64))  # only fills the storage
    recorded = []
    isage.smoother.update = recorded.append  # the contributions [B, d] of the next batch
    g = torch.Generator().manual_seed(2)
    X = 0.1 + torch.rand(B, d, dtype=F64, generator=g)
    y = torch.randn(B, dtype=F64, generator=g)
    isage.explain(X, y)
    Z = seen[-1].view(1 + d, B, d)
    assert torch.equal(Z[0], X)
    loss = (regression_model(seen[-1]).view(1 + d, B) - y) ** 2
    by_size = torch.cat([loss[1:], loss[:1]])  # losses of coalition sizes 0..d
    delta = recorded[0]
    for b in range(B):
        present = Z[1:, b] > 0  # [size, d]
        assert present.sum(1).tolist() == list(range(d))
        for s in range(d):
            assert torch.equal(Z[1 + s, b][present[s]], X[b][present[s]])
            if imputer == "joint" and s < d - 1:
                row = ((stored - Z[1 + s, b]).abs()[:, ~present[s]].sum(1) == 0).nonzero()
                assert row.numel() >= 1  # all absent values from one stored row
            grown = torch.ones(d, dtype=torch.bool) if s == d - 1 else present[s + 1]
            added = (grown & ~present[s]).nonzero().flatten()
            assert added.numel() == 1 and bool((present[s] <= grown).all())
            assert delta[b, added.item()] == by_size[s, b] - by_size[s + 1, b]
    torch.testing.assert_close(delta.sum(1), by_size[0] - by_size[d], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------- reference
def shapley(game, d):
    """Exact Shapley values of ``game(frozenset) -> float`` by enumerating permutations."""
    phi = [0.0] * d
    perms = list(itertools.permutations(range(d)))
    for perm in perms:
        S: frozenset[int] = frozenset()
        for i in perm:
            phi[i] += (game(S | {i}) - game(S)) / len(perms)
            S = S | {i}
    return t64(phi)


def test_agrees_with_the_sage_package():
    """A static nonlinear model on a data set of N = 128 rows (also the background). The sage
    package's permutation estimator (MarginalImputer over all N rows) estimates SAGE phi of the
    empirical distribution. iSAGE sees rows drawn iid from the data set with fresh replacement
    rows drawn from it, m = 1, so it estimates the finite-m game: for squared loss, exactly
    E[iSAGE] = phi - psi / m ("ema") and phi + psi' / m ("imputed"), psi = Shapley values of
    W(S) = E_x Var_x~ f(x_S, x~_rest) (0 at the empty and full set), psi' those of
    W(empty) - W(S) (0 at the empty set), computed exactly over the data set."""
    sage = pytest.importorskip("sage")
    N, d, m = 128, 3, 1
    g = torch.Generator().manual_seed(21)
    data = torch.rand(N, d, generator=g, dtype=F64) * 4 - 2
    target = data[:, 0] + data[:, 1] * data[:, 2] + 0.3 * torch.randn(N, generator=g, dtype=F64)

    def model(Z):
        return Z[:, 0] + Z[:, 1] * Z[:, 2] + 0.5 * torch.sin(2 * Z[:, 2])

    est = sage.PermutationEstimator(
        sage.MarginalImputer(lambda x: model(torch.from_numpy(x)).numpy(), data.numpy()),
        "mse",
        random_state=0,
    )
    ref = est(
        data.numpy(),
        target.numpy(),
        batch_size=512,
        n_permutations=512 * 20,
        detect_convergence=False,
        bar=False,
    )
    phi_sage, sd_sage = t64(ref.values), t64(ref.std)

    def W(S):
        """E_x Var_x~ f(x on S, x~ off S) over the data set (all N x N pairs)."""
        keep = torch.zeros(d, dtype=torch.bool)
        keep[list(S)] = True
        Z = torch.where(keep, data[:, None, :], data[None, :, :])  # [x, x~, d]
        return float(model(Z.reshape(-1, d)).view(N, N).var(1, unbiased=False).mean())

    full = frozenset(range(d))
    w = {S: W(S) for r in range(d + 1) for S in map(frozenset, itertools.combinations(range(d), r))}
    psi = shapley(lambda S: 0.0 if S in (frozenset(), full) else w[S], d)
    psi_imp = shapley(lambda S: 0.0 if not S else w[frozenset()] - w[S], d)

    def from_data(n, generator):
        return data[torch.randint(N, (n,), generator=generator)]

    alpha, batch, n_batches = 6e-5, 256, 500
    for empty, expected in (("ema", phi_sage - psi / m), ("imputed", phi_sage + psi_imp / m)):
        isage = IncrementalSAGE(
            model,
            "mse",
            d,
            alpha=alpha,
            n_samples=m,
            empty_prediction=empty,
            storage=FreshSampler(from_data, d, seed=1),
            seed=2,
        )
        for _ in range(n_batches):
            idx = torch.randint(N, (batch,), generator=g)
            isage.explain(data[idx], target[idx])
        # 5 sd each: iSAGE's Chebyshev half-width at delta = 1/25 is 5 sqrt(sigma^2 a/(2-a)),
        # sigma^2 the EMA of squared deviations of the contributions; sage's std of its mean
        tol = (
            torch.sqrt(isage.half_width(1 / 25) ** 2 + (5 * sd_sage) ** 2)
            + 2 * alpha * phi_sage.sum()
        )
        err = (isage.importance - expected).abs()
        assert bool((err <= tol).all()), (
            empty,
            isage.importance.tolist(),
            expected.tolist(),
            tol.tolist(),
        )


# ---------------------------------------------------------------------------------- river
def test_river_and_torch_models_give_the_same_values():
    schema, river_fn = river_linear_fn({"a": 1.0, "b": -2.0, "c": 0.5}, intercept=0.25)
    torch_fn = linear((1.0, -2.0, 0.5), intercept=0.25)
    results = []
    for fn in (river_fn, torch_fn):
        isage = IncrementalSAGE(fn, "mse", 3, alpha=0.05, n_samples=2, feature_names=schema, seed=4)
        for X, y in gaussian_batches(6, 16, (1.0, 0.0, 1.0), diag((1.0, 1.0, 1.0)), seed=2):
            isage.explain(X, y)
        results.append(isage.as_dict())
    assert list(results[0]) == ["a", "b", "c"]
    for k in results[0]:
        assert results[0][k] == pytest.approx(results[1][k], rel=1e-10, abs=1e-12)


# ---------------------------------------------------------------------------------- state
@pytest.mark.parametrize(("empty", "imputer"), [("ema", "joint"), ("imputed", "product")])
def test_checkpoint_resume_is_bit_exact(empty, imputer):
    def make(seed):
        return IncrementalSAGE(
            softmax_model,
            "cross_entropy",
            4,
            alpha=0.02,
            storage_size=40,
            n_samples=2,
            empty_prediction=empty,
            imputer=imputer,
            seed=seed,
        )

    g = torch.Generator().manual_seed(6)
    batches = []
    for _ in range(8):
        X = torch.randn(16, 4, generator=g, dtype=F64)
        batches.append((X, torch.multinomial(softmax_model(X), 1, generator=g).squeeze(1)))
    resumed, whole = resumed_and_whole(make, batches, split=4)
    if empty == "ema":
        assert torch.equal(resumed.y_empty, whole.y_empty)


# ---------------------------------------------------------------------------------- errors
def test_bad_arguments_raise():
    f = linear(BETA3)
    with pytest.raises(ValueError, match="removal"):
        IncrementalSAGE(f, "mse", 3, removal="conditional")
    with pytest.raises(ValueError, match="empty_prediction"):
        IncrementalSAGE(f, "mse", 3, empty_prediction="zero")
    with pytest.raises(ValueError, match="imputer"):
        IncrementalSAGE(f, "mse", 3, imputer="gaussian")
    with pytest.raises(ValueError, match="n_samples"):
        IncrementalSAGE(f, "mse", 3, n_samples=0)
    with pytest.raises(ValueError, match="alpha"):
        IncrementalSAGE(f, "mse", 3, alpha=2.0)
    with pytest.raises(ValueError, match="loss"):
        IncrementalSAGE(f, "nll", 3)


def test_bad_inputs_and_outputs_raise():
    ((X, y),) = gaussian_batches(1, 8, BETA3, diag(SD3), seed=0)
    isage = IncrementalSAGE(linear(BETA3), "mse", 3, seed=0)
    with pytest.raises(ValueError, match="n_features=3"):
        isage.explain(torch.cat([X, X], 1), y)

    def explain_twice(model, loss, labels):
        e = IncrementalSAGE(model, loss, 3, seed=0)
        e.explain(X, labels)
        e.explain(X, labels)
        return e.importance

    labels = (X[:, 0] > 0).long()
    with pytest.raises(ValueError, match="class probabilities"):
        explain_twice(linear(BETA3), "cross_entropy", labels)
    with pytest.raises(ValueError, match=r"labels in 0\.\.2"):
        explain_twice(lambda Z: Z, "mse", y)  # [n, 3] scores need class labels
    with pytest.raises(ValueError, match="NaN at step 1"):
        explain_twice(lambda Z: linear(BETA3)(Z) / 0 * 0, "mse", y)


def test_inputs_are_not_mutated():
    ((X, y),) = gaussian_batches(1, 16, BETA3, diag(SD3), seed=0)
    Xc, yc = X.clone(), y.clone()
    isage = IncrementalSAGE(linear(BETA3), "mse", 3, alpha=0.1, n_samples=2, seed=0)
    isage.explain(X, y)
    isage.explain(X, y)
    assert torch.equal(X, Xc) and torch.equal(y, yc)
    assert isage.name == "isage" and list(isage.as_dict()) == ["x0", "x1", "x2"]


# ---------------------------------------------------------------------------------- plug-in
def test_plugin_inside_prequential_logs_to_history():
    from torchstream import OnlineClassifier, Prequential
    from torchstream.models import MLP
    from torchstream.sinks import History
    from torchstream.streams import from_numpy

    rng = np.random.default_rng(0)
    X = rng.normal(size=(320, 3))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    stream = from_numpy(X, y, feature_names=["a", "b", "c"], task="classification")
    learner = OnlineClassifier(
        lambda d, k: MLP(d, k, hidden=(8,)), lr=0.01, seed=0
    )
    isage = IncrementalSAGE(
        None, "cross_entropy", 3, alpha=0.05, feature_names=stream.schema, seed=0
    )
    history = History()
    runner = Prequential(learner, stream, batch_size=32, plugins=[isage], sinks=[history])
    runner.run()
    tags = [f"isage/{c}" for c in ("a", "b", "c")]
    for tag in tags:
        # rows seen (batches of 32); the first batch only fills the storage
        assert history.steps(tag) == list(range(64, 321, 32))
    assert [history.values(t)[-1] for t in tags] == pytest.approx(list(isage.as_dict().values()))
    assert isage.n_explained == 320 - 32

    # the run's checkpoint holds the explainer: stop after 4 steps, resume, same end state
    def fresh_run():
        lrn = OnlineClassifier(
            lambda d, k: MLP(d, k, hidden=(8,)), lr=0.01, seed=0
        )
        exp = IncrementalSAGE(
            None, "cross_entropy", 3, alpha=0.05, feature_names=stream.schema, seed=0
        )
        return Prequential(lrn, stream, batch_size=32, plugins=[exp]), exp

    first, _ = fresh_run()
    first.run(steps=4)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed, explainer = fresh_run()
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    resumed.run()
    assert torch.equal(explainer.importance, isage.importance)
    assert torch.equal(explainer.y_empty, isage.y_empty)
