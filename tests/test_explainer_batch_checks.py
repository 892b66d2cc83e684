"""Every batch of iPFI, iSAGE and iPDP is checked (finite X and y, class labels in the model's
range), a bad batch raises a ValueError naming its row (and column) and leaves the explainer
exactly as it was, and a constant feature gets importance 0 (iPDP: a one-point grid, no NaN)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from torchstream.drift import PDPDriftDetector
from torchstream.explain import _base as explain_base
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.viz.figures import plugin_figures

F64 = torch.float64
BETA = torch.tensor([1.0, -2.0, 0.5], dtype=F64)


def data(n: int = 60, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows ``X [n, 3]``, regression targets and binary labels (``x0 + x1 > 0``)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=F64)
    y = X @ BETA + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y, (X[:, 0] + X[:, 1] > 0).long()


def regressor(Z: torch.Tensor) -> torch.Tensor:
    return Z @ BETA.to(Z.dtype)


def classifier(Z: torch.Tensor) -> torch.Tensor:
    """Two class probabilities ``[n, 2]``."""
    p = torch.sigmoid(Z[:, 0] + Z[:, 1])
    return torch.stack([1 - p, p], 1)


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Deep equality of two states: same keys, same types, tensors equal in dtype, shape and
    every value (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device, where
        if a.is_floating_point():
            assert torch.allclose(a, b, rtol=0, atol=0, equal_nan=True), where
        else:
            assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{where}[{i}]")
    else:
        assert a == b, where


def two_good_batches(make: Callable[[], Any], X: torch.Tensor, y: torch.Tensor) -> Any:
    e = make()
    e.explain(X[:20], y[:20])
    e.explain(X[20:40], y[20:40])
    return e


LOSS_EXPLAINERS: dict[str, Callable[[Callable, str], Any]] = {
    "ipfi": lambda f, loss: IncrementalPFI(f, loss, 3, alpha=0.05, n_samples=2, seed=1),
    "isage": lambda f, loss: IncrementalSAGE(f, loss, 3, alpha=0.05, seed=1),
    "isage_product_imputed": lambda f, loss: IncrementalSAGE(
        f, loss, 3, alpha=0.05, imputer="product", empty_prediction="imputed", seed=1
    ),
    "isage_observational": lambda f, loss: IncrementalSAGE(
        f, loss, 3, alpha=0.05, removal="observational", seed=1
    ),
}


def bad_batches(X: torch.Tensor, y: torch.Tensor, labels: torch.Tensor):
    """``(name, model, loss, X, y, message pattern)`` of bad third batches (rows 40..59)."""
    Xb, yb, lb = X[40:].clone(), y[40:].clone(), labels[40:].clone()
    x_inf = Xb.clone()
    x_inf[7, 2] = math.inf
    x_nan = Xb.clone()
    x_nan[0, 1] = math.nan
    y_nan = yb.clone()
    y_nan[3] = math.nan
    out: list[tuple[str, Callable, str, torch.Tensor, torch.Tensor, str]] = [
        ("x_inf", regressor, "mse", x_inf, yb, r"batch row 7, column 2 \('x2'\) is inf"),
        ("x_nan", regressor, "mse", x_nan, yb, r"batch row 0, column 1 \('x1'\) is nan"),
        ("y_nan", regressor, "mse", Xb, y_nan, r"batch row 3 is nan; loss 'mse' needs finite"),
    ]
    for value, pattern in [
        (2, r"batch row 5 is 2; .*class labels in 0\.\.1"),  # checked against the output
        (-1, r"batch row 5 is -1; .*integer class labels >= 0"),
    ]:
        bad = lb.clone()
        bad[5] = value
        out.append((f"label_{value}", classifier, "cross_entropy", Xb, bad, pattern))
    half = lb.double()
    half[9] = 0.5
    out.append(("label_half", classifier, "cross_entropy", Xb, half, r"batch row 9 is 0\.5"))
    nan_label = lb.double()
    nan_label[4] = math.nan
    out.append(("label_nan", classifier, "cross_entropy", Xb, nan_label, r"batch row 4 is nan"))
    return out


X, Y, LABELS = data()


@pytest.fixture(params=["read at once", "read with the outputs"])
def read_mode(request, monkeypatch):
    """Both ways a batch's value check is read: at once (the CPU) and deferred to the model
    outputs' check (accelerators: one host read per batch), forced here on the CPU."""
    if request.param == "read with the outputs":
        monkeypatch.setattr(explain_base, "_deferred_read", lambda device: True)
    return request.param


@pytest.mark.parametrize("kind", list(LOSS_EXPLAINERS))
@pytest.mark.parametrize("case", bad_batches(X, Y, LABELS), ids=lambda c: c[0])
def test_bad_batch_raises_and_leaves_the_state_untouched(kind, case, read_mode):
    """After two good batches (the per-shape validation of old would be cached), a bad third
    batch raises naming its row (and column); the state_dict is unchanged in every tensor
    (smoother, storage rows, generators) and the next good batch gives bit for bit what an
    explainer that never saw the bad batch gives."""
    _, model, loss, Xb, yb, pattern = case
    target = Y if loss == "mse" else LABELS
    make = lambda: LOSS_EXPLAINERS[kind](model, loss)
    e = two_good_batches(make, X, target)
    before = e.state_dict()
    with pytest.raises(ValueError, match=pattern):
        e.explain(Xb, yb)
    assert_same(before, e.state_dict())
    twin = two_good_batches(make, X, target)
    e.explain(X[40:], target[40:])
    twin.explain(X[40:], target[40:])
    assert torch.equal(e.importance, twin.importance)
    assert torch.equal(e.half_width(), twin.half_width())


@pytest.mark.parametrize("kind", ["ipfi", "isage"])
def test_label_out_of_range_at_the_first_explained_batch(kind, read_mode):
    """The first model call is where the output width becomes known: a label outside it is
    reported there too, and the random draws made before the call are undone."""
    e = LOSS_EXPLAINERS[kind](classifier, "cross_entropy")
    e.explain(X[:20], LABELS[:20])  # only stored: no model call yet
    bad = LABELS[20:40].clone()
    bad[11] = 3
    before = e.state_dict()
    with pytest.raises(ValueError, match=r"batch row 11 is 3; .*class labels in 0\.\.1"):
        e.explain(X[20:40], bad)
    assert_same(before, e.state_dict())


@pytest.mark.parametrize("kind", list(LOSS_EXPLAINERS))
def test_label_out_of_range_in_the_first_batch_is_an_error(kind, read_mode):
    """The first batch only fills the storage, but its labels are checked against the model's
    outputs all the same (one row's output gives k = 2): a label 2 is an error naming its row,
    and the explainer is as new (nothing stored, no batch counted)."""
    e = LOSS_EXPLAINERS[kind](classifier, "cross_entropy")
    fresh = e.state_dict()
    bad = LABELS[:20].clone()
    bad[13] = 2
    with pytest.raises(ValueError, match=r"batch row 13 is 2; .*class labels in 0\.\.1 for a "
                                         r"model output of shape \[n, 2\]"):
        e.explain(X[:20], bad)
    assert_same(fresh, e.state_dict())
    e.explain(X[:20], LABELS[:20])  # the good batch is stored, as on a fresh explainer
    assert e.n_batches == 1 and e.n_explained == 0


def test_labels_of_a_one_column_probability_output_are_0_or_1(read_mode):
    e = IncrementalPFI(lambda Z: torch.sigmoid(Z[:, 0]), "log_loss", 3, seed=0)
    e.explain(X[:20], LABELS[:20])
    e.explain(X[20:40], LABELS[20:40])
    bad = LABELS[40:].clone()
    bad[2] = 2
    with pytest.raises(ValueError, match=r"batch row 2 is 2; .*labels 0 or 1"):
        e.explain(X[40:], bad)


@pytest.mark.parametrize("kind", ["ipfi", "isage", "isage_observational"])
def test_model_nan_on_valid_input_is_reported_and_undone(kind, read_mode):
    """A model that returns NaN for a finite batch is named as the cause; the state (random
    generators included) is as before the call."""
    calls = [0]

    def breaks_on_third_call(Z: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        out = regressor(Z)
        if calls[0] == 3:
            out = out.clone()
            out[-1] = math.nan
        return out

    e = LOSS_EXPLAINERS[kind](breaks_on_third_call, "mse")
    for start in (0, 20, 40):
        e.explain(X[start:start + 20], Y[start:start + 20])  # storage, call 1, call 2
    before = e.state_dict()
    with pytest.raises(ValueError, match=r"model_fn returned NaN at step 3 .*batch row 19\), "
                                         r"although the batch is finite"):
        e.explain(X[:20], Y[:20])
    assert_same(before, e.state_dict())


def test_finite_values_whose_sum_overflows_are_accepted(read_mode):
    """The fused check sums the batch; an overflow of finite values is a false alarm that the
    exact check on the failure path clears."""
    X32 = torch.full((8, 3), 3.0e38, dtype=torch.float32)
    y32 = torch.zeros(8, dtype=torch.float32)
    e = IncrementalPFI(lambda Z: Z[:, 0] * 0, "mse", 3, seed=0)
    e.explain(X32, y32)
    e.explain(X32, y32)
    assert e.n_explained == 8 and torch.equal(e.importance, torch.zeros(3, dtype=F64))


def test_constant_feature_has_exactly_zero_ipfi_importance():
    """Replacing a constant feature by a stored value of it changes nothing: every per-row
    contribution is exactly 0, so the importance is exactly 0."""
    Xc = X.clone()
    Xc[:, 1] = 4.25
    e = IncrementalPFI(regressor, "mse", 3, alpha=0.05, n_samples=3, seed=0)
    for start in range(0, 60, 10):
        e.explain(Xc[start:start + 10], Y[start:start + 10])
    assert e.importance[1].item() == 0.0 and e.half_width()[1].item() == 0.0
    assert e.importance[0].item() > 0.5  # the other features are explained as usual


def test_constant_feature_isage_importance_is_zero_within_its_noise():
    """iSAGE imputes every coalition with fresh draws, so a constant feature's contribution is
    the loss difference of two independent imputations: 0 in expectation, not row by row. Seeded
    run, 3000 rows: the estimate lies within the Chebyshev half-width at delta = 0.01 (the
    estimator's own variance bound), and far below the informative features."""
    g = torch.Generator().manual_seed(3)
    Xc = torch.randn(3000, 3, generator=g, dtype=F64)
    Xc[:, 2] = -1.5
    y = Xc @ BETA + 0.1 * torch.randn(3000, generator=g, dtype=F64)
    e = IncrementalSAGE(regressor, "mse", 3, alpha=0.01, empty_prediction="imputed", seed=0)
    for start in range(0, 3000, 50):
        e.explain(Xc[start:start + 50], y[start:start + 50])
    imp, hw = e.importance, e.half_width(0.01)
    assert abs(imp[2].item()) <= hw[2].item()
    assert abs(imp[2].item()) < 0.1 * imp[1].item()


# ---------------------------------------------------------------------------------- iPDP
def square_plus(Z: torch.Tensor) -> torch.Tensor:
    return Z[:, 0] ** 2 + Z[:, 1]


def test_ipdp_bad_batch_names_row_and_column_and_leaves_the_state():
    ipdp = IncrementalPDP(square_plus, 0, grid_size=5, alpha=0.1, grid="quantile",
                          storage_size=20, entrance_prob=0.5, seed=0)
    ipdp.explain(X[:20])
    ipdp.explain(X[20:40])
    before = ipdp.state_dict()
    bad = X[40:].clone()
    bad[6, 2] = math.nan  # not the explained column: the model reads it all the same
    with pytest.raises(ValueError, match=r"NaN or inf values at step 2: batch row 6, column 2 "):
        ipdp.explain(bad)
    bad = X[40:].clone()
    bad[1, 0] = -math.inf
    with pytest.raises(ValueError, match=r"batch row 1, column 0 \('x0', the explained"):
        ipdp.explain(bad)
    assert_same(before, ipdp.state_dict())
    fresh = IncrementalPDP(square_plus, 0)
    with pytest.raises(ValueError, match="batch row 0, column 1"):
        fresh.explain(torch.tensor([[0.0, math.nan, 1.0]], dtype=F64))
    assert fresh.n_features is None and fresh.n_seen == 0  # the first batch set nothing


def test_ipdp_model_nan_is_reported_with_its_row():
    calls = [0]

    def nan_on_second(Z: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        out = square_plus(Z)
        return out * math.nan if calls[0] == 2 else out

    ipdp = IncrementalPDP(nan_on_second, 0, grid="fixed", fixed_range=(0, 1), grid_size=4)
    ipdp.explain(X[:5])
    before = ipdp.state_dict()
    with pytest.raises(ValueError, match=r"returned NaN at step 1 for 20 of 20 evaluations "
                                         r"\(first: batch row 0, row 5 of the stream\)"):
        ipdp.explain(X[5:10])
    assert_same(before, ipdp.state_dict())
    infinite = lambda Z: torch.full((Z.shape[0],), math.inf, dtype=Z.dtype)
    first = IncrementalPDP(infinite, 0, grid="fixed", fixed_range=(0, 1))
    with pytest.raises(ValueError, match="returned inf at step 0"):
        first.explain(X[1:3])
    assert first.n_features is None and first.n_explained == 0


@pytest.mark.parametrize("rule", ["rolling", "quantile"])
def test_ipdp_constant_feature_one_point_grid_and_zero_importance(rule, tmp_path):
    """x0 = 3 on every row, f = x0^2 + x1: the grid is the one point 3, every ICE value is
    9 + x1, the PD the debiased EMA of those (hand-computed below), importance exactly 0, and
    nothing anywhere is NaN; as_dict, the figure, the drift detector and a checkpoint work."""
    alpha, m = 0.1, 6
    Xc = X.clone()
    Xc[:, 0] = 3.0
    ipdp = IncrementalPDP(square_plus, 0, grid_size=m, alpha=alpha, grid=rule, n_ice=4,
                          history_every=10, seed=0)
    detector = PDPDriftDetector(ipdp)
    detector.explain(Xc[:10])  # fills the range storage: warm-up
    assert ipdp.n_explained == 0 and math.isnan(ipdp.score)
    for start in range(10, 60, 10):
        detector.explain(Xc[start:start + 10])
    assert ipdp.n_explained == 50
    assert ipdp.grid.tolist() == [3.0]
    ice_values = 9.0 + Xc[10:, 1]
    weights = alpha * (1 - alpha) ** torch.arange(49, -1, -1, dtype=F64)
    expected = (weights * ice_values).sum() / (1 - (1 - alpha) ** 50)
    assert ipdp.pd.shape == (1,)
    assert abs(ipdp.pd.item() - expected.item()) < 1e-12
    assert ipdp.score == 0.0
    assert torch.equal(ipdp.ice, ice_values[-4:].view(4, 1).expand(4, m))
    assert torch.equal(ipdp.ice_grid, torch.full((4, m), 3.0, dtype=F64))
    summary = ipdp.as_dict()
    assert summary["grid"] == [3.0] and summary["importance"] == 0.0
    assert not any(math.isnan(v) for v in summary["pd"])
    assert all(g.tolist() == [3.0] for _, g, _ in ipdp.history) and len(ipdp.history) == 5
    assert detector.n_updates == 5 and not detector.drift_positions
    fig = plugin_figures(ipdp)[ipdp.name]
    fig.savefig(tmp_path / "constant.png")
    # a checkpoint keeps the exact point; then the range opens and the grid spreads out
    resumed = IncrementalPDP(square_plus, 0, grid_size=m, alpha=alpha, grid=rule, n_ice=4,
                             history_every=10, seed=0)
    resumed.load_state_dict(ipdp.state_dict())
    assert resumed.grid.tolist() == [3.0] and torch.equal(resumed.pd, ipdp.pd)
    for e in (ipdp, resumed):
        for start in range(0, 60, 10):
            e.explain(X[start:start + 10])
    assert torch.equal(resumed.grid, ipdp.grid) and torch.equal(resumed.pd, ipdp.pd)
    assert ipdp.grid.shape == (m,) and ipdp.score > 0
    assert bool(torch.isfinite(ipdp.grid).all()) and bool(torch.isfinite(ipdp.pd).all())


def test_ipdp_one_point_grid_costs_one_evaluation_per_row():
    sizes: list[int] = []

    def counted(Z: torch.Tensor) -> torch.Tensor:
        sizes.append(Z.shape[0])
        return square_plus(Z)

    Xc = X[:30].clone()
    Xc[:, 0] = -1.0
    ipdp = IncrementalPDP(counted, 0, grid_size=8)
    ipdp.explain(Xc[:10])
    ipdp.explain(Xc[10:30])
    assert sizes == [20]
