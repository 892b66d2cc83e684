"""Feature groups: iPFI, iSAGE and the local attributor act on a feature's encoded block as a
whole (one-hot blocks stay one-hot, one importance per user feature)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from torchstream.explain.groups import check_feature_groups
from torchstream.explain.conditional import ConditionalTreeSampler
from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.explain.local import LocalAttributor
from torchstream.explain.storage import FreshSampler, UniformReservoir
from torchstream.schema import Feature, Schema
from torchstream.streams.csv_reader import read_csv

F64 = torch.float64
#: Category frequencies of the one-hot feature "c" (columns 0..2).
P = torch.tensor([0.5, 0.3, 0.2], dtype=F64)
GROUPS = {"c": [0, 1, 2], "u": [3], "v": [4]}


def draw_rows(n: int, generator: torch.Generator) -> torch.Tensor:
    """Rows ``[n, 5]``: a one-hot category with frequencies ``P`` and two N(0, 1) columns."""
    cat = torch.multinomial(P, n, replacement=True, generator=generator)
    onehot = torch.nn.functional.one_hot(cat, 3).to(F64)
    return torch.cat([onehot, torch.randn(n, 2, generator=generator, dtype=F64)], 1)


def valid_onehot(Z: torch.Tensor) -> bool:
    block = Z[:, :3]
    return bool(((block == 0) | (block == 1)).all() and (block.sum(1) == 1).all())


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"a": [0, 1], "b": [1, 2]}, "['b'] has column 1 also in group 'a'"),
        ({"a": [0], "b": []}, "['b'] is empty"),
        ({"a": [0, 1], "b": [3]}, "['b'] has 3"),
        ({"a": [0, 1.0], "b": [2]}, "['a'] has 1.0"),
        ({"a": [0, 1]}, "does not cover the columns [2]"),
    ],
)
def test_invalid_groups_name_the_group(groups: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        check_feature_groups(groups, 3)
    with pytest.raises(ValueError, match="feature_groups"):
        IncrementalPFI(lambda Z: Z[:, 0], "mse", 3, feature_groups=groups)


def test_schema_feature_groups_cover_the_columns() -> None:
    schema = Schema(
        [Feature("n", nullable=True), Feature("c", "categorical", ("x", "y", "z")), "m"]
    )
    groups = schema.feature_groups()
    assert groups == {"n": [0, 1], "c": [2, 3, 4], "m": [5]}
    assert sorted(j for cols in groups.values() for j in cols) == list(range(schema.n_columns))


# --------------------------------------------------------------------------- (a) closed form
def test_group_ipfi_of_a_onehot_feature_matches_its_closed_form() -> None:
    """The model reads the category exactly (its output is the one-hot block), so the base
    zero-one loss is 0 and a replacement block drawn with the category frequencies changes
    the prediction with probability ``1 - sum_c p_c^2 = 0.62``. The unused numeric columns get
    exactly 0 (the model ignores them, every draw gives the same loss)."""
    g = torch.Generator().manual_seed(1)
    n, batch, k, alpha = 20000, 200, 10, 0.001
    X = draw_rows(n, g)
    y = X[:, :3].argmax(1).to(F64)
    ipfi = IncrementalPFI(
        lambda Z: Z[:, :3], "zero_one", 5, alpha=alpha, n_samples=k,
        storage=FreshSampler(draw_rows, 5, seed=2), feature_groups=GROUPS, seed=3,
    )
    for s in range(0, n, batch):
        ipfi.explain(X[s : s + batch], y[s : s + batch])
    expected = 1.0 - float((P**2).sum())
    est = ipfi.as_dict()
    assert list(est) == ["c", "u", "v"]
    # per-row contribution: mean of K Bernoulli(1 - p_{c_b}) given the row's category c_b, so
    # Var = Var_c(1 - p_c) + E_c[p_c (1 - p_c)] / K; the EMA of iid contributions has variance
    # Var * alpha / (2 - alpha). Tolerance: 5 standard deviations.
    var = float((P * (1 - P) ** 2).sum() - expected**2 + (P * P * (1 - P)).sum() / k)
    sigma = math.sqrt(var * alpha / (2 - alpha))
    print(f"group iPFI of 'c': expected {expected:.4f}, estimated {est['c']:.4f}, "
          f"sigma {sigma:.4f}")
    assert abs(est["c"] - expected) < 5 * sigma
    assert est["u"] == 0.0 and est["v"] == 0.0


# --------------------------------------------------------------------------- (b) invariance
def _run(explainer: IncrementalPFI | IncrementalSAGE, X: torch.Tensor, y: torch.Tensor
         ) -> torch.Tensor:
    for s in range(0, X.shape[0], 50):
        explainer.explain(X[s : s + 50], y[s : s + 50])
    return explainer.importance


@pytest.mark.parametrize("kind", ["ipfi", "joint", "product"])
def test_group_results_do_not_depend_on_the_order_of_categories(kind: str) -> None:
    g = torch.Generator().manual_seed(4)
    X = draw_rows(1000, g)
    w = torch.tensor([0.0, 1.0, 3.0, 2.0, 0.0], dtype=F64)
    y = X @ w + 0.3 * torch.randn(1000, generator=g, dtype=F64)
    order = torch.tensor([2, 0, 1, 3, 4])  # the categories in another column order

    def build(weights: torch.Tensor) -> IncrementalPFI | IncrementalSAGE:
        storage = UniformReservoir(64, 5, seed=5)
        if kind == "ipfi":
            return IncrementalPFI(lambda Z: Z @ weights, "mse", 5, storage=storage,
                                  n_samples=2, feature_groups=GROUPS, seed=6)
        return IncrementalSAGE(lambda Z: Z @ weights, "mse", 5, storage=storage, imputer=kind,
                               n_samples=2, feature_groups=GROUPS, seed=6)

    first = _run(build(w), X, y)
    second = _run(build(w[order]), X[:, order], y)
    assert torch.equal(first, second)
    assert first[0] > 0.5  # the category matters: not a trivially equal pair of zeros


# --------------------------------------------------------------------------- (c) valid rows
@pytest.mark.parametrize("kind", ["ipfi", "joint", "product", "observational"])
def test_every_built_row_is_a_valid_encoding(kind: str) -> None:
    g = torch.Generator().manual_seed(7)
    X = draw_rows(1200, g)
    w = torch.tensor([0.0, 1.0, 3.0, 2.0, 0.0], dtype=F64)
    y = X @ w
    seen: list[torch.Tensor] = []

    def model(Z: torch.Tensor) -> torch.Tensor:
        seen.append(Z.clone())
        return Z @ w

    if kind == "ipfi":
        explainer: IncrementalPFI | IncrementalSAGE = IncrementalPFI(
            model, "mse", 5, n_samples=3, feature_groups=GROUPS)
    elif kind == "observational":
        explainer = IncrementalSAGE(model, "mse", 5, removal="observational", n_samples=2,
                                    empty_prediction="imputed", feature_groups=GROUPS)
    else:
        explainer = IncrementalSAGE(model, "mse", 5, imputer=kind, n_samples=2,
                                    empty_prediction="imputed", feature_groups=GROUPS)
    _run(explainer, X, y)
    assert len(seen) > 10
    assert all(valid_onehot(Z) for Z in seen)
    assert explainer.importance.shape == (3,)


def test_column_level_removal_builds_invalid_rows() -> None:
    """Without groups the columns of a block are replaced one by one: the check of the test
    above does fail on such rows."""
    g = torch.Generator().manual_seed(7)
    X = draw_rows(400, g)
    seen: list[torch.Tensor] = []

    def model(Z: torch.Tensor) -> torch.Tensor:
        seen.append(Z.clone())
        return Z[:, 1]

    _run(IncrementalPFI(model, "mse", 5), X, X[:, 1])
    assert not all(valid_onehot(Z) for Z in seen)


def test_product_imputer_draws_one_row_per_group() -> None:
    res = UniformReservoir(8, 5, seed=0)
    res.update(draw_rows(8, torch.Generator().manual_seed(0)))
    x = torch.full((2, 5), -1.0, dtype=F64)
    mask = torch.zeros(2, 6, 5, dtype=torch.bool)
    out = MarginalImputer("product", GROUPS).impute(x, mask, res)
    stored = res.rows
    block_rows = (out[..., :3].reshape(-1, 1, 3) == stored[:, :3].unsqueeze(0)).all(-1)
    assert bool(block_rows.any(1).all())  # every block is the block of a stored row
    assert valid_onehot(out.reshape(-1, 5))


# --------------------------------------------------------------------------- (d) iSAGE
def test_group_isage_on_an_additive_model_matches_the_closed_form() -> None:
    """``f(x) = w_c(x_c) + 2 x_u`` (``v`` unused), ``y = f(x)``, independent groups, squared
    loss: the game is additive, ``nu(S) = sum_{i in S} Var g_i``, so SAGE is
    ``(Var w_c, 4, 0)`` with ``Var w_c = 2.1 - 0.9^2 = 1.29``; with the imputed empty
    prediction and ``m`` inner samples the estimator's expectation is ``(1 + 1/m)`` times SAGE
    (see the class docstring): ``(1.6125, 5, 0)`` for ``m = 4``."""
    g = torch.Generator().manual_seed(8)
    n, m, alpha = 200000, 4, 0.0001
    X = draw_rows(n, g)
    w = torch.tensor([0.0, 1.0, 3.0, 2.0, 0.0], dtype=F64)
    y = X @ w
    var_c = float((P * w[:3] ** 2).sum() - (P * w[:3]).sum() ** 2)
    assert math.isclose(var_c, 1.29)
    expected = torch.tensor([var_c, 4.0, 0.0], dtype=F64) * (1 + 1 / m)
    for imputer in ("joint", "product"):
        isage = IncrementalSAGE(
            lambda Z: Z @ w, "mse", 5, alpha=alpha, imputer=imputer, n_samples=m,
            empty_prediction="imputed", storage=FreshSampler(draw_rows, 5, seed=9),
            feature_groups=GROUPS, seed=10,
        )
        for s in range(0, n, 500):
            isage.explain(X[s : s + 500], y[s : s + 500])
        # Chebyshev at 1 - delta = 0.96 is 5 standard deviations of the EMA (about 0.2-0.3)
        half = isage.half_width(0.04)
        assert bool((half < 0.35).all())
        assert bool(((isage.importance - expected).abs() <= half).all()), (
            imputer, isage.importance, expected)


# --------------------------------------------------------------------------- (e) local
def test_local_group_sums_keep_completeness() -> None:
    g = torch.Generator().manual_seed(11)
    X = draw_rows(6, g)
    w = torch.tensor([0.5, -1.0, 3.0, 2.0, -0.7], dtype=F64)
    exp = LocalAttributor(lambda Z: Z @ w, "shapley_value_sampling", 0.0, feature_groups=GROUPS)
    res = exp.attribute(X)
    cols = res.column_attributions
    assert cols is not None and res.attributions.shape == (6, 3)
    torch.testing.assert_close(cols, X * w)  # a linear model against 0: w_j x_j
    torch.testing.assert_close(res.attributions[:, 0], cols[:, :3].sum(1))
    torch.testing.assert_close(res.attributions.sum(1), cols.sum(1))
    torch.testing.assert_close(res.attributions.sum(1), res.output - res.baseline_output)
    # captum accumulates the sampled marginal contributions in float32 (rounding ~1e-7)
    assert res.delta is not None and float(res.delta.abs().max()) < 1e-6


# --------------------------------------------------------------------------- (f) adult
def test_adult_ipfi_with_schema_groups(adult_csv: Path) -> None:
    stream = read_csv(adult_csv, "income", nrows=3000)
    schema = stream.schema
    X = torch.as_tensor(stream.X, dtype=F64)
    y = torch.as_tensor(stream.y).to(F64)
    groups = schema.feature_groups()
    mean, std = X.mean(0), X.std(0).clamp_min(1e-9)
    w = torch.randn(X.shape[1], generator=torch.Generator().manual_seed(0), dtype=F64)
    ipfi = IncrementalPFI(lambda Z: torch.sigmoid(((Z - mean) / std) @ w), "zero_one",
                          X.shape[1], alpha=0.01, feature_groups=groups)
    for s in range(0, X.shape[0], 100):
        ipfi.explain(X[s : s + 100], y[s : s + 100])
    result = ipfi.as_dict()
    assert list(result) == [str(n) for n in schema.names]
    assert "income" not in result and len(result) < X.shape[1]
    assert all(math.isfinite(v) for v in result.values())


def test_grouped_sampler_resumes_exactly_and_must_match_the_groups() -> None:
    g = torch.Generator().manual_seed(12)
    X = draw_rows(600, g)
    y = X @ torch.tensor([0.0, 1.0, 3.0, 2.0, 0.0], dtype=F64)

    def build() -> IncrementalSAGE:
        return IncrementalSAGE(lambda Z: Z[:, 1] + 3 * Z[:, 2] + 2 * Z[:, 3], "mse", 5,
                               removal="observational", feature_groups=GROUPS)

    first = build()
    for s in range(0, 400, 100):
        first.explain(X[s : s + 100], y[s : s + 100])
    second = build()
    second.load_state_dict(first.state_dict())
    for e in (first, second):
        for s in range(400, 600, 100):
            e.explain(X[s : s + 100], y[s : s + 100])
    assert torch.equal(first.importance, second.importance)
    with pytest.raises(ValueError, match="same feature_groups"):
        IncrementalSAGE(lambda Z: Z[:, 0], "mse", 5, removal=ConditionalTreeSampler(5),
                        feature_groups=GROUPS)
