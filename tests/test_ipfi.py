"""IncrementalPFI: the checks of the explainer spec (§8 checks 1, 2, 3, 5, 20), batches versus
single rows, a batch PFI reference, river versus torch models, checkpoints, bad input and the
prequential plug-in.

Statistical checks use float64 linear models ``f(x) = beta^T x`` with squared loss, where the
per-row contribution ``lambda_j = D^2 - 2 D eps`` (``D = beta_j (x~_j - x_j)`` ~ N(0, 2 a_j),
``a_j = beta_j^2 Var(x_j)``) has mean ``phi_j = 2 a_j`` and variance
``V[lambda_j] = 8 a_j (a_j + sigma_eps^2)`` (spec §8 check 4). With fresh replacement draws the
contributions are iid, so the debiased zero-init EMA after ``n`` rows has standard deviation
``sqrt(V[lambda] * sum_s w_s^2) / c_n`` (``w_s = alpha (1 - alpha)^(n - s)``,
``c_n = 1 - (1 - alpha)^n``); tolerances are 5 of these standard deviations.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from _explain_checks import resumed_and_whole, river_linear_fn

from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.smoothing import alpha_for_window
from torchstream.explain.storage import FreshSampler, GeometricReservoir

F64 = torch.float64
BETA = (1.0, 2.0, 0.5)
SD = (1.0, 1.0, 2.0)
MU = (1.0, -2.0, 3.0)
SIGMA_EPS = 0.5


def t64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def linear(beta, intercept=0.0):
    """``x -> intercept + beta^T x``, elementwise per row (no matmul), so a row's output never
    depends on the other rows of the call."""
    b = t64(beta)
    return lambda Z: intercept + (Z * b.to(Z)).sum(1)


def a_of(beta, sd):
    return [bj**2 * sj**2 for bj, sj in zip(beta, sd)]


def var_lambda(a, sigma_eps=SIGMA_EPS):
    """``V[lambda_j] = 8 a_j (a_j + sigma_eps^2)`` (spec §8 check 4)."""
    return [8 * aj * (aj + sigma_eps**2) for aj in a]


def ema_sd(alpha, n, init="zero"):
    """Standard deviation of the debiased EMA of ``n`` iid unit-variance values."""
    if init == "first":
        sum_w2 = (1 - alpha) ** (2 * (n - 1)) + alpha**2 * (1 - (1 - alpha) ** (2 * (n - 1))) / (
            1 - (1 - alpha) ** 2
        )
        return math.sqrt(sum_w2)
    sum_w2 = alpha**2 * (1 - (1 - alpha) ** (2 * n)) / (1 - (1 - alpha) ** 2)
    return math.sqrt(sum_w2) / (1 - (1 - alpha) ** n)


def gaussian_fresh(mu, sd, seed):
    """Fresh iid replacement rows from ``N(mu, diag(sd^2))``."""
    mu_t, sd_t = t64(mu), t64(sd)

    def draw(n, generator):
        return mu_t + sd_t * torch.randn(n, len(mu), generator=generator, dtype=F64)

    return FreshSampler(draw, len(mu), seed=seed)


def gaussian_batches(n_batches, batch, beta=BETA, sd=SD, mu=MU, sigma_eps=SIGMA_EPS, seed=0):
    g = torch.Generator().manual_seed(seed)
    f = linear(beta)
    mu_t, sd_t = t64(mu), t64(sd)
    for _ in range(n_batches):
        X = mu_t + sd_t * torch.randn(batch, len(beta), generator=g, dtype=F64)
        yield X, f(X) + sigma_eps * torch.randn(batch, generator=g, dtype=F64)


class ScriptedStorage:
    """A storage that returns the rows it is given, in order (deterministic replacement)."""

    def __init__(self, d):
        self.queue: list[torch.Tensor] = []
        self.d = d

    def sample(self, n):
        rows, self.queue = self.queue[:n], self.queue[n:]
        assert len(rows) == n
        return torch.stack(rows)

    def update(self, X):
        pass

    def __len__(self):
        return 1


class Frozen:
    """A filled storage whose content no longer changes (update is ignored)."""

    def __init__(self, storage):
        self.storage = storage

    def sample(self, n):
        return self.storage.sample(n)

    def update(self, X):
        pass

    def __len__(self):
        return len(self.storage)


# ---------------------------------------------------------------------------------- check 1
def pair_losses(model, loss, X, y):
    """``lam[n, m, j] = l(f(x_n with x_nj := x_mj), y_n) - l(f(x_n), y_n)`` for all pairs: the
    batch helper behind the permutation test and model reliance."""
    n, d = X.shape
    Z = X.view(n, 1, 1, d).repeat(1, n, d, 1)
    idx = torch.arange(d)
    Z[:, :, idx, idx] = X[None, :, :].expand(n, n, d)
    base = loss(model(X), y)
    mod = loss(model(Z.reshape(-1, d)), y.repeat_interleave(n * d)).view(n, n, d)
    return mod - base.view(n, 1, 1)


def test_check1_scaled_permutation_test_equals_model_reliance_and_ipfi_kernel():
    torch.manual_seed(0)
    N, d = 5, 3
    X = torch.randn(N, d, dtype=F64)
    y = torch.randn(N, dtype=F64)

    def model(Z):
        return torch.sin(Z[:, 0]) + Z[:, 1] * Z[:, 2] - 0.3 * Z[:, 2] ** 2

    def loss(p, t):
        return (p - t).abs()

    lam = pair_losses(model, loss, X, y)
    off = ~torch.eye(N, dtype=torch.bool)
    reliance = lam[off].sum(0) / (N * (N - 1))  # e_switch - e_orig (double sum over n != m)
    perms = list(itertools.permutations(range(N)))
    assert len(perms) == 120
    per_perm = torch.stack([lam[torch.arange(N), torch.tensor(p)].mean(0) for p in perms])
    unscaled = per_perm.mean(0)
    torch.testing.assert_close(unscaled * N / (N - 1), reliance, rtol=0, atol=1e-12)
    torch.testing.assert_close(unscaled, reliance * (N - 1) / N, rtol=0, atol=1e-12)

    # the explainer's per-row contribution is this kernel: alpha = 1 keeps only the last row
    storage = ScriptedStorage(d)
    ipfi = IncrementalPFI(model, loss, d, alpha=1.0, storage=storage, seed=0)
    for n in range(N):
        for m in range(N):
            storage.queue = [X[m]] * d
            ipfi.explain(X[n:n + 1], y[n:n + 1])
            torch.testing.assert_close(ipfi.importance, lam[n, m], rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------- check 2
@pytest.mark.parametrize(
    ("kind", "alpha", "batch", "n_batches", "sd_factor"),
    [
        # fresh draws: contributions iid, the stated sd is exact
        ("fresh", 1e-4, 256, 400, 1.0),
        # reservoirs: stored rows are reused, the spec's reference ratio of variances to the
        # fresh case is 1.5-2.5 (§2.6.4, §8 check 4); allow 4x the variance (2x the sd).
        # B = 64 < L = 100 so a stored row is drawn < 1 time per feature and batch.
        ("geometric", 2e-4, 64, 1000, 2.0),
        # Vitter's reservoir must hold at least the EMA's window (1/alpha = 5000 rows): with a
        # small L the estimate would average over only L replacement rows.
        ("uniform", 2e-4, 64, 1000, 2.0),
    ],
)
def test_check2_linear_gaussian_converges_to_2_beta2_var(kind, alpha, batch, n_batches, sd_factor):
    d = 3
    if kind == "fresh":
        storage = gaussian_fresh(MU, SD, seed=1)
    else:
        storage = kind
    ipfi = IncrementalPFI(linear(BETA), "mse", d, alpha=alpha, storage=storage,
                          storage_size=100 if kind == "geometric" else 6000, seed=2)
    for X, y in gaussian_batches(n_batches, batch, seed=3):
        ipfi.explain(X, y)
    n = batch * n_batches - (0 if kind == "fresh" else batch)  # first batch fills a reservoir
    assert ipfi.n_explained == n
    phi = [2 * a for a in a_of(BETA, SD)]  # (2, 8, 2)
    assert phi == [2.0, 8.0, 2.0]
    tol = [5 * sd_factor * math.sqrt(v) * ema_sd(alpha, n) for v in var_lambda(a_of(BETA, SD))]
    err = (ipfi.importance - t64(phi)).abs()
    assert bool((err <= t64(tol)).all()), (kind, ipfi.importance.tolist(), tol)


# ---------------------------------------------------------------------------------- check 3
def test_check3_zero_init_bias_and_debiasing():
    """Raw zero-init iPFI after n = 100 rows: E = (1 - 0.99^100) phi = 0.634 phi; the debiased
    and the first-value-init estimates are unbiased; the variance of raw matches check 4."""
    alpha, n, runs, d = 0.01, 100, 400, 3
    phi = t64([2 * a for a in a_of(BETA, SD)])
    vl = t64(var_lambda(a_of(BETA, SD)))
    factor = 1 - (1 - alpha) ** n
    assert factor == pytest.approx(0.634, abs=1e-3)
    raw, deb, first = [], [], []
    for r in range(runs):
        zero = IncrementalPFI(linear(BETA), "mse", d, alpha=alpha,
                              storage=gaussian_fresh(MU, SD, r), seed=r)
        one = IncrementalPFI(linear(BETA), "mse", d, alpha=alpha, init="first",
                             storage=gaussian_fresh(MU, SD, 10_000 + r), seed=r)
        (X, y), = gaussian_batches(1, n, seed=20_000 + r)
        zero.explain(X, y)
        one.explain(X, y)
        raw.append(zero.importance_raw)
        deb.append(zero.importance)
        first.append(one.importance_raw)
    raw, deb, first = torch.stack(raw), torch.stack(deb), torch.stack(first)
    var_raw = alpha * (1 - (1 - alpha) ** (2 * n)) / (2 - alpha) * vl  # check 4
    se = (var_raw / runs).sqrt()
    assert bool(((raw.mean(0) - factor * phi).abs() <= 5 * se).all()), raw.mean(0)
    assert bool(((deb.mean(0) - phi).abs() <= 5 * se / factor).all()), deb.mean(0)
    se_first = ema_sd(alpha, n, "first") * (vl / runs).sqrt()
    assert bool(((first.mean(0) - phi).abs() <= 5 * se_first).all()), first.mean(0)
    # check 4: sample variance of raw over the runs; its relative sd is sqrt(2 / (runs - 1))
    # (raw is a weighted sum of 100 iid terms, close to normal)
    rel = raw.var(0) / var_raw
    assert bool(((rel - 1).abs() <= 5 * math.sqrt(2 / (runs - 1))).all()), rel


# ---------------------------------------------------------------------------------- check 5
@pytest.mark.parametrize(("storage", "loss"), [("geometric", "mse"), ("uniform", "zero_one"),
                                             ("geometric", "cross_entropy")])
def test_check5_null_feature_contributes_zero(storage, loss):
    """A feature the model ignores contributes 0 at every step (any loss, any sampler): exactly
    when model and loss use only correctly rounded operations (+, *, clamp), else up to the
    last-bit differences between vectorised and scalar kernels (log, sigmoid) that a row sees at
    different positions of the batched call (|phi| <= 1e-15)."""
    g = torch.Generator().manual_seed(0)
    exact = loss != "cross_entropy"

    def proba(Z):  # ignores x2
        if exact:
            p = (0.5 + 0.2 * (1.5 * Z[:, 0] - Z[:, 1])).clamp(0.01, 0.99)
        else:
            p = torch.sigmoid(1.5 * Z[:, 0] - Z[:, 1])
        return torch.stack([1 - p, p], 1)

    ipfi = IncrementalPFI(proba, loss, 3, alpha=0.05, storage=storage, storage_size=50,
                          n_samples=3, chunk_size=100, seed=1)
    for _ in range(30):
        X = torch.randn(64, 3, generator=g, dtype=F64)
        y = (torch.rand(64, generator=g, dtype=F64) < proba(X)[:, 1]).long()
        ipfi.explain(X, y)
        if exact:
            assert ipfi.importance[2].item() == 0.0
            assert ipfi.importance_raw[2].item() == 0.0
        else:
            assert abs(ipfi.importance[2].item()) <= 1e-15
    assert bool((ipfi.importance[:2] > 0.01).all())


# ---------------------------------------------------------------------------------- check 20
def test_check20_alpha_for_window():
    assert [round(alpha_for_window(w), 7) for w in (100, 500, 1000, 2000)] == [
        0.019802, 0.003992, 0.001998, 0.0009995]


def test_check20_reactivity_after_abrupt_change():
    """Model a until T, model b after: E[iPFI_{T+D}] = phi_b + (1-alpha)^D (phi_a - phi_b)
    (T = 1000 >> 1/alpha = 100, so c_T ~ 1; the c_T error is added to the tolerance). Mean over
    100 runs, 5 sd of that mean (iid contributions of variance V_a before T, V_b after)."""
    alpha, T, batch, runs, d, sd = 0.01, 1000, 100, 100, 3, (1.0, 1.0, 1.0)
    beta_a, beta_b = (2.0, 0.5, 1.0), (0.5, 2.0, 1.0)
    a_a, a_b = a_of(beta_a, sd), a_of(beta_b, sd)
    phi_a, phi_b = t64([2 * a for a in a_a]), t64([2 * a for a in a_b])
    deltas = [0, 100, 200, 300]
    est: dict[int, list[torch.Tensor]] = {D: [] for D in deltas}
    explained: dict[int, int] = {}
    for r in range(runs):
        ipfi = IncrementalPFI(None, "mse", d, alpha=alpha, seed=r,
                              storage=gaussian_fresh((0.0,) * 3, sd, r))
        g = torch.Generator().manual_seed(1000 + r)
        for rows in range(batch, T + deltas[-1] + 1, batch):
            beta = beta_a if rows <= T else beta_b
            X = torch.randn(batch, d, generator=g, dtype=F64)
            y = linear(beta)(X) + SIGMA_EPS * torch.randn(batch, generator=g, dtype=F64)
            ipfi.model_fn = linear(beta)
            ipfi.explain(X, y)
            if rows - T in est:
                est[rows - T].append(ipfi.importance)
                explained[rows - T] = ipfi.n_explained
    for D in deltas:
        mean = torch.stack(est[D]).mean(0)
        expected = phi_b + (1 - alpha) ** D * (phi_a - phi_b)
        n = explained[D]
        w = alpha * (1 - alpha) ** torch.arange(n - 1, -1, -1, dtype=F64)
        c = 1 - (1 - alpha) ** n
        var = [((w[: n - D] ** 2).sum() * va + (w[n - D:] ** 2).sum() * vb) / c**2
               for va, vb in zip(var_lambda(a_a), var_lambda(a_b))]
        tol = 5 * (t64(var) / runs).sqrt() + phi_a.abs() * (1 - alpha) ** (n - D)
        assert bool(((mean - expected).abs() <= tol).all()), (D, mean.tolist(), expected.tolist())


# ---------------------------------------------------------------------------------- batches
def test_batch_equals_single_rows_with_identical_draws():
    """B = 1 loop versus one B-batch, fixed model, storage that does not change: the same
    replacement draws in the same order (row-major), hence the same estimate."""
    d, B = 3, 64
    rows = torch.randn(100, d, dtype=F64, generator=torch.Generator().manual_seed(5))

    def frozen_reservoir():
        res = GeometricReservoir(100, d, seed=7)
        res.update(rows)
        return Frozen(res)

    (X, y), = gaussian_batches(1, B, seed=9)

    def model(Z):
        return torch.tanh(Z[:, 0]) * Z[:, 1] + Z[:, 2]

    kw = {"alpha": 0.05, "n_samples": 2, "seed": 0}
    one = IncrementalPFI(model, "mse", d, storage=frozen_reservoir(), **kw)
    for i in range(B):
        one.explain(X[i:i + 1], y[i:i + 1])
    many = IncrementalPFI(model, "mse", d, storage=frozen_reservoir(), **kw)
    many.explain(X, y)
    torch.testing.assert_close(many.importance, one.importance, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(many.importance_raw, one.importance_raw, rtol=1e-12, atol=1e-12)
    assert many.n_explained == one.n_explained == B


def test_chunked_calls_give_the_same_result_and_respect_the_cap():
    sizes = []

    def model(Z):
        sizes.append(Z.shape[0])
        return (Z**2).sum(1)

    def run(chunk):
        ipfi = IncrementalPFI(model, "absolute", 3, alpha=0.1, n_samples=2, chunk_size=chunk,
                              seed=3)
        for X, y in gaussian_batches(5, 32, seed=1):
            ipfi.explain(X, y)
        return ipfi.importance

    full = run(None)
    assert max(sizes) == 32 * (1 + 3 * 2)  # one call per batch: B (1 + d K) rows
    sizes.clear()
    chunked = run(50)
    assert max(sizes) == 50
    torch.testing.assert_close(chunked, full, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------- reference
def test_agrees_with_batch_pfi_on_a_static_model_and_data_set():
    """Static nonlinear model on a fixed data set of N = 1000 rows. Rows are streamed iid from
    the data set and replacement values are fresh draws from it, so every contribution is
    lambda(n, m) of a uniform pair (n, m): iPFI's expectation is the direct batch PFI
    (1/N^2) sum_{n,m} lambda(n, m) (= (N-1)/N times model reliance, Thm 1). Its variance
    V[lambda] over the pairs is computed exactly; tolerance 5 sd of the EMA."""
    N, d = 1000, 3
    g = torch.Generator().manual_seed(11)
    data = torch.rand(N, d, generator=g, dtype=F64) * 4 - 2
    noise = 0.3 * torch.randn(N, generator=g, dtype=F64)
    target = data[:, 0] + 2 * torch.tanh(data[:, 1]) * data[:, 2] + noise

    def model(Z):
        return Z[:, 0] + 2 * torch.tanh(Z[:, 1]) * Z[:, 2] + 0.2 * Z[:, 2] ** 2

    def loss(p, t):
        return (p - t) ** 2

    lam = pair_losses(model, loss, data, target)  # [N, N, d]
    reference = lam.mean((0, 1))
    var = lam.reshape(-1, d).var(0, unbiased=False)

    def from_data(n, generator):
        return data[torch.randint(N, (n,), generator=generator)]

    alpha, batch, n_batches = 1e-4, 256, 300
    ipfi = IncrementalPFI(model, loss, d, alpha=alpha, storage=FreshSampler(from_data, d, seed=12),
                          seed=13)
    for _ in range(n_batches):
        idx = torch.randint(N, (batch,), generator=g)
        ipfi.explain(data[idx], target[idx])
    tol = 5 * var.sqrt() * ema_sd(alpha, batch * n_batches)
    assert bool(((ipfi.importance - reference).abs() <= tol).all()), (
        ipfi.importance.tolist(), reference.tolist(), tol.tolist())


# ---------------------------------------------------------------------------------- river
def test_river_and_torch_models_give_the_same_values():
    schema, river_fn = river_linear_fn({"a": 1.0, "b": -2.0, "c": 0.5}, intercept=0.25)
    torch_fn = linear((1.0, -2.0, 0.5), intercept=0.25)
    results = []
    for fn in (river_fn, torch_fn):
        ipfi = IncrementalPFI(fn, "mse", 3, alpha=0.05, feature_names=schema, seed=4)
        for X, y in gaussian_batches(6, 16, seed=2):
            ipfi.explain(X, y)
        results.append(ipfi.as_dict())
    assert list(results[0]) == ["a", "b", "c"]
    for k in results[0]:
        assert results[0][k] == pytest.approx(results[1][k], rel=1e-10, abs=1e-12)


# ---------------------------------------------------------------------------------- state
def test_checkpoint_resume_is_bit_exact():
    def model(Z):
        p = torch.sigmoid(Z[:, 0] - Z[:, 1] * Z[:, 2])
        return torch.stack([1 - p, p], 1)

    def make(seed):
        return IncrementalPFI(model, "cross_entropy", 3, alpha=0.02, storage_size=40, n_samples=2,
                              seed=seed)

    batches = [(X, (X[:, 0] > 0).long()) for X, _ in gaussian_batches(8, 16, seed=6)]
    resumed_and_whole(make, batches, split=4)


def test_properties_and_names():
    ipfi = IncrementalPFI(linear(BETA), "mse", 3, alpha=0.1, feature_names=["u", "v", "w"], seed=0)
    assert ipfi.name == "ipfi"
    assert ipfi.n_explained == 0
    assert ipfi.importance.tolist() == [0.0, 0.0, 0.0]
    for X, y in gaussian_batches(3, 8, seed=0):
        assert ipfi.explain(X, y) is None
    assert ipfi.n_explained == 16
    assert list(ipfi.as_dict()) == ["u", "v", "w"]
    assert ipfi.half_width(0.05).shape == (3,)
    assert bool((ipfi.half_width(0.01) > ipfi.half_width(0.1)).all())
    assert IncrementalPFI(linear(BETA), "mse", 3).feature_names == ["x0", "x1", "x2"]


# ---------------------------------------------------------------------------------- errors
def test_bad_arguments_raise_value_errors_naming_them():
    f = linear(BETA)
    with pytest.raises(ValueError, match="n_samples"):
        IncrementalPFI(f, "mse", 3, n_samples=0)
    for alpha in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="alpha"):
            IncrementalPFI(f, "mse", 3, alpha=alpha)
    with pytest.raises(ValueError, match="loss"):
        IncrementalPFI(f, "hinge-ish", 3)
    with pytest.raises(ValueError, match="storage"):
        IncrementalPFI(f, "mse", 3, storage="ring")
    with pytest.raises(ValueError, match="storage_size"):
        IncrementalPFI(f, "mse", 3, storage_size=0)
    with pytest.raises(ValueError, match="feature_names"):
        IncrementalPFI(f, "mse", 3, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="n_features"):
        IncrementalPFI(f, "mse", 0)


def test_bad_inputs_and_outputs_raise():
    (X, y), = gaussian_batches(1, 8, seed=0)
    ipfi = IncrementalPFI(linear(BETA), "mse", 3, seed=0)
    with pytest.raises(ValueError, match="n_features=3"):
        ipfi.explain(X[:, :2], y)
    with pytest.raises(ValueError, match=r"y must have shape \[B=8\]"):
        ipfi.explain(X, y[:5])
    with pytest.raises(ValueError, match="model_fn=None"):
        IncrementalPFI(None, "mse", 3).explain(X, y)

    def explain_twice(model, loss, labels):
        e = IncrementalPFI(model, loss, 3, seed=0)
        e.explain(X, labels)  # fills the storage
        e.explain(X, labels)
        return e.importance

    labels = (X[:, 0] > 1).long()
    with pytest.raises(ValueError, match="class probabilities"):
        explain_twice(linear(BETA), "cross_entropy", labels)  # values, not probabilities
    with pytest.raises(ValueError, match=r"labels in 0\.\.1"):
        explain_twice(lambda Z: torch.full((Z.shape[0], 2), 0.5, dtype=Z.dtype), "cross_entropy",
                      labels + 3)
    with pytest.raises(ValueError, match="expected"):
        explain_twice(lambda Z: torch.zeros(Z.shape[0], 2, 2, dtype=Z.dtype), "mse", y)
    with pytest.raises(ValueError, match="expected"):
        explain_twice(lambda Z: torch.zeros(Z.shape[0] + 1, dtype=Z.dtype), "mse", y)
    with pytest.raises(ValueError, match="one value per row"):
        explain_twice(linear(BETA), lambda p, t: ((p - t) ** 2).mean(), y)

    calls = []

    def goes_nan(Z):
        calls.append(1)
        out = linear(BETA)(Z)
        return out * float("nan") if len(calls) == 3 else out

    e = IncrementalPFI(goes_nan, "mse", 3, seed=0)
    e.explain(X, y)  # storage empty: no model call (step 0)
    e.explain(X, y)  # step 1, call 1
    e.explain(X, y)  # step 2, call 2
    with pytest.raises(ValueError, match="NaN at step 3"):
        e.explain(X, y)


def test_inputs_are_not_mutated_and_float32_works():
    (X, y), = gaussian_batches(1, 16, seed=0)
    X32, y32 = X.float(), y.float()
    Xc, yc = X32.clone(), y32.clone()
    ipfi = IncrementalPFI(linear(BETA), "mse", 3, alpha=0.1, seed=0)
    ipfi.explain(X32, y32)
    ipfi.explain(X32, y32)
    out = ipfi.importance
    assert torch.equal(X32, Xc) and torch.equal(y32, yc)
    assert out.dtype == F64 and bool(torch.isfinite(out).all())


# ---------------------------------------------------------------------------------- plug-in
def test_plugin_inside_prequential_logs_to_history():
    from torchstream import OnlineRegressor, Prequential
    from torchstream.models import MLP
    from torchstream.sinks import History
    from torchstream.streams import from_numpy

    rng = np.random.default_rng(0)
    X = rng.normal(size=(320, 3))
    y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=320)
    stream = from_numpy(X, y, feature_names=["a", "b", "c"], task="regression")
    learner = OnlineRegressor(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.01, seed=0)
    ipfi = IncrementalPFI(None, "mse", 3, alpha=0.05, feature_names=stream.schema, seed=0)
    history = History()
    Prequential(learner, stream, batch_size=32, plugins=[ipfi], sinks=[history]).run()
    tags = [f"ipfi/{c}" for c in ("a", "b", "c")]
    for tag in tags:
        assert tag in history.tags
        # rows seen (batches of 32); the first batch only fills the storage
        assert history.steps(tag) == list(range(64, 321, 32))
    assert [history.values(t)[-1] for t in tags] == pytest.approx(list(ipfi.as_dict().values()))
    assert ipfi.n_explained == 320 - 32


def test_storage_object_draw_order_is_row_feature_draw():
    """Row t of storage.sample(B d K) replaces feature j of batch row b in draw k, with
    t = (b d + j) K + k (the documented order a multi-reservoir storage relies on)."""
    b, d, k = 3, 4, 2

    class Counting:
        def __len__(self):
            return 1

        def update(self, X):
            pass

        def sample(self, n):  # row t holds the value 1000 + t in every column
            return (1000.0 + torch.arange(n, dtype=torch.float64)).view(n, 1).expand(n, d)

    seen = []

    def model(Z):
        seen.append(Z.clone())
        return Z.sum(1)

    X = torch.zeros(b, d, dtype=torch.float64)
    ipfi = IncrementalPFI(model, "mse", d, storage=Counting(), n_samples=k, seed=0)
    ipfi.explain(X, torch.zeros(b, dtype=torch.float64))
    Z = seen[0].view(1 + d * k, b, d)  # group 0: the batch; group 1 + j K + kk: feature j, draw kk
    for bi in range(b):
        for j in range(d):
            for kk in range(k):
                row = Z[1 + j * k + kk, bi]
                assert row[j] == 1000 + (bi * d + j) * k + kk
                assert row.sum() == row[j]  # only feature j was replaced
