"""iPDP of a user's feature given as a group of encoded columns: a one-hot block is explained
over its category set (one PD value per category, every evaluated row a valid encoding), a
nullable numeric over its numeric grid plus one "missing" point."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from torchstream.explain.ipdp import IncrementalPDP
from torchstream.schema import Feature, Schema, running_mean_fill
from torchstream.streams.csv_reader import read_csv
from torchstream.viz.pdp import plot_ipdp

F64 = torch.float64
#: The value the model adds for each category of "c" (by name).
VALUES = {"x": 1.5, "y": -2.0, "z": 0.25}


def category_rows(schema: Schema, n: int, seed: int) -> torch.Tensor:
    """``n`` encoded rows of ``schema`` (features ``c`` categorical, ``u`` numeric): the same
    dict rows for every category order of ``c``."""
    g = torch.Generator().manual_seed(seed)
    cats = torch.multinomial(torch.tensor([0.5, 0.3, 0.2]), n, replacement=True, generator=g)
    u = torch.randn(n, generator=g, dtype=F64)
    names = ["x", "y", "z"]
    rows = [{"c": names[int(k)], "u": float(v)} for k, v in zip(cats, u)]
    return schema.encode(rows, dtype=F64)


def category_model(schema: Schema, u_weight: float, seen: list[torch.Tensor] | None = None):
    """``f(x) = VALUES[category] + u_weight * u``, reading the one-hot block of ``schema``."""
    cols = schema.feature_columns("c")
    v = torch.tensor([VALUES[name.split("=", 1)[1]] for name in schema.columns[cols]], dtype=F64)
    u = schema.columns.index("u")

    def f(Z: torch.Tensor) -> torch.Tensor:
        if seen is not None:
            seen.append(Z.clone())
        return Z[:, cols] @ v + u_weight * Z[:, u]

    return f


def ema(values: list[float], alpha: float) -> float:
    """The debiased exponential moving average of ``values``, one row at a time."""
    raw = 0.0
    for v in values:
        raw = (1 - alpha) * raw + alpha * v
    return raw / (1 - (1 - alpha) ** len(values))


def schema_with(order: tuple[str, ...]) -> Schema:
    return Schema([Feature("c", "categorical", order), Feature("u")])


# --------------------------------------------------------------------------- one-hot features
def test_pd_per_category_is_the_value_the_model_adds() -> None:
    schema = schema_with(("x", "y", "z"))
    X = category_rows(schema, 300, seed=0)
    ipdp = IncrementalPDP(category_model(schema, 0.0), "c", feature_names=schema,
                          feature_groups=schema.feature_groups(), alpha=0.05)
    for start in range(0, 300, 7):
        ipdp.explain(X[start:start + 7])
    assert ipdp.kind == "categorical" and ipdp.grid_rule == "categories"
    assert ipdp.grid.tolist() == [0.0, 1.0, 2.0]
    assert ipdp.grid_labels == ["x", "y", "z"]
    expected = torch.tensor([1.5, -2.0, 0.25], dtype=F64)
    torch.testing.assert_close(ipdp.pd, expected, rtol=0, atol=1e-12)
    # the score is the sample sd over the categories, sd(1.5, -2, 0.25) = 1.7726...
    assert ipdp.score == pytest.approx(float(expected.std(unbiased=True)), abs=1e-12)
    assert ipdp.feature_names == ["c", "u"]
    assert ipdp.importance[0].item() == pytest.approx(ipdp.score) and math.isnan(ipdp.importance[1])
    # one ICE value per category for every kept row, constant in the row for this model
    torch.testing.assert_close(ipdp.ice, expected.expand(20, 3), rtol=0, atol=1e-12)


def test_other_features_shift_every_category_by_their_smoothed_mean() -> None:
    """``f = VALUES[c] + u``: the PD at category ``c`` is ``VALUES[c]`` plus the debiased EMA of
    ``u`` over the explained rows (the same for every category)."""
    schema = schema_with(("x", "y", "z"))
    X = category_rows(schema, 200, seed=1)
    alpha = 0.03
    ipdp = IncrementalPDP(category_model(schema, 1.0), "c", feature_names=schema.columns,
                          feature_groups=schema.feature_groups(), alpha=alpha)
    for start in range(0, 200, 10):
        ipdp.explain(X[start:start + 10])
    u_mean = ema(X[:, 3].tolist(), alpha)
    expected = torch.tensor([1.5 + u_mean, -2.0 + u_mean, 0.25 + u_mean], dtype=F64)
    torch.testing.assert_close(ipdp.pd, expected, rtol=0, atol=1e-10)


def test_category_order_in_the_encoding_does_not_change_the_pd_per_name() -> None:
    results = []
    for order in [("x", "y", "z"), ("z", "x", "y"), ("y", "z", "x")]:
        schema = schema_with(order)
        X = category_rows(schema, 150, seed=2)
        ipdp = IncrementalPDP(category_model(schema, 2.0), "c", feature_names=schema,
                              feature_groups=schema.feature_groups(), alpha=0.02)
        for start in range(0, 150, 15):
            ipdp.explain(X[start:start + 15])
        assert ipdp.grid_labels == list(order)
        results.append(dict(zip(ipdp.grid_labels, ipdp.pd.tolist())))
    for other in results[1:]:
        for name in VALUES:
            assert other[name] == pytest.approx(results[0][name], abs=1e-12)


def test_every_evaluated_row_has_exactly_one_hot_in_the_block() -> None:
    schema = Schema([Feature("u"), Feature("c", "categorical", ("x", "y", "z")), Feature("w")])
    g = torch.Generator().manual_seed(3)
    cats = torch.multinomial(torch.ones(3), 40, replacement=True, generator=g)
    X = torch.cat([torch.randn(40, 1, generator=g, dtype=F64),
                   torch.nn.functional.one_hot(cats, 3).to(F64),
                   torch.randn(40, 1, generator=g, dtype=F64)], 1)
    seen: list[torch.Tensor] = []

    def f(Z: torch.Tensor) -> torch.Tensor:
        seen.append(Z.clone())
        return Z.sum(1)

    ipdp = IncrementalPDP(f, "c", feature_names=schema, feature_groups=schema.feature_groups(),
                          alpha=0.1, chunk_size=7)
    for start in range(0, 40, 8):
        ipdp.explain(X[start:start + 8])
    Z = torch.cat(seen)
    assert Z.shape == (40 * 3, 5)
    block = Z[:, 1:4]
    assert bool(((block == 0) | (block == 1)).all()) and bool((block.sum(1) == 1).all())
    # grid point k of row b: category k, every other column the row's own value
    Z = Z.view(40, 3, 5)
    torch.testing.assert_close(Z[:, :, 1:4], torch.eye(3, dtype=F64).expand(40, 3, 3))
    torch.testing.assert_close(Z[:, :, [0, 4]], X[:, [0, 4]].unsqueeze(1).expand(40, 3, 2))


# --------------------------------------------------------------------------- nullable numeric
def nullable_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns ``a, a:missing, u`` as a stream encodes them (a missing ``a`` holds the running
    mean of the earlier present values) and the raw ``a`` (NaN where missing)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, generator=g, dtype=F64) * 2 + 1
    miss = torch.rand(n, generator=g) < 0.3
    u = torch.randn(n, generator=g, dtype=F64)
    filled = torch.from_numpy(running_mean_fill(a.numpy(), miss.numpy()))
    X = torch.stack([filled, miss.to(F64), u], 1)
    return X, torch.where(miss, torch.nan, a)


def test_nullable_missing_point_is_the_mean_output_with_the_indicator_on() -> None:
    """``f = 2 a + 3 [a missing] + u``: at a numeric point ``z`` the PD is ``2 z + EMA(u)``;
    at the missing point the value column holds the running mean ``m_t`` of the present values
    before the batch (what a missing cell becomes), so the PD is the EMA of
    ``2 m_t + 3 + u``, the model's mean output with the indicator on."""
    schema = Schema([Feature("a", nullable=True), Feature("u")])
    X, a = nullable_rows(240, seed=4)
    alpha, batch = 0.04, 12
    seen: list[torch.Tensor] = []

    def f(Z: torch.Tensor) -> torch.Tensor:
        seen.append(Z.clone())
        return 2 * Z[:, 0] + 3 * Z[:, 1] + Z[:, 2]

    ipdp = IncrementalPDP(f, "a", feature_names=schema, feature_groups=schema.feature_groups(),
                          grid="fixed", fixed_range=(-2.0, 2.0), grid_size=5, alpha=alpha)
    missing_ice, fills = [], []
    for start in range(0, 240, batch):
        present = a[:start][~torch.isnan(a[:start])]
        fill = float(present.mean()) if present.numel() else 0.0
        ipdp.explain(X[start:start + batch])
        missing_ice += [2 * fill + 3 + float(u) for u in X[start:start + batch, 2]]
        fills += [fill] * batch
        Z = seen[-1].view(batch, 6, 3)
        assert bool((Z[:, :5, 1] == 0).all()) and bool((Z[:, 5, 1] == 1).all())
        torch.testing.assert_close(Z[:, 5, 0], torch.full((batch,), fill, dtype=F64),
                                   rtol=0, atol=1e-12)
    assert ipdp.kind == "nullable"
    assert ipdp.grid_labels == ["-2", "-1", "0", "1", "2", "missing"]
    assert ipdp.grid[:5].tolist() == [-2.0, -1.0, 0.0, 1.0, 2.0] and math.isnan(ipdp.grid[5])
    u_mean = ema(X[:, 2].tolist(), alpha)
    expected = [2 * z + u_mean for z in (-2, -1, 0, 1, 2)] + [ema(missing_ice, alpha)]
    torch.testing.assert_close(ipdp.pd, torch.tensor(expected, dtype=F64), rtol=0, atol=1e-10)
    assert ipdp.missing_value == pytest.approx(ema(fills, alpha), abs=1e-10)
    assert ipdp.score == pytest.approx(float(torch.tensor(expected, dtype=F64).std()), abs=1e-9)


def test_nullable_moving_grid_spans_only_present_values() -> None:
    """The rolling range is that of the present values: the running-mean fill of a missing
    cell never widens it."""
    X = torch.tensor([[0.0, 1.0], [4.0, 0.0], [2.0, 0.0], [-9.0, 1.0], [3.0, 0.0]], dtype=F64)
    ipdp = IncrementalPDP(lambda Z: Z[:, 0] - Z[:, 1], 0,
                          feature_groups={"a": [0, 1]}, feature_names=["a", "a:missing"],
                          grid_size=3, alpha=1.0)
    for row in X:
        ipdp.explain(row.view(1, 2))
    assert ipdp.grid[:3].tolist() == [2.0, 3.0, 4.0]
    # alpha = 1: the last row alone; missing point: value 3 (mean of 4, 2, 3 is 3; before
    # the last row the mean of 4, 2), indicator 1
    assert ipdp.pd.tolist() == [2.0, 3.0, 4.0, 3.0 - 1.0]


def test_indicator_must_be_zero_or_one() -> None:
    ipdp = IncrementalPDP(lambda Z: Z[:, 0], "a", feature_groups={"a": [0, 1]},
                          feature_names=["a", "a:missing"], grid="fixed", fixed_range=(0, 1))
    with pytest.raises(ValueError, match=re.escape("batch row 1, column 1 ('a', a missing-value "
                                                   "indicator) is 0.5")):
        ipdp.explain(torch.tensor([[1.0, 0.0], [2.0, 0.5]], dtype=F64))
    assert ipdp.n_explained == 0 and ipdp.n_seen == 0


# --------------------------------------------------------------------------- arguments, state
def test_group_arguments_are_checked() -> None:
    groups = {"c": [0, 1, 2], "u": [3]}
    with pytest.raises(ValueError, match="'d' is not one of the feature_groups"):
        IncrementalPDP(None, "d", feature_groups=groups)
    with pytest.raises(ValueError, match="does not cover the columns"):
        IncrementalPDP(None, "c", feature_groups=groups, feature_names=list("abcde"))
    with pytest.raises(ValueError, match="fixed_range is not used"):
        IncrementalPDP(None, "c", feature_groups=groups, grid="fixed", fixed_range=(0, 1))
    ipdp = IncrementalPDP(lambda Z: Z[:, 0], "c", feature_groups=groups)
    assert ipdp.grid_labels == ["x0", "x1", "x2"] and ipdp.feature_names == ["c", "u"]
    with pytest.raises(ValueError, match="X has 5 columns but feature_groups cover 4"):
        ipdp.explain(torch.zeros(2, 5))
    rows = torch.tensor([[0.0, 1.0, 0.0, 2.0], [0.0, 1.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match=re.escape("batch row 1, the one-hot columns [0, 1, 2] "
                                                   "of 'c' are [0.0, 1.0, 1.0]")):
        ipdp.explain(rows)
    assert ipdp.n_seen == 0
    # a one-column group is the numeric feature as without groups
    numeric = IncrementalPDP(lambda Z: Z[:, 3], 1, feature_groups=groups, grid="fixed",
                             fixed_range=(0.0, 1.0), grid_size=3, alpha=1.0)
    numeric.explain(torch.zeros(1, 4))
    assert numeric.kind == "numeric" and numeric.feature == 3 and numeric.feature_name == "u"
    assert numeric.pd.tolist() == [0.0, 0.5, 1.0]


@pytest.mark.parametrize("which", ["categorical", "nullable"])
def test_state_dict_round_trip(which: str) -> None:
    if which == "categorical":
        schema = schema_with(("x", "y", "z"))
        X = category_rows(schema, 120, seed=5)
        model, feature, extra = category_model(schema, 1.0), "c", {}
    else:
        schema = Schema([Feature("a", nullable=True), Feature("u")])
        X = nullable_rows(120, seed=5)[0]

        def model(Z: torch.Tensor) -> torch.Tensor:
            return Z[:, 0] ** 2 + 3 * Z[:, 1] + Z[:, 2]

        feature, extra = "a", {"grid": "quantile", "grid_size": 4}

    def make() -> IncrementalPDP:
        return IncrementalPDP(model, feature, feature_names=schema,
                              feature_groups=schema.feature_groups(), alpha=0.05, **extra)

    first = make()
    for start in range(0, 60, 6):
        first.explain(X[start:start + 6])
    second = make()
    second.load_state_dict(first.state_dict())
    for start in range(60, 120, 6):
        first.explain(X[start:start + 6])
        second.explain(X[start:start + 6])
    assert torch.equal(first.pd, second.pd)
    torch.testing.assert_close(first.grid, second.grid, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(first.ice, second.ice) and first.grid_labels == second.grid_labels
    other = IncrementalPDP(model, "u", feature_names=schema,
                           feature_groups=schema.feature_groups())
    with pytest.raises(ValueError, match=f"state has group={feature!r}"):
        other.load_state_dict(first.state_dict())


# --------------------------------------------------------------------------- figure
def test_figure_draws_categories_as_labelled_bars_and_missing_as_a_level() -> None:
    schema = schema_with(("x", "y", "z"))
    X = category_rows(schema, 60, seed=6)
    ipdp = IncrementalPDP(category_model(schema, 0.0), "c", feature_names=schema,
                          feature_groups=schema.feature_groups(), alpha=0.1, n_ice=5)
    ipdp.explain(X)
    ax = plot_ipdp(ipdp)
    heights = [patch.get_height() for patch in ax.patches]
    assert heights == pytest.approx([1.5, -2.0, 0.25], abs=1e-12)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]

    schema = Schema([Feature("a", nullable=True), Feature("u")])
    nullable = IncrementalPDP(lambda Z: Z[:, 0] + 3 * Z[:, 1], "a", feature_names=schema,
                              feature_groups=schema.feature_groups(), grid="fixed",
                              fixed_range=(0.0, 1.0), grid_size=3, alpha=1.0)
    nullable.explain(torch.tensor([[2.0, 0.0, 0.0]], dtype=F64))
    nullable.explain(torch.tensor([[2.0, 1.0, 0.0]], dtype=F64))
    ax = plot_ipdp(nullable)
    curve = next(line for line in ax.get_lines() if line.get_label().startswith("iPDP"))
    assert list(curve.get_xdata()) == [0.0, 0.5, 1.0]
    level = next(line for line in ax.get_lines() if line.get_label().startswith("missing"))
    # alpha = 1, the last row: value column 2 (the present value before it), indicator 1
    assert list(level.get_ydata()) == [5.0, 5.0]


# --------------------------------------------------------------------------- real data


def test_adult_workclass_pd_per_category(adult_csv: Path) -> None:
    """A linear model on the encoded adult rows: the PD of ``workclass`` at a category is its
    weight plus the same smoothed rest for every category, and every evaluated row has one hot
    in the block."""
    stream = read_csv(adult_csv, "income", nrows=2000)
    schema = stream.schema
    X = torch.as_tensor(stream.X, dtype=F64)
    block = schema.feature_columns("workclass")
    w = torch.randn(X.shape[1], generator=torch.Generator().manual_seed(7), dtype=F64) * 1e-3
    hots: list[torch.Tensor] = []

    def f(Z: torch.Tensor) -> torch.Tensor:
        hots.append(Z[:, block].sum(1))
        return Z @ w

    ipdp = IncrementalPDP(f, "workclass", feature_names=schema,
                          feature_groups=schema.feature_groups(), alpha=0.01)
    for s in range(0, X.shape[0], 250):
        ipdp.explain(X[s : s + 250])
    assert "Private" in ipdp.grid_labels
    assert ipdp.grid_labels == [c.split("=", 1)[1] for c in schema.columns[block]]
    assert bool((torch.cat(hots) == 1).all())
    shift = ipdp.pd - w[block]
    torch.testing.assert_close(shift, shift[0].expand_as(shift), rtol=0, atol=1e-9)
