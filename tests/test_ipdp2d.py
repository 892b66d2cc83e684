"""IncrementalPDP2D: the two-way incremental PD of a pair, the one-way PDs on the same grid and
Friedman's H² from them.

References: the closed forms of H² (``f = x0 x1`` is pure interaction, ``f = x0 + x1`` none)
with centred inputs; scikit-learn's two-way and one-way ``partial_dependence`` (brute force)
of a static model on the shared California housing data, given the explainer's grid as
``custom_values`` and its EMA weights ``alpha (1 - alpha)^(n - 1 - i)`` as ``sample_weight``
(then the two are the same weighted mean, so they agree to float rounding), with H² computed
from its output by numpy; a brute-force loop over the rows for one-hot and nullable axes.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.inspection import partial_dependence

from torchstream.step import Batch
from torchstream.explain.ipdp2d import IncrementalPDP2D, h_squared

F64 = torch.float64
BOX = ((-2.0, 2.0), (-2.0, 2.0))


def normal_rows(n: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


def feed(pdp: IncrementalPDP2D, X: torch.Tensor, batch: int) -> IncrementalPDP2D:
    for start in range(0, X.shape[0], batch):
        pdp.explain(X[start:start + batch])
    return pdp


def ema_weights(n: int, alpha: float) -> np.ndarray:
    """The debiased EMA's weight of row ``i`` after ``n`` rows (they sum to 1)."""
    w = alpha * (1 - alpha) ** np.arange(n - 1, -1, -1, dtype=np.float64)
    return w / (1 - (1 - alpha) ** n)


def numpy_h2(pd2: np.ndarray, pd_a: np.ndarray, pd_b: np.ndarray) -> float:
    """H² from the three PDs on a grid, each centred over its points (written apart from
    :func:`h_squared`)."""
    c2 = pd2 - pd2.mean()
    ca, cb = pd_a - pd_a.mean(), pd_b - pd_b.mean()
    return float(((c2 - ca[:, None] - cb[None, :]) ** 2).sum() / (c2 ** 2).sum())


# ------------------------------------------------------------------------ closed forms
def test_a_product_is_pure_interaction():
    """f = x0 x1 + x2: every row's ICE surface over (x0, x1) is u v + x2, so the two-way PD
    is u v + E_w[x2] exactly and the one-way PDs u E_w[x1] + E_w[x2], v E_w[x0] + E_w[x2]
    (E_w: the EMA's weighted mean of the rows). On a grid symmetric about 0 the cross terms
    vanish and H² = 1 + M (E_w[x1]^2 / sum v^2 + E_w[x0]^2 / sum u^2), M the points per axis:
    1 up to the weighted means' noise, above 1 by it."""
    n, alpha = 3000, 0.01
    X = normal_rows(n, 3)
    pdp = feed(IncrementalPDP2D(lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 2], (0, 1), grid="fixed",
                                fixed_range=BOX, grid_size=5, alpha=alpha), X, 100)
    w = torch.from_numpy(ema_weights(n, alpha))
    m0, m1, m2 = (w @ X).tolist()
    u = torch.linspace(-2, 2, 5, dtype=F64)
    torch.testing.assert_close(pdp.pd, u[:, None] * u[None, :] + m2, rtol=0, atol=1e-12)
    torch.testing.assert_close(pdp.pd_a, u * m1 + m2, rtol=0, atol=1e-12)
    torch.testing.assert_close(pdp.pd_b, u * m0 + m2, rtol=0, atol=1e-12)
    s = float(u.square().sum())
    assert pdp.h2 == pytest.approx(1 + 5 * (m1 ** 2 + m0 ** 2) / s, rel=1e-12)
    assert 1.0 <= pdp.h2 < 1.02
    assert pdp.grid_a.tolist() == u.tolist() and pdp.labels_b == ["-2", "-1", "0", "1", "2"]


@pytest.mark.parametrize("f", [
    lambda Z: Z[:, 0] + Z[:, 1],
    lambda Z: torch.sin(Z[:, 0]) * Z[:, 2] + Z[:, 1] ** 2 * Z[:, 2],  # interactions, none of x0x1
])
def test_no_interaction_of_the_pair_gives_zero(f):
    """Without an x0 x1 interaction every row's ICE surface is additive, so H² is 0 up to
    rounding whatever the EMA's noise (moving grid, small sample)."""
    pdp = feed(IncrementalPDP2D(f, (0, 1), grid="rolling", window=200, grid_size=6,
                                alpha=0.05), normal_rows(600, 3, seed=1), 20)
    assert pdp.n_explained == 580  # the first batch fills the ranges
    assert abs(pdp.h2) < 1e-20


def test_h_squared_closed_forms_and_constant():
    u = torch.linspace(-1, 1, 7, dtype=F64)
    v = torch.linspace(-3, 3, 4, dtype=F64)
    assert h_squared(u[:, None] * v[None, :], torch.zeros(7), torch.zeros(4)) == 1.0
    assert h_squared(u[:, None] + 2 * v[None, :], u, 2 * v) == 0.0
    # half of each: f = x_a x_b + x_a + x_b on this grid: sum (uv)^2 / sum (uv + u + v)^2
    pd2 = u[:, None] * v[None, :] + u[:, None] + v[None, :]
    expected = float((u[:, None] * v[None, :]).square().sum() / pd2.square().sum())
    assert h_squared(pd2, u, v) == pytest.approx(expected, rel=1e-14)
    assert math.isnan(h_squared(torch.ones(7, 4), torch.ones(7), torch.ones(4)))


# ------------------------------------------------------------------------ scikit-learn
def california(data_dir: Path, n: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``n`` random complete rows of the 8 numeric California housing features (the counts
    logged), standardised, and the standardised log house value."""
    path = data_dir / "california_housing.csv"
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    with path.open() as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [[float(v) for v in line[:9]] for line in reader if line[4] != ""]
    data = np.array(rows)[np.random.default_rng(1).choice(len(rows), n, replace=False)]
    X, y = data[:, :8].copy(), np.log(data[:, 8])
    X[:, 3:7] = np.log(X[:, 3:7])
    return header[:8], (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


@pytest.fixture(scope="module")
def housing(data_dir):
    names, X, y = california(data_dir, 1500)
    model = GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X, y)
    return names, X, model


@pytest.mark.parametrize("pair", [(0, 1), (7, 2)])  # longitude x latitude, income x age
def test_agrees_with_scikit_learn_partial_dependence(housing, pair):
    """The explainer's two-way and one-way PDs and H² equal scikit-learn's on the same grid
    (sklearn's own 5-95 % grid, as ``fixed_range``) with the EMA's weights of the rows."""
    names, X, model = housing
    a, b = pair
    grids = partial_dependence(model, X, list(pair), grid_resolution=6, method="brute",
                               kind="average")["grid_values"]
    alpha, n = 0.02, 600
    rows = torch.from_numpy(X[:n])
    pdp = IncrementalPDP2D(lambda Z: torch.from_numpy(model.predict(Z.numpy())), pair,
                           feature_names=names, grid="fixed",
                           fixed_range=[grids[0].tolist(), grids[1].tolist()], alpha=alpha)
    feed(pdp, rows, 50)
    w = ema_weights(n, alpha)
    custom = {a: grids[0], b: grids[1]}
    ref2 = partial_dependence(model, X[:n], list(pair), custom_values=custom, sample_weight=w,
                              method="brute", kind="average")["average"][0]
    ref_a, ref_b = (partial_dependence(model, X[:n], [j], custom_values={j: custom[j]},
                                       sample_weight=w, method="brute",
                                       kind="average")["average"][0] for j in pair)
    np.testing.assert_allclose(pdp.pd.numpy(), ref2, rtol=0, atol=1e-10)
    np.testing.assert_allclose(pdp.pd_a.numpy(), ref_a, rtol=0, atol=1e-10)
    np.testing.assert_allclose(pdp.pd_b.numpy(), ref_b, rtol=0, atol=1e-10)
    reference = numpy_h2(ref2, ref_a, ref_b)
    assert 0.005 < reference < 0.95  # a real, partial interaction: the test can tell
    assert pdp.h2 == pytest.approx(reference, rel=1e-9)
    assert pdp.features == (names[a], names[b])


# ------------------------------------------------------------------------ groups
def brute_force(f, batches, set_a, set_b, points_a, points_b, weights):
    """The weighted one-way and two-way PDs by looping over the rows and the points."""
    rows = torch.cat(batches)
    of_batch = [k for k, batch in enumerate(batches) for _ in range(batch.shape[0])]
    pd2 = np.zeros((len(points_a), len(points_b)))
    pd_a, pd_b = np.zeros(len(points_a)), np.zeros(len(points_b))
    for i, x in enumerate(rows):
        batch = of_batch[i]
        for k, pa in enumerate(points_a):
            xa = set_a(x.clone(), pa, batch)
            pd_a[k] += weights[i] * float(f(xa[None])[0])
            for m, pb in enumerate(points_b):
                pd2[k, m] += weights[i] * float(f(set_b(xa.clone(), pb, batch)[None])[0])
        for m, pb in enumerate(points_b):
            pd_b[m] += weights[i] * float(f(set_b(x.clone(), pb, batch)[None])[0])
    return pd2, pd_a, pd_b


def test_one_hot_and_nullable_axes():
    """A one-hot feature (its categories the grid) against a nullable numeric (its grid plus a
    "missing" point: indicator 1, the value the running mean of the present values before
    the batch), against a loop over the rows."""
    names = ["job=a", "job=b", "job=c", "inc", "inc:missing", "age"]
    groups = {"job": [0, 1, 2], "inc": [3, 4], "age": [5]}
    g = torch.Generator().manual_seed(2)
    batches = []
    for _ in range(3):
        job = torch.nn.functional.one_hot(torch.randint(0, 3, (8,), generator=g), 3).to(F64)
        inc = torch.randn(8, generator=g, dtype=F64)
        missing = (torch.rand(8, generator=g) < 0.3).to(F64)
        inc = torch.where(missing == 1, torch.zeros_like(inc), inc)
        batches.append(torch.cat([job, inc[:, None], missing[:, None],
                                  torch.randn(8, 1, generator=g, dtype=F64)], 1))
    weight = torch.tensor([1.0, 3.0, -1.0], dtype=F64)

    def f(Z):
        return (Z[:, :3] @ weight) * (Z[:, 3] + 2 * Z[:, 4]) + Z[:, 5]

    alpha = 0.1
    pdp = IncrementalPDP2D(f, ("job", "inc"), feature_names=names, feature_groups=groups,
                           grid="fixed", fixed_range=[None, (-1.0, 1.0)], grid_size=3,
                           alpha=alpha)
    for batch in batches:
        pdp.explain(batch)
    assert pdp.labels_a == ["a", "b", "c"]
    assert pdp.labels_b == ["-1", "0", "1", "missing"]
    assert pdp.pd.shape == (3, 4) and math.isnan(pdp.grid_b[-1])
    fills = [0.0]  # the running mean of the present values before each batch
    present = [b[b[:, 4] == 0, 3] for b in batches]
    for k in (1, 2):
        fills.append(float(torch.cat(present[:k]).mean()))

    def set_a(x, c, batch):
        x[:3] = torch.nn.functional.one_hot(torch.tensor(c), 3).to(F64)
        return x

    def set_b(x, point, batch):
        x[3], x[4] = (fills[batch], 1.0) if point == "missing" else (point, 0.0)
        return x

    pd2, pd_a, pd_b = brute_force(f, batches, set_a, set_b, [0, 1, 2],
                                  [-1.0, 0.0, 1.0, "missing"], ema_weights(24, alpha))
    np.testing.assert_allclose(pdp.pd.numpy(), pd2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pdp.pd_a.numpy(), pd_a, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pdp.pd_b.numpy(), pd_b, rtol=0, atol=1e-12)
    assert pdp.h2 == pytest.approx(numpy_h2(pd2, pd_a, pd_b), rel=1e-12)


# ------------------------------------------------------------------------ mechanics
def test_warm_up_of_moving_grids_and_one_model_call_per_batch():
    calls = []

    def f(Z):
        calls.append(Z.shape[0])
        return Z[:, 0] * Z[:, 1]

    pdp = IncrementalPDP2D(f, (0, 1), grid="quantile", grid_size=4, alpha=0.1)
    X = normal_rows(30, 2)
    pdp.explain(X[:10])  # the ranges are empty before it: only stored
    assert calls == [] and pdp.n_explained == 0 and math.isnan(pdp.h2)
    assert pdp.on_batch(Batch(1, 10, X[10:20], X[10:20, 0], X[10:20, 0], learner=f)) == {
        "ipdp2d/(x0, x1)/h2": pdp.h2}
    assert calls == [10 * (4 * 4 + 4 + 4)] and pdp.n_explained == 10
    chunked = IncrementalPDP2D(f, (0, 1), grid="quantile", grid_size=4, alpha=0.1,
                               chunk_size=100)
    calls.clear()
    feed(chunked, X[:20], 10)
    assert calls == [100, 100, 40]
    torch.testing.assert_close(chunked.pd, pdp.pd, rtol=0, atol=0)


def test_checkpoint_resume_is_bit_exact():
    """A resumed explainer (state through torch.save, weights-only) continues exactly as the
    uninterrupted one: the quantile storages' entrance coins included."""
    def f(Z):
        return Z[:, 0] * Z[:, 2] + Z[:, 1]

    def make():
        return IncrementalPDP2D(f, (0, 2), grid="quantile", entrance_prob=0.5,
                                storage_size=30, grid_size=5, alpha=0.02, history_every=100,
                                seed=4)

    X = normal_rows(800, 3, seed=3)
    whole = feed(make(), X, 40)
    first = feed(make(), X[:400], 40)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = make()
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    feed(resumed, X[400:], 40)
    for name in ("pd", "pd_a", "pd_b", "grid_a", "grid_b"):
        assert torch.equal(getattr(resumed, name), getattr(whole, name)), name
    assert resumed.h2 == whole.h2 and list(resumed.history) == list(whole.history)
    assert len(whole.history) == 8 and whole.history[-1][0] == 800
    other = IncrementalPDP2D(f, (0, 1), grid="quantile")
    with pytest.raises(ValueError, match="features"):
        other.load_state_dict(first.state_dict())


@pytest.mark.parametrize("kwargs, message", [
    ({"features": (1, 1)}, "two different features"),
    ({"features": (0,)}, "a pair"),
    ({"features": (0, 1), "grid": "fixed", "fixed_range": (-1.0, 1.0)}, r"'x0': fixed_range"),
    ({"features": (0, 1), "grid": "fixed", "fixed_range": [(0, 1), (0, 1), (0, 1)]},
     "one entry per feature"),
    ({"features": (0, "age")}, "feature_names"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        IncrementalPDP2D(lambda Z: Z[:, 0], **kwargs)


def test_a_bad_batch_names_the_cell_and_leaves_no_trace():
    pdp = IncrementalPDP2D(lambda Z: Z[:, 0] * Z[:, 1], (0, 1), grid="fixed",
                           fixed_range=BOX, grid_size=3, alpha=0.1)
    X = normal_rows(10, 3)
    pdp.explain(X[:5])
    before = pdp.state_dict()
    bad = X[5:].clone()
    bad[2, 2] = math.nan
    with pytest.raises(ValueError, match="batch row 2, column 2"):
        pdp.explain(bad)
    after = pdp.state_dict()
    assert torch.equal(after["ema"]["raw"], before["ema"]["raw"])
    assert after["n_seen"] == before["n_seen"] == 5
    with pytest.raises(ValueError, match="3 columns like before"):
        pdp.explain(X[:, :2])
