"""IncrementalPDP and PDPDriftDetector: the checks of the explainer spec (§8 checks 5, 14-19),
the per-row algorithm of the paper as a reference, batches versus single rows, checkpoints, the
prequential plug-in, plots and bad input.

Notation: ``alpha`` smoothing factor, ``n`` explained rows, ``c_n = 1 - (1 - alpha)^n``,
``w_s = alpha (1 - alpha)^(n - s)`` the weight of row ``s``. For iid rows and a static model the
raw PD at a fixed point ``z_k`` is ``sum_s w_s f(z_k, x_s)``, with mean ``c_n PD(z_k)`` and
variance ``sum_s w_s^2 V_k = alpha (1 - (1 - alpha)^(2n)) / (2 - alpha) V_k`` (``V_k`` the
variance of one ICE value; [PDP] Thm 3.2 and 3.4). Statistical tolerances are 5 of these
standard deviations; deterministic ones 1e-9 (float64).
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from torchstream.checkpoint import load_checkpoint, save_checkpoint
from torchstream.drift import PDPDriftDetector
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.viz.figures import plugin_figures
from torchstream.viz.pdp import plot_ipdp

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def linear(beta, intercept=0.0):
    """``x -> intercept + beta^T x``, elementwise per row."""
    b = torch.tensor(beta, dtype=F64)
    return lambda Z: intercept + (Z * b.to(Z)).sum(1)


def fit_line(grid: torch.Tensor, pd: torch.Tensor) -> tuple[float, float, float]:
    """Least-squares ``pd = a + slope * grid``: (slope, intercept, max |residual|)."""
    A = torch.stack([torch.ones_like(grid), grid], 1)
    coef = torch.linalg.lstsq(A, pd.unsqueeze(1)).solution[:, 0]
    res = pd - A @ coef
    return float(coef[1]), float(coef[0]), float(res.abs().max())


def ema_var(alpha: float, n: int) -> float:
    """``sum_s w_s^2`` for ``n`` rows: the variance factor of a zero-init EMA of iid values."""
    return alpha * (1 - (1 - alpha) ** (2 * n)) / (2 - alpha)


def run(ipdp, X, batch):
    for start in range(0, X.shape[0], batch):
        ipdp.explain(X[start:start + batch])
    return ipdp.grid, ipdp.pd


# ---------------------------------------------------------------------------- the paper's loop
def reference(f, X, feature, m, alpha, *, rule, window=None, size=None, quantiles=None, batch=1):
    """Alg. 1 of [PDP] written out row by row in plain Python (EMAs updated one row at a time,
    range storage = the list of past values), with the storage read once per batch."""
    grid = torch.zeros(m, dtype=F64)
    pd = torch.zeros(m, dtype=F64)
    n, seen = 0, []
    for start in range(0, X.shape[0], batch):
        rows = X[start:start + batch]
        stored = seen[-window:] if rule == "rolling" else seen[-size:]
        if stored:
            if rule == "rolling":
                lo, hi = min(stored), max(stored)
            else:
                qs = torch.tensor(quantiles, dtype=F64)
                q = torch.quantile(torch.tensor(stored, dtype=F64), qs)
                lo, hi = float(q[0]), float(q[1])
            if lo < hi:
                z = torch.linspace(lo, hi, m, dtype=F64)
                for x in rows:
                    n += 1
                    grid = (1 - alpha) * grid + alpha * z
                    Z = x.repeat(m, 1)
                    Z[:, feature] = z
                    pd = (1 - alpha) * pd + alpha * f(Z)
        seen.extend(rows[:, feature].tolist())
    c = 1 - (1 - alpha) ** n
    return grid / c, pd / c, n


@pytest.mark.parametrize("rule", ["rolling", "quantile"])
@pytest.mark.parametrize("batch", [1, 8])
def test_matches_the_per_row_algorithm(rule, batch):
    X = torch.randn(240, 3, generator=gen(1), dtype=F64)
    X[120:, 0] = X[120:, 0] * 2 + 3  # virtual drift: the range moves
    f = lambda Z: torch.sin(Z[:, 0]) * Z[:, 1] + Z[:, 2] ** 2
    kw = {"window": 50} if rule == "rolling" else {"storage_size": 40, "quantiles": (0.1, 0.9)}
    ipdp = IncrementalPDP(f, 0, grid_size=7, alpha=0.05, grid=rule, seed=0, **kw)
    grid, pd = run(ipdp, X, batch)
    ref_kw = {"window": 50} if rule == "rolling" else {"size": 40, "quantiles": (0.1, 0.9)}
    g_ref, p_ref, n_ref = reference(f, X, 0, 7, 0.05, rule=rule, batch=batch, **ref_kw)
    # B = 1: row 0 meets an empty storage, row 1 a single value (lo == hi); B = 8: batch 0
    assert ipdp.n_explained == n_ref == (238 if batch == 1 else 232)
    torch.testing.assert_close(grid, g_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pd, p_ref, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------- check 5
@pytest.mark.parametrize("rule", ["rolling", "quantile", "fixed"])
@pytest.mark.parametrize("batch", [1, 16])
def test_null_feature_gives_a_flat_curve_at_every_step(rule, batch):
    """Spec §8 check 5: the model ignores x2, so every ICE curve is constant in the grid point
    and the PD is flat after every update, importance 0. Exactly so in real arithmetic; in
    floats the model's vectorised kernels may round identical rows differently by an ulp
    (SIMD lanes vs the scalar tail), so the tolerance is 1e-12 of the values."""
    X = torch.randn(320, 3, generator=gen(2), dtype=F64)
    f = lambda Z: Z[:, 0] ** 2 + torch.tanh(3 * Z[:, 1])
    ipdp = IncrementalPDP(f, 2, grid_size=9, alpha=0.02, grid=rule, fixed_range=(-2, 2)
                          if rule == "fixed" else None, entrance_prob=0.7, seed=1)
    steps = 0
    for start in range(0, 320, batch):
        ipdp.explain(X[start:start + batch])
        pd = ipdp.pd
        if ipdp.n_explained:
            steps += 1
            assert float(pd.max() - pd.min()) <= 1e-12 * float(pd.abs().max())
            ice = ipdp.ice
            assert float((ice - ice[:, :1]).abs().max()) <= 1e-12 * float(ice.abs().max())
            assert ipdp.score <= 1e-12
    assert steps >= 320 // batch - 2


# ---------------------------------------------------------------------------- check 14
@pytest.mark.parametrize("rule", ["rolling", "quantile", "fixed"])
@pytest.mark.parametrize("batch", [1, 25])
def test_linear_model_gives_an_exact_line(rule, batch):
    """Spec §8 check 14: for f = b0 + beta^T x the debiased points satisfy p_k = C_t + beta_S g_k
    exactly (the part of the rows outside S does not depend on k): fitted slope beta_S and zero
    residual (1e-9), after every update, on a stream whose range drifts."""
    n = 400 if batch == 1 else 2000
    X = torch.randn(n, 3, generator=gen(3), dtype=F64)
    X[n // 2:, 1] = X[n // 2:, 1] * 3 - 5
    f = linear([0.5, -1.75, 2.0], intercept=0.3)
    ipdp = IncrementalPDP(f, 1, grid_size=12, alpha=0.01, grid=rule, window=100,
                          storage_size=50, entrance_prob=0.5, fixed_range=(-3, 3)
                          if rule == "fixed" else None, seed=4)
    checked = 0
    for start in range(0, n, batch):
        ipdp.explain(X[start:start + batch])
        grid, pd = ipdp.grid, ipdp.pd
        if ipdp.n_explained:
            slope, _, resid = fit_line(grid, pd)
            assert abs(slope + 1.75) < 1e-9 and resid < 1e-9
            checked += 1
    assert checked >= n // batch - 2


def test_linear_model_offset_mean_and_variance():
    """Spec §8 check 14 (statistical part): C_t = p_k - beta_S g_k has mean
    b0 + beta_rest^T E[x_rest] = 0.3 + 0.5 * 1 + 2 * (-1) = -1.2 (debiased) and
    V[C_t c_n] = sum_s w_s^2 Var(beta_rest^T x_rest) = ema_var * (0.25 * 1 + 4 * 0.25) (Thm 3.4
    with equality). 200 independent streams of 300 rows; the sample mean is within 5 standard
    errors and the sample variance within 5 of its standard deviations, sd(s^2)/V =
    sqrt(2 / 199) ~ 0.1, i.e. +-50%."""
    alpha, n_rows, reps = 0.02, 300, 200
    mean_rest = torch.tensor([1.0, 0.0, -1.0], dtype=F64)
    sd_rest = torch.tensor([1.0, 1.0, 0.5], dtype=F64)
    X = mean_rest + sd_rest * torch.randn(reps, n_rows, 3, generator=gen(5), dtype=F64)
    f = linear([0.5, -1.75, 2.0], intercept=0.3)
    offsets = []
    for r in range(reps):
        ipdp = IncrementalPDP(f, 1, grid_size=5, alpha=alpha, grid="fixed", fixed_range=(-2, 2))
        ipdp.explain(X[r])  # one batch of 300 rows (= 300 single rows, fixed grid)
        grid, pd = ipdp.grid, ipdp.pd
        offsets.append(float((pd + 1.75 * grid).mean()) * ipdp.correction)
    c = 1 - (1 - alpha) ** n_rows
    var_rest = 0.25 * 1 + 4 * 0.25
    v_theory = ema_var(alpha, n_rows) * var_rest
    off = torch.tensor(offsets, dtype=F64)
    assert abs(float(off.mean()) / c - (-1.2)) < 5 * math.sqrt(v_theory / reps) / c
    ratio = float(off.var()) / v_theory
    assert abs(ratio - 1) < 5 * math.sqrt(2 / (reps - 1)), ratio


# ---------------------------------------------------------------------------- check 15
def test_fixed_grid_bias_and_debiasing():
    """Spec §8 check 15 / [PDP] Thm 3.2: f = x0^2 + x1, x0 ~ U[-1, 1], x1 ~ N(0.5, 1), fixed
    points z_k: E[raw pd_k] = c_n (z_k^2 + 0.5); the debiased value is unbiased; the debiased
    grid is the fixed grid exactly. The ICE value at z_k is z_k^2 + x1, so V_k = Var(x1) = 1.
    With alpha = 0.01, n = 100: c_n = 0.634 and sd(raw) = sqrt(ema_var) = 0.066; averaged over
    300 streams the standard error is 0.0038, far below the bias (1 - c_n) PD."""
    alpha, n_rows, reps = 0.01, 100, 300
    X = torch.empty(reps, n_rows, 2, dtype=F64)
    X[..., 0] = torch.rand(reps, n_rows, generator=gen(6), dtype=F64) * 2 - 1
    X[..., 1] = 0.5 + torch.randn(reps, n_rows, generator=gen(7), dtype=F64)
    f = lambda Z: Z[:, 0] ** 2 + Z[:, 1]
    z = torch.linspace(-1, 1, 11, dtype=F64)
    pd_true = z**2 + 0.5
    raws, debiased = [], []
    for r in range(reps):
        ipdp = IncrementalPDP(f, 0, grid="fixed", fixed_range=(-1.0, 1.0), grid_size=11,
                              alpha=alpha)
        ipdp.explain(X[r])
        grid, pd = ipdp.grid, ipdp.pd
        assert torch.equal(grid, z)  # debiased grid = the fixed grid, exactly
        torch.testing.assert_close(ipdp.grid_raw, ipdp.correction * z, rtol=1e-12, atol=1e-15)
        raws.append(ipdp.pd_raw)
        debiased.append(pd)
    c = 1 - (1 - alpha) ** n_rows
    se = math.sqrt(ema_var(alpha, n_rows) / reps)
    raw_mean = torch.stack(raws).mean(0)
    deb_mean = torch.stack(debiased).mean(0)
    assert float((raw_mean - c * pd_true).abs().max()) < 5 * se
    assert float((deb_mean - pd_true).abs().max()) < 5 * se / c
    assert float((raw_mean - pd_true).abs().min()) > 20 * se  # the raw EMA is visibly biased


def test_fixed_grid_debiased_converges_to_the_batch_pd():
    """Spec §8 check 15, one long stream: alpha = 0.001, 20 000 rows; sd of the debiased PD =
    sqrt(alpha / (2 - alpha)) = 0.022, tolerance 5 sd = 0.11 (the PD spans [0.5, 1.5])."""
    g = gen(8)
    X = torch.stack([torch.rand(20000, generator=g, dtype=F64) * 2 - 1,
                     0.5 + torch.randn(20000, generator=g, dtype=F64)], 1)
    ipdp = IncrementalPDP(lambda Z: Z[:, 0] ** 2 + Z[:, 1], 0, grid="fixed",
                          fixed_range=(-1.0, 1.0), grid_size=11, alpha=0.001)
    grid, pd = run(ipdp, X, 500)
    assert float((pd - (grid**2 + 0.5)).abs().max()) < 5 * math.sqrt(0.001 / 1.999)


# ---------------------------------------------------------------------------- check 16
def test_static_model_matches_sklearn_partial_dependence():
    """Spec §8 check 16: a fitted scikit-learn model, its data streamed in random order, iPDP on
    the batch PDP's grid (20 points between the feature's min and max), alpha = 0.01. The
    difference to sklearn's brute-force PD at z_k is a weighted sum of the ICE values with
    weights w_s / c_n - 1/N, of variance <= (alpha / (2 - alpha)) V_k with V_k the variance of
    the ICE values at z_k over the data; tolerance 5 sd per point. In the spec's terms it is
    also within a few % (here 5%) of the PD range."""
    sklearn = pytest.importorskip("sklearn")
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.inspection import partial_dependence

    from torchstream.learners import as_model_fn

    assert sklearn
    rng = np.random.default_rng(9)
    X = rng.uniform(-2, 2, size=(4000, 3))
    y = 2 * np.sin(1.5 * X[:, 0]) + 0.3 * X[:, 0] * X[:, 1] + 0.5 * X[:, 2]
    y = y + 0.1 * rng.normal(size=4000)
    model = GradientBoostingRegressor(n_estimators=60, max_depth=3, random_state=0).fit(X, y)
    grid = np.linspace(X[:, 0].min(), X[:, 0].max(), 20)
    batch_pd = partial_dependence(model, X, [0], custom_values={0: grid}, method="brute",
                                  kind="average")["average"][0]
    model_fn = as_model_fn(model)
    ipdp = IncrementalPDP(model_fn, 0, grid="fixed", fixed_range=torch.tensor(grid), alpha=0.01)
    Xt = torch.tensor(X[rng.permutation(4000)], dtype=F64)
    g, pd = run(ipdp, Xt, 40)
    np.testing.assert_allclose(g.numpy(), grid, rtol=0, atol=0)
    ice = np.stack([model.predict(np.column_stack([np.full(4000, zk), X[:, 1:]])) for zk in grid])
    tol = 5 * math.sqrt(0.01 / 1.99) * ice.std(1)
    diff = np.abs(pd.numpy() - batch_pd)
    assert (diff <= tol).all(), (diff, tol)
    assert diff.max() < 0.05 * np.ptp(batch_pd)


# ---------------------------------------------------------------------------- check 17
@pytest.mark.parametrize("rule, wait", [("rolling", 200), ("quantile", 300)])
def test_virtual_drift_moves_the_grid(rule, wait):
    """Spec §8 check 17: x0 ~ U[0, 1] before row T = 600, U[10, 11] after; alpha = 0.02 (T >> 1/a).
    Rolling window k = 200: from row T + k on, every evaluation point lies in [10, 11]. Frequency
    storage L = 100, P(E) = 0.5 (covers ~ L / P(E) = 200 rows): from T + 300 on (P(fewer than
    100 entries in 300 rows) ~ 1e-9). Afterwards, Delta rows later, the debiased grid is within
    (1 - a)^Delta * 11 / c_n + spread of the current points (spread = how much the current points
    move after T + wait): rows before T + wait weigh (1 - a)^Delta and lie within 11 of [10, 11]."""
    T, after, alpha = 600, 500, 0.02
    g = gen(10)
    x0 = torch.cat([torch.rand(T, generator=g, dtype=F64),
                    10 + torch.rand(wait + after, generator=g, dtype=F64)])
    X = torch.stack([x0, torch.randn(x0.shape[0], generator=g, dtype=F64)], 1)
    ipdp = IncrementalPDP(lambda Z: Z[:, 0] * Z[:, 1], 0, grid=rule, grid_size=6, alpha=alpha,
                          window=200, storage_size=100, entrance_prob=0.5, n_ice=1, seed=11)
    run(ipdp, X[:T + wait], 1)
    grids, points = [], []
    for t in range(T + wait, T + wait + after):
        ipdp.explain(X[t:t + 1])
        grid = ipdp.grid
        grids.append(grid)
        points.append(ipdp.ice_grid[-1])  # the evaluation points used for row t
    points_t, grids_t = torch.stack(points), torch.stack(grids)
    assert float(points_t.min()) >= 10.0 and float(points_t.max()) <= 11.0
    assert float(grids_t[0, 0]) < 9.5  # at T + wait the smoothed grid is still moving
    spread = (points_t.max(0).values - points_t.min(0).values).max()
    c = ipdp.correction
    for delta in range(after):
        bound = (1 - alpha) ** (delta + 1) * 11 / c + spread
        assert float((grids_t[delta] - points_t[delta]).abs().max()) <= bound
    assert float((grids_t[-1] - points_t[-1]).abs().max()) < 11 * (1 - alpha) ** after + spread


# ---------------------------------------------------------------------------- check 18
def test_real_drift_flips_the_slope():
    """Spec §8 check 18, hyperplane stream of [PDP] §4.2 with the oracle score
    z = beta1 x1 + beta2 x2: x1 ~ N(100, 20), x2 ~ N(200, 40) and beta = (1, -0.5) before row
    T = 5000; x1 ~ N(200, 40), x2 ~ N(100, 20), beta = (-0.5, 1) after. Rolling window 2000,
    alpha = 0.002 (T = 10 / alpha). The PD is linear in both phases, so its fitted slope is
    exactly -0.5 + 1.5 q with q = (1 - a)^Delta W_pre / W_now, W = the spread of the raw grid (pre =
    at T); the slope is negative once q < 1/3, which happens within ln(3) / alpha = 549 rows
    since the range widens (W_pre <= W_now)."""
    T, N, alpha, B = 5000, 10000, 0.002, 10
    g = gen(12)
    X = torch.empty(N, 2, dtype=F64)
    X[:T, 0] = 100 + math.sqrt(20) * torch.randn(T, generator=g, dtype=F64)
    X[:T, 1] = 200 + math.sqrt(40) * torch.randn(T, generator=g, dtype=F64)
    X[T:, 0] = 200 + math.sqrt(40) * torch.randn(N - T, generator=g, dtype=F64)
    X[T:, 1] = 100 + math.sqrt(20) * torch.randn(N - T, generator=g, dtype=F64)
    beta = [torch.tensor([1.0, -0.5], dtype=F64)]
    ipdp = IncrementalPDP(lambda Z: (Z * beta[0]).sum(1), 0, alpha=alpha, window=2000)
    run(ipdp, X[:T], B)
    grid, pd = ipdp.grid, ipdp.pd
    assert abs(fit_line(grid, pd)[0] - 1.0) < 1e-9
    w_pre = float(ipdp.grid_raw[-1] - ipdp.grid_raw[0])
    beta[0] = torch.tensor([-0.5, 1.0], dtype=F64)
    first_negative = None
    for start in range(T, N, B):
        ipdp.explain(X[start:start + B])
        grid, pd = ipdp.grid, ipdp.pd
        delta = start + B - T
        slope = fit_line(grid, pd)[0]
        w_now = float(ipdp.grid_raw[-1] - ipdp.grid_raw[0])
        expected = -0.5 + 1.5 * (1 - alpha) ** delta * w_pre / w_now
        assert abs(slope - expected) < 1e-9
        if first_negative is None and slope < 0:
            first_negative = delta
    assert first_negative is not None and first_negative <= math.log(3) / alpha + B
    assert -0.5 <= slope < -0.5 + 1.5 * (1 - alpha) ** (N - T) + 1e-9


# ---------------------------------------------------------------------------- check 19
@pytest.mark.parametrize("beta", [1.7, -1.7, 0.25])
def test_importance_of_a_linear_pd(beta):
    """Spec §8 check 19: sd (ddof = 1) of a linear PD over m equidistant points of [a, b] is
    |beta| (b - a) / (m - 1) sqrt(m (m + 1) / 12) (m = 10: 0.3364 |beta| (b - a)); blind to the
    sign. Fixed grid [a, b] = [-2, 3]; and a rolling grid (the debiased grid is an average of
    equidistant grids, hence equidistant, with a = g_1, b = g_m)."""
    m = 10
    X = torch.randn(500, 2, generator=gen(13), dtype=F64)
    f = linear([beta, 1.0])
    fixed = IncrementalPDP(f, 0, grid="fixed", fixed_range=(-2.0, 3.0), grid_size=m, alpha=0.05)
    run(fixed, X, 50)
    expected = abs(beta) * 5 / (m - 1) * math.sqrt(m * (m + 1) / 12)
    assert fixed.score == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.336405 * abs(beta) * 5, rel=1e-5)
    rolling = IncrementalPDP(f, 0, grid_size=m, alpha=0.05, window=100)
    run(rolling, X, 50)
    a, b = float(rolling.grid[0]), float(rolling.grid[-1])
    expected = abs(beta) * (b - a) / (m - 1) * math.sqrt(m * (m + 1) / 12)
    assert rolling.score == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------------------- batches
def test_batches_equal_single_rows_on_a_fixed_grid():
    """Fixed model, fixed grid: one call with B rows = B calls with one row (closed-form EMA),
    up to float rounding; ICE buffer and history too."""
    X = torch.randn(300, 3, generator=gen(14), dtype=F64)
    f = lambda Z: torch.sigmoid(Z[:, 0] * Z[:, 1] - Z[:, 2])
    kw = {"grid": "fixed", "fixed_range": (-1.5, 2.0), "grid_size": 8, "alpha": 0.03,
          "n_ice": 7, "history_every": 50, "history_size": 4}
    results = []
    for batch in (1, 30, 300):
        ipdp = IncrementalPDP(f, 1, **kw)
        run(ipdp, X, batch)
        results.append(ipdp)
    one = results[0]
    for other in results[1:]:
        assert other.n_explained == one.n_explained == 300
        for name in ("grid", "pd", "grid_raw", "pd_raw", "ice", "ice_grid"):
            torch.testing.assert_close(getattr(other, name), getattr(one, name), rtol=1e-12,
                                       atol=1e-13)
    assert [r for r, _, _ in one.history] == [150, 200, 250, 300]
    # a snapshot at the end of the first batch that reaches each multiple of history_every
    assert [r for r, _, _ in results[1].history] == [150, 210, 270, 300]
    assert [r for r, _, _ in results[2].history] == [300]


def test_ice_buffer_holds_the_latest_curves():
    X = torch.randn(100, 2, generator=gen(15), dtype=F64)
    f = lambda Z: Z[:, 0] ** 3 + Z[:, 1]
    ipdp = IncrementalPDP(f, 0, grid_size=4, alpha=0.1, n_ice=5)
    run(ipdp, X, 13)
    assert ipdp.ice.shape == ipdp.ice_grid.shape == (5, 4)
    z = ipdp.ice_grid[-1]
    torch.testing.assert_close(ipdp.ice[-1], z**3 + X[-1, 1])
    torch.testing.assert_close(ipdp.ice[0], ipdp.ice_grid[0] ** 3 + X[-5, 1])


def test_history_is_bounded():
    X = torch.randn(1000, 2, generator=gen(16), dtype=F64)
    ipdp = IncrementalPDP(linear([1.0, 0.0]), 0, history_every=100, history_size=3, alpha=0.1)
    run(ipdp, X, 10)
    assert [r for r, _, _ in ipdp.history] == [800, 900, 1000]
    _row, grid, pd = ipdp.history[-1]
    assert torch.equal(grid, ipdp.grid) and torch.equal(pd, ipdp.pd)


def test_classifier_output_column():
    X = torch.rand(60, 2, generator=gen(17), dtype=F64)

    def proba(Z):
        logits = torch.stack([Z[:, 0], 2 * Z[:, 0], -Z[:, 0]], 1)
        return torch.softmax(logits, 1)

    default = IncrementalPDP(proba, 0, grid_size=5, alpha=0.2, grid="fixed", fixed_range=(0, 1))
    third = IncrementalPDP(proba, 0, grid_size=5, alpha=0.2, grid="fixed", fixed_range=(0, 1),
                           output_index=2)
    _, pd1 = run(default, X, 60)
    _, pd2 = run(third, X, 60)
    z = torch.linspace(0, 1, 5, dtype=F64)
    p = proba(torch.stack([z, z], 1))
    torch.testing.assert_close(pd1, p[:, 1])  # the PD does not depend on x1 here
    torch.testing.assert_close(pd2, p[:, 2])
    col = IncrementalPDP(lambda Z: Z[:, :1], 0, grid="fixed", fixed_range=(0, 1), grid_size=3)
    torch.testing.assert_close(run(col, X, 60)[1], torch.tensor([0.0, 0.5, 1.0], dtype=F64))


def test_chunked_calls_and_x_untouched():
    X = torch.randn(40, 3, generator=gen(18), dtype=F64)
    X_copy = X.clone()
    calls = []

    def f(Z):
        calls.append(Z.shape[0])
        return torch.cos(Z).sum(1)

    whole = IncrementalPDP(f, 2, grid_size=6, alpha=0.1)
    run(whole, X, 20)
    n_whole = len(calls)
    chunked = IncrementalPDP(f, 2, grid_size=6, alpha=0.1, chunk_size=7)
    run(chunked, X, 20)
    assert torch.equal(X, X_copy)
    assert calls[:n_whole] == [120]  # one call for all B * m rows of the explained batch
    assert max(calls[n_whole:]) <= 7 and sum(calls[n_whole:]) == 120
    assert torch.equal(whole.pd, chunked.pd)


def test_warm_up_waits_for_two_values():
    """No explanation while the rolling range holds fewer than two values; then a degenerate
    range (min == max) gives a one-point grid (tests/test_explainer_batch_checks.py)."""
    from torchstream.step import Batch

    f = linear([2.0, 1.0])
    ipdp = IncrementalPDP(None, 0, grid_size=5, alpha=0.1)
    const = torch.tensor([[1.0, 0.0]] * 10, dtype=F64)
    assert ipdp.on_batch(Batch(0, 0, const, torch.zeros(10), torch.zeros(10), f)) == {}
    ipdp.model_fn = f
    grid, pd = ipdp.grid, ipdp.pd
    assert ipdp.n_explained == 0 and bool(torch.isnan(grid).all()) and bool(torch.isnan(pd).all())
    assert math.isnan(ipdp.score)
    degenerate = IncrementalPDP(f, 0, grid_size=5, alpha=0.1)
    degenerate.explain(const)
    degenerate.explain(const)  # storage holds only 1.0: the one-point grid x0 = 1, f = 2
    assert degenerate.n_explained == 10 and degenerate.grid.tolist() == [1.0]
    assert degenerate.score == 0.0
    ipdp = IncrementalPDP(f, 0, grid_size=5, alpha=0.1)
    ipdp.explain(const[:1])
    ipdp.explain(torch.tensor([[3.0, 0.0]], dtype=F64))  # one stored value: stored only
    assert ipdp.n_explained == 0
    ipdp.explain(torch.tensor([[2.0, 5.0]], dtype=F64))
    grid, pd = ipdp.grid, ipdp.pd
    assert ipdp.n_explained == 1
    torch.testing.assert_close(grid, torch.linspace(1, 3, 5, dtype=F64))
    torch.testing.assert_close(pd, 2 * grid + 5)
    fixed = IncrementalPDP(f, 0, grid="fixed", fixed_range=(0, 1), grid_size=3)
    fixed.explain(const[:1])
    assert fixed.n_explained == 1  # a fixed grid needs no warm-up


# ---------------------------------------------------------------------------- checkpoints
def _roundtrip(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_checkpoint_resume_is_bit_exact():
    X = torch.randn(400, 3, generator=gen(19), dtype=F64)
    f = lambda Z: torch.tanh(Z[:, 0]) * Z[:, 1] + Z[:, 2]
    kw = {"grid": "quantile", "storage_size": 30, "entrance_prob": 0.5, "grid_size": 7,
          "alpha": 0.05, "history_every": 40, "n_ice": 6, "seed": 20}
    straight = IncrementalPDP(f, 0, **kw)
    run(straight, X, 10)
    first = IncrementalPDP(f, 0, **kw)
    run(first, X[:200], 10)
    resumed = IncrementalPDP(f, 0, **kw)
    resumed.load_state_dict(_roundtrip(first.state_dict()))
    for ipdp in (first, resumed):
        run(ipdp, X[200:], 10)
    for ipdp in (first, resumed):
        for name in ("grid", "pd", "grid_raw", "pd_raw", "ice", "ice_grid"):
            assert torch.equal(getattr(ipdp, name), getattr(straight, name)), name
        assert [r for r, _, _ in ipdp.history] == [r for r, _, _ in straight.history]
        assert all(torch.equal(a[2], b[2]) for a, b in zip(ipdp.history, straight.history))
        generator = ipdp.storage.state_dict()["generator"]
        assert generator.equal(straight.storage.state_dict()["generator"])
    other = IncrementalPDP(f, 1, **kw)
    with pytest.raises(ValueError, match="feature"):
        other.load_state_dict(first.state_dict())


# ---------------------------------------------------------------------------- drift detector
def _slope_stream(seed, n=12000, change=6000):
    X = torch.randn(n, 2, generator=gen(seed), dtype=F64)
    slope = [1.0]
    f = lambda Z: slope[0] * Z[:, 0] + Z[:, 1]
    return X, slope, f


def test_pdp_drift_detector_fires_after_a_slope_change():
    """A linear model's slope on x0 jumps from 1 to 2.5 at row 6000 (importance score 1.06 ->
    2.6). Quantile grid (L = 500), alpha = 0.005, ADWIN (delta 0.002, checks every 32 updates
    = 640 rows). Seeded stream: no alert before the change, the first within 1000 rows after
    it; positions are stream row indices (ends of batches)."""
    X, slope, f = _slope_stream(21)
    ipdp = IncrementalPDP(f, 0, grid="quantile", storage_size=500, alpha=0.005, grid_size=10,
                          seed=21)
    detector = PDPDriftDetector(ipdp)
    flags = []
    for start in range(0, 12000, 20):
        slope[0] = 1.0 if start < 6000 else 2.5
        detector.explain(X[start:start + 20])
        flags.append(detector.drift_detected)
    pos = detector.drift_positions
    assert pos and min(pos) > 6000 and pos[0] <= 7000, pos
    assert all(isinstance(p, int) and p % 20 == 0 for p in pos)
    assert sum(flags) == len(pos) == len(detector.snapshots)
    row, grid, pd = detector.snapshots[0]
    assert row == pos[0] and grid.shape == pd.shape == (10,)


def test_pdp_drift_detector_custom_detector_and_checkpoint(tmp_path):
    class Threshold:  # river's protocol: update(x), drift_detected
        def __init__(self):
            self.drift_detected = False

        def update(self, x):
            self.drift_detected = x > 2.0

    X, slope, f = _slope_stream(22, n=2000, change=1000)
    make = lambda: PDPDriftDetector(
        IncrementalPDP(f, 0, grid="fixed", fixed_range=(-1, 1), grid_size=5, alpha=0.5),
        Threshold())
    det = make()
    for start in range(0, 2000, 100):
        slope[0] = 1.0 if start < 1000 else 8.0
        det.explain(X[start:start + 100])
    assert det.drift_positions == list(range(1100, 2001, 100))
    # ADWIN state travels with the checkpoint: resume == uninterrupted
    X, slope, f = _slope_stream(23, n=4000)
    kw = {"grid": "quantile", "storage_size": 200, "alpha": 0.01, "seed": 3}
    straight = PDPDriftDetector(IncrementalPDP(f, 0, **kw))
    half = PDPDriftDetector(IncrementalPDP(f, 0, **kw))
    resumed = PDPDriftDetector(IncrementalPDP(f, 0, **kw))
    for start in range(0, 4000, 20):
        slope[0] = 1.0 if start < 2000 else 3.0
        straight.explain(X[start:start + 20])
        if start < 1000:
            half.explain(X[start:start + 20])
            if start + 20 == 1000:
                # the river detector is a pickled part: through a checkpoint signed with this
                # user's key, never a plain unpickling of bytes
                path = save_checkpoint(half.state_dict(), tmp_path / "half.ckpt")
                resumed.load_state_dict(load_checkpoint(path))
        else:
            resumed.explain(X[start:start + 20])
    assert resumed.drift_positions == straight.drift_positions
    assert pytest.approx(resumed.detector.estimation, abs=0) == straight.detector.estimation
    assert torch.equal(resumed.explainer.pd, straight.explainer.pd)


# ---------------------------------------------------------------------------- plug-in
def test_plugins_inside_prequential_log_to_history():
    from torchstream import OnlineRegressor, Prequential
    from torchstream.models import MLP
    from torchstream.sinks import History
    from torchstream.streams import from_numpy

    rng = np.random.default_rng(0)
    X = rng.normal(size=(640, 3))
    y = X[:, 0] - 2 * X[:, 1] + 0.1 * rng.normal(size=640)
    stream = from_numpy(X, y, feature_names=["a", "b", "c"], task="regression")
    learner = OnlineRegressor(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.01,
                            seed=0)
    ipdp = IncrementalPDP(None, 1, feature_names=["a", "b", "c"], alpha=0.05, grid_size=8)
    detector = PDPDriftDetector(IncrementalPDP(None, "a", feature_names=["a", "b", "c"],
                                               alpha=0.05))
    history = History()
    Prequential(learner, stream, batch_size=32, plugins=[ipdp, detector], sinks=[history]).run()
    assert ipdp.name == "ipdp/b"
    # rows seen (batches of 32); the first batch fills the storage
    assert history.steps("ipdp/b/importance") == list(range(64, 641, 32))
    assert history.values("ipdp/b/importance")[-1] == ipdp.score
    assert history.steps("drift/pdp_a") == list(range(64, 641, 32))
    assert set(history.values("drift/pdp_a")) <= {0.0, 1.0}
    assert history.values("ipdp/a/importance")[-1] == detector.explainer.score
    assert ipdp.n_explained == 640 - 32
    assert all(p % 32 == 0 for p in detector.drift_positions)
    assert ipdp.as_dict()["feature"] == "b" and len(ipdp.as_dict()["pd"]) == 8


def test_plot_returns_axes_and_saves_png(tmp_path):
    from matplotlib.figure import Figure

    X = torch.randn(600, 2, generator=gen(24), dtype=F64)
    ipdp = IncrementalPDP(lambda Z: Z[:, 0] ** 2 + Z[:, 1], 0, alpha=0.05, n_ice=10,
                          history_every=200, feature_names=["temperature", "x1"])
    run(ipdp, X, 20)
    ax = plot_ipdp(ipdp)
    assert ax.get_xlabel() == "temperature"
    assert len(ax.lines) == 1 + 10 + len(ipdp.history)
    path = tmp_path / "ipdp.png"
    ax.figure.savefig(path)
    assert path.stat().st_size > 1000
    fig = Figure()
    own = fig.add_subplot()
    assert plot_ipdp(ipdp, own) is own
    figs = plugin_figures(ipdp)
    assert list(figs) == ["ipdp/temperature"]


# ---------------------------------------------------------------------------- bad input
def test_bad_arguments_raise():
    f = linear([1.0, 1.0])
    with pytest.raises(ValueError, match="grid_size"):
        IncrementalPDP(f, 0, grid_size=1)
    for alpha in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            IncrementalPDP(f, 0, alpha=alpha)
    with pytest.raises(ValueError, match="grid"):
        IncrementalPDP(f, 0, grid="minmax")
    with pytest.raises(ValueError, match="fixed_range"):
        IncrementalPDP(f, 0, grid="fixed")
    with pytest.raises(ValueError, match="lo < hi"):
        IncrementalPDP(f, 0, grid="fixed", fixed_range=(1.0, 1.0))
    with pytest.raises(ValueError, match="quantiles"):
        IncrementalPDP(f, 0, grid="quantile", quantiles=(0.9, 0.1))
    with pytest.raises(ValueError, match="feature"):
        IncrementalPDP(f, -1)
    with pytest.raises(TypeError, match="IncrementalPDP"):
        PDPDriftDetector(object())
    with pytest.raises(TypeError, match="drift_detected"):
        PDPDriftDetector(IncrementalPDP(f, 0), detector=object())


def test_bad_batches_and_model_outputs_raise():
    X = torch.randn(10, 2, generator=gen(25), dtype=F64)
    with pytest.raises(ValueError, match="feature index 5"):
        IncrementalPDP(linear([1.0, 1.0]), 5).explain(X)
    ipdp = IncrementalPDP(linear([1.0, 1.0]), 1)
    ipdp.explain(X)
    with pytest.raises(ValueError, match="3 columns|2 columns"):
        ipdp.explain(torch.randn(4, 3, dtype=F64))
    with pytest.raises(ValueError, match="model_fn=None"):
        IncrementalPDP(None, 0).explain(X)
    fixed = {"grid": "fixed", "fixed_range": (0, 1), "grid_size": 3}
    two_cols = lambda Z: torch.softmax(Z, 1)
    with pytest.raises(ValueError, match="output_index=3"):
        IncrementalPDP(two_cols, 0, output_index=3, **fixed).explain(X)
    with pytest.raises(ValueError, match="output_index=1"):
        IncrementalPDP(linear([1.0, 1.0]), 0, output_index=1, **fixed).explain(X)
    with pytest.raises(ValueError, match="shape"):
        IncrementalPDP(lambda Z: Z.unsqueeze(2), 0, **fixed).explain(X)
    calls = [0]

    def nan_later(Z):
        calls[0] += 1
        out = Z.sum(1)
        return out * float("nan") if calls[0] == 3 else out

    bad = IncrementalPDP(nan_later, 0, **fixed)
    bad.explain(X)
    bad.explain(X)
    with pytest.raises(ValueError, match="NaN .*step 2"):
        bad.explain(X)
    with pytest.raises(ValueError, match="NaN or inf values at step 0"):
        IncrementalPDP(linear([1.0, 1.0]), 0).explain(torch.tensor([[float("nan"), 0.0]]))


# ---------------------------------------------------------------------------- devices
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    X = torch.randn(500, 3, generator=gen(26), dtype=F64)
    f = lambda Z: torch.sin(Z[:, 0]) * Z[:, 1] + Z[:, 2]
    cpu = IncrementalPDP(f, 0, alpha=0.02, grid_size=9, n_ice=4)
    gpu = IncrementalPDP(f, 0, alpha=0.02, grid_size=9, n_ice=4)
    run(cpu, X, 25)
    run(gpu, X.cuda(), 25)
    assert gpu.pd.device.type == "cuda"
    torch.testing.assert_close(gpu.pd.cpu(), cpu.pd, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gpu.grid.cpu(), cpu.grid, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gpu.ice.cpu(), cpu.ice, rtol=1e-12, atol=1e-12)
    gpu.load_state_dict(cpu.state_dict())
    assert gpu.score == pytest.approx(cpu.score, rel=1e-12)
