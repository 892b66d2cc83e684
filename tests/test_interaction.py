"""IncrementalInteraction: the closed forms of pairwise SAGE interactions (SII) with independent
standard normal features and squared loss, in SAGE's game (variance correction) and in the
single-draw game (every value doubled); feature groups as one player; an exact per-row check
against an independent computation; the ``top_k`` pairs following the SAGE ranking; batches
versus single rows; checkpoints; bad input; the plug-in; and shapiq's exact SII of the same
game on a static model of the shared California housing data as a batch reference.

Closed forms (``y = f(x)``, ``x ~ N(0, I)``, ``nu(S) = Var E[f | x_S]``): ``f = x0 x1 + x2``
has ``nu`` = 1 on every coalition holding ``{x0, x1}`` or ``x2`` (2 with both), so SII(x0, x1)
= 1, the other pairs 0, SAGE (0.5, 0.5, 1); ``f = x0 x1 x2`` has ``nu`` = 1 on the full set
only: every pair 1/2, SAGE 1/3 each. With one imputation per coalition the estimated game is
``2 nu`` (the class docstring). Tolerances are the explainer's own Chebyshev half-widths at
``delta = 0.04`` (five standard deviations), which the tests also require to be small enough
to tell the two games apart.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from torchstream.cli import main
from torchstream.step import Batch
from torchstream.explain import IncrementalInteraction
from torchstream.explain.storage import FreshSampler

F64 = torch.float64
PAIRS3 = ((0, 1), (0, 2), (1, 2))


def normal_draw(d):
    return lambda n, g: torch.randn(n, d, generator=g, dtype=F64)


def run_stream(inter, f, d, n_rows, batch, seed=1):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_rows, d, generator=g, dtype=F64)
    y = f(X)
    for start in range(0, n_rows, batch):
        inter.explain(X[start:start + batch], y[start:start + batch])
    return inter


def product_sum(Z):
    return Z[:, 0] * Z[:, 1] + Z[:, 2]


def triple(Z):
    return Z[:, 0] * Z[:, 1] * Z[:, 2]


CLOSED_FORMS = {  # SAGE's game: SII of (0,1), (0,2), (1,2); SAGE values; widest bound (m=2)
    "x0*x1+x2": (product_sum, (1.0, 0.0, 0.0), (0.5, 0.5, 1.0), 0.25),
    "x0*x1*x2": (triple, (0.5, 0.5, 0.5), (1 / 3, 1 / 3, 1 / 3), 0.3),
}


@pytest.mark.parametrize("model", sorted(CLOSED_FORMS))
@pytest.mark.parametrize("game", ["sage", "single_draw"])
def test_closed_forms(model, game):
    f, sii, sage, widest = CLOSED_FORMS[model]
    scale = 1.0 if game == "sage" else 2.0  # one imputation per coalition: every value doubles
    kwargs = {"n_samples": 2, "variance_correction": True} if game == "sage" else {}
    inter = IncrementalInteraction(f, "mse", 3, alpha=5e-5, seed=3,
                                   storage=FreshSampler(normal_draw(3), 3, seed=5), **kwargs)
    run_stream(inter, f, 3, 200_000, 4000)
    est, bound = inter.interaction, inter.interaction_half_width(0.04)
    for (a, c), truth in zip(PAIRS3, sii):
        assert bound[a, c] < widest * scale
        assert abs(est[a, c] - scale * truth) <= bound[a, c], (a, c, float(est[a, c]))
        assert est[a, c] == est[c, a]
    phi, phi_bound = inter.importance, inter.half_width(0.04)
    for j, truth in enumerate(sage):
        assert phi_bound[j] < widest * scale
        assert abs(phi[j] - scale * truth) <= phi_bound[j], (j, float(phi[j]))
    assert torch.isnan(torch.diagonal(est)).all()
    if model == "x0*x1+x2":  # the other game's SII(x0, x1) lies outside the bound
        other = 2.0 if game == "sage" else 1.0
        assert abs(est[0, 1] - other) > bound[0, 1]


def test_a_feature_group_is_one_player():
    """``f = x0 (x1 + x2) / sqrt(2) + x3`` with the group g = {x1, x2}: ``(x1 + x2) / sqrt(2)``
    is standard normal and independent of x0 and x3, so the players (x0, g, x3) are those of
    ``x0 x1 + x2``: SII(x0, g) = 2 in the single-draw game, SAGE (1, 1, 2)."""
    def f(Z):
        return Z[:, 0] * (Z[:, 1] + Z[:, 2]) / math.sqrt(2.0) + Z[:, 3]

    groups = {"a": [0], "g": [1, 2], "c": [3]}
    inter = IncrementalInteraction(f, "mse", 4, alpha=1e-4, feature_groups=groups,
                                   storage=FreshSampler(normal_draw(4), 4, seed=5), seed=3)
    run_stream(inter, f, 4, 100_000, 4000)
    assert inter.feature_names == ["a", "g", "c"] and inter.interaction.shape == (3, 3)
    est, bound = inter.interaction, inter.interaction_half_width(0.04)
    for (a, c), truth in zip(PAIRS3, (2.0, 0.0, 0.0)):
        assert bound[a, c] < 0.5
        assert abs(est[a, c] - truth) <= bound[a, c], (a, c, float(est[a, c]))
    assert list(inter.interaction_dict()) == [("a", "g"), ("a", "c"), ("g", "c")]


def ema_debiased(values, alpha):
    raw = 0.0
    for v in values:
        raw = (1 - alpha) * raw + alpha * v
    return raw / (1 - (1 - alpha) ** len(values))


def test_per_row_values_equal_an_independent_computation():
    """Two players and removal to 0 (a storage of zeros): every row has T = {} and the second
    derivative ``l(x0) + l(x1) - l({}) - l(x0, x1)`` of its own losses, so the estimate is the
    debiased EMA of those; the bound is that of the weighted mean of iid values. Batches of
    different sizes give the same values (the closed-form fold of the EMA)."""
    def f(Z):
        return Z[:, 0] * Z[:, 1] + 0.3 * Z[:, 0]

    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 2, generator=g, dtype=F64)
    y = f(X) + 0.5 * torch.randn(300, generator=g, dtype=F64)
    zero = FreshSampler(lambda n, gen: torch.zeros(n, 2, dtype=F64), 2)
    x0, x1 = X[:, 0], X[:, 1]
    per_row = (0.3 * x0 - y) ** 2 + y**2 - y**2 - (f(X) - y) ** 2
    alpha = 0.05
    expected = ema_debiased(per_row.tolist(), alpha)
    w = alpha * (1 - alpha) ** torch.arange(299, -1, -1, dtype=F64)
    mean = (w * per_row).sum() / w.sum()
    var = (w * (per_row - mean) ** 2).sum() / w.sum()
    bound = math.sqrt(var * (w**2).sum() / w.sum() ** 2 / 0.05)
    for sizes in ((300,), (1,) * 300, (7, 100, 193)):
        inter = IncrementalInteraction(f, "mse", 2, alpha=alpha, storage=zero, n_samples=2,
                                       variance_correction=True)
        start = 0
        for size in sizes:
            inter.explain(X[start:start + size], y[start:start + size])
            start += size
        assert inter.interaction[0, 1].item() == pytest.approx(expected, rel=1e-12)
        assert inter.interaction_half_width()[0, 1].item() == pytest.approx(bound, rel=1e-9)
        assert inter.pair_rows()[0, 1] == 300


def test_batches_equal_single_rows_with_all_pairs():
    """With every pair explained and a storage that does not change, a batch of B rows equals
    B calls of one row: the same permutations, draws and EMA (up to float rounding)."""
    draw = normal_draw(4)

    def make():
        return IncrementalInteraction(product_sum, "mse", 4, top_k=None, alpha=0.01,
                                      storage=FreshSampler(draw, 4, seed=2), seed=7)

    g = torch.Generator().manual_seed(4)
    X = torch.randn(32, 4, generator=g, dtype=F64)
    y = product_sum(X)
    batched, single = make(), make()
    batched.explain(X, y)
    for i in range(32):
        single.explain(X[i:i + 1], y[i:i + 1])
    torch.testing.assert_close(batched.interaction, single.interaction, rtol=1e-12, atol=1e-12,
                               equal_nan=True)
    torch.testing.assert_close(batched.importance, single.importance, rtol=1e-12, atol=1e-12)
    assert not torch.isnan(batched.interaction[0, 1])


def switching_model():
    state = {"after": False}

    def f(Z):
        if state["after"]:
            return Z[:, 3] * Z[:, 4] + Z[:, 5]
        return Z[:, 0] * Z[:, 1] + Z[:, 2]

    return f, state


def test_top_k_pairs_follow_the_sage_ranking():
    """Six features, ``top_k=3``: the pairs among the three features with the largest running
    SAGE values are explained (the others are NaN), and after the model changes from
    ``x0 x1 + x2`` to ``x3 x4 + x5`` the pairs move with the ranking; a pair that left keeps its
    row count."""
    f, state = switching_model()
    inter = IncrementalInteraction(f, "mse", 6, top_k=3, alpha=0.002, storage_size=200, seed=1)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(14000, 6, generator=g, dtype=F64)
    left_at = None  # rows of (x0, x1) when it left the explained pairs
    for start in range(0, 14000, 100):
        if start == 4000:
            first = inter.interaction_dict()
            state["after"] = True
        inter.explain(X[start:start + 100], f(X[start:start + 100]))
        if state["after"] and left_at is None and ("x0", "x1") not in inter.interaction_dict():
            left_at = inter.pair_rows()[0, 1].item()
    assert list(first) == [("x0", "x1"), ("x0", "x2"), ("x1", "x2")]
    assert list(inter.interaction_dict()) == [("x3", "x4"), ("x3", "x5"), ("x4", "x5")]
    est, bound = inter.interaction, inter.interaction_half_width(0.04)
    assert abs(est[3, 4] - 2.0) <= bound[3, 4] and bound[3, 4] < 2.0
    assert torch.isnan(est[0, 1]) and torch.isnan(est[0, 3])
    assert left_at is not None and inter.pair_rows()[0, 1].item() == left_at  # kept
    assert inter.pair_rows()[3, 4].item() > 9000


def test_first_batches_store_then_start_the_ranking():
    """Batch 1 meets an empty reservoir (only stored); with ``top_k < p`` batch 2 only starts
    the SAGE values that choose the pairs; pairs from batch 3. With all pairs: from batch 2."""
    X = torch.randn(30, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    y = product_sum(X)
    ranked = IncrementalInteraction(product_sum, "mse", 4, top_k=2)
    every = IncrementalInteraction(product_sum, "mse", 4, top_k=None)
    seen = []
    for start in (0, 10, 20):
        for inter in (ranked, every):
            inter.explain(X[start:start + 10], y[start:start + 10])
        seen.append((ranked.n_explained, len(ranked.interaction_dict()),
                     len(every.interaction_dict())))
    assert seen == [(0, 0, 0), (10, 0, 6), (20, 1, 6)]
    assert torch.isnan(ranked.interaction).sum() == 16 - 2


def test_one_model_call_per_batch_with_the_stated_rows():
    calls = []

    def f(Z):
        calls.append(Z.shape[0])
        return product_sum(Z)

    inter = IncrementalInteraction(f, "mse", 5, top_k=3, n_samples=2, seed=0)
    X = torch.randn(24, 5, generator=torch.Generator().manual_seed(0))
    for start in range(0, 24, 8):
        inter.explain(X[start:start + 8], product_sum(X[start:start + 8]))
    p, m, pairs = 5, 2, 3
    assert calls == [8 * (1 + p * m), 8 * (1 + p * m + 2 * pairs * m)]  # batch 1 only stored


def test_chunked_model_calls_give_the_same_estimates():
    """``chunk_size`` splits the model call, not the draws: the same estimates, bit for bit,
    for a model whose rows are computed independently."""
    calls = []

    def f(Z):
        calls.append(Z.shape[0])
        return product_sum(Z)

    X = torch.randn(120, 4, generator=torch.Generator().manual_seed(0), dtype=F64)
    whole = IncrementalInteraction(product_sum, "mse", 4, top_k=None, seed=1)
    chunked = IncrementalInteraction(f, "mse", 4, top_k=None, seed=1, chunk_size=37)
    for start in range(0, 120, 40):
        for inter in (whole, chunked):
            inter.explain(X[start:start + 40], product_sum(X[start:start + 40]))
    assert torch.equal(whole.interaction.nan_to_num(), chunked.interaction.nan_to_num())
    assert torch.equal(whole.importance, chunked.importance)
    assert max(calls) == 37 and not torch.isnan(whole.interaction[0, 1])


def test_checkpoint_resume_is_bit_exact():
    f, state = switching_model()
    g = torch.Generator().manual_seed(5)
    X = torch.randn(3000, 6, dtype=F64, generator=g)
    batches = [(X[s:s + 50], None) for s in range(0, 3000, 50)]

    def make(seed):
        return IncrementalInteraction(f, "mse", 6, top_k=3, alpha=0.02, seed=seed)

    def feed(inter, part):
        for i, (xb, _) in part:
            state["after"] = i >= 30
            inter.explain(xb, f(xb))

    whole, first = make(0), make(0)
    feed(whole, enumerate(batches))
    feed(first, list(enumerate(batches))[:20])
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make(99)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    feed(resumed, list(enumerate(batches))[20:])
    torch.testing.assert_close(resumed.interaction, whole.interaction, rtol=0, atol=0,
                               equal_nan=True)
    torch.testing.assert_close(resumed.interaction_half_width(), whole.interaction_half_width(),
                               rtol=0, atol=0, equal_nan=True)
    assert torch.equal(resumed.importance, whole.importance)
    assert torch.equal(resumed.pair_rows(), whole.pair_rows())
    other = IncrementalInteraction(f, "mse", 6, top_k=4)
    with pytest.raises(ValueError, match="top_k"):
        other.load_state_dict(first.state_dict())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"top_k": 1}, "top_k must be >= 2"),
        ({"variance_correction": True}, "n_samples >= 2"),
        ({"variance_correction": True, "n_samples": 2, "loss": "absolute"},
         "variance_correction needs the squared-error loss"),
        ({"alpha": 0.0}, "alpha must be in"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    loss = kwargs.pop("loss", "mse")
    with pytest.raises(ValueError, match=message):
        IncrementalInteraction(product_sum, loss, 3, **kwargs)


def test_a_bad_batch_names_the_cell_and_leaves_no_trace():
    inter = IncrementalInteraction(product_sum, "mse", 3, top_k=None, seed=0)
    X = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    for start in (0, 10, 20):
        inter.explain(X[start:start + 10], product_sum(X[start:start + 10]))
    before = inter.state_dict()
    bad = X[30:].clone()
    bad[4, 2] = math.nan
    with pytest.raises(ValueError, match=r"batch row 4, column 2 \('x2'\)"):
        inter.explain(bad, product_sum(X[30:]))
    after = inter.state_dict()
    for key in ("sum_d", "sum_w", "rows", "explained"):
        assert torch.equal(before["pairs"][key], after["pairs"][key])
    assert torch.equal(before["sage"]["generator"], after["sage"]["generator"])


def test_plug_in_logs_the_explained_pairs():
    inter = IncrementalInteraction(None, "mse", 3, top_k=None)
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(0))
    for i, start in enumerate((0, 10)):
        xb = X[start:start + 10]
        assert inter.on_batch(Batch(i, start, xb, product_sum(xb), product_sum(xb),
                                    learner=product_sum)) is None
    out = inter.step_importance()  # what the runner records of it
    assert set(out) == {"(x0, x1)", "(x0, x2)", "(x1, x2)"}
    assert out["(x0, x1)"] == inter.interaction[0, 1].item()
    with pytest.raises(ValueError, match="model_fn=None"):
        inter.explain(X, product_sum(X))


# ---------------------------------------------------------------- batch reference (shapiq)
def california(data_dir: Path, n: int = 2000) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``n`` random complete rows of the 8 numeric California housing features (the counts
    logged), standardised, and the standardised log house value."""
    path = data_dir / "california_housing.csv"
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    with path.open() as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [[float(v) for v in line[:9]] for line in reader if line[4] != ""]
    data = np.array(rows)[np.random.default_rng(0).choice(len(rows), n, replace=False)]
    X, y = data[:, :8].copy(), np.log(data[:, 8])
    X[:, 3:7] = np.log(X[:, 3:7])
    return header[:8], (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def test_agrees_with_shapiq_exact_sii_on_a_static_model(data_dir):
    """A least-squares model on California housing, linear with the products
    longitude x latitude, income x age and rooms x households. Reference: shapiq's exact SII
    (and SAGE values, its SV) of SAGE's game, the value function computed on 2,000 rows, the
    removed features' expectation over the same rows in closed form (the model is quadratic).
    The explainer streams those rows, imputes from them and corrects the variance (SAGE's game
    exactly): every pair within its bound, the bounds narrow."""
    shapiq = pytest.importorskip("shapiq", reason="shapiq is the batch reference (test extra)")
    names, X, y = california(data_dir)
    d = 8
    pi, pj = np.array([0, 7, 3]), np.array([1, 2, 6])
    F = np.hstack([np.ones((len(X), 1)), X, X[:, pi] * X[:, pj]])
    coef = np.linalg.lstsq(F, y, rcond=None)[0]
    c0, b = coef[0], coef[1:9]
    A = np.zeros((d, d))
    A[pi, pj] = coef[9:]
    mean = X.mean(0)
    cov = X.T @ X / len(X) - np.outer(mean, mean)

    def loss_of(S):  # mean squared error of E[f(x_S, X~_notS)] over the rows
        U = np.where(S, X, mean)
        pred = c0 + U @ b + np.einsum("ni,ij,nj->n", U, A, U) + (A * cov)[np.ix_(~S, ~S)].sum()
        return ((y - pred) ** 2).mean()

    losses = {bits: loss_of(np.array(bits)) for bits in itertools.product([False, True], repeat=d)}
    empty = losses[(False,) * d]

    def game(coalitions):
        return np.array([empty - losses[tuple(bool(v) for v in row)] for row in coalitions])

    exact = shapiq.ExactComputer(n_players=d, game=game)
    sii = exact("SII", 2).dict_values
    sv = exact("SV", 1).dict_values

    Xt, yt = torch.tensor(X), torch.tensor(y)
    bt, At = torch.tensor(b), torch.tensor(A)

    def model(Z):
        return c0 + Z @ bt + ((Z @ At) * Z).sum(1)

    def draw(n, g):
        return Xt[torch.randint(0, len(Xt), (n,), generator=g)]

    inter = IncrementalInteraction(model, "mse", d, top_k=None, alpha=5e-4, n_samples=2,
                                   variance_correction=True, storage=FreshSampler(draw, d, seed=1),
                                   feature_names=names, seed=2)
    g = torch.Generator().manual_seed(3)
    for _ in range(40):
        idx = torch.randint(0, len(Xt), (500,), generator=g)
        inter.explain(Xt[idx], yt[idx])
    est, bound = inter.interaction, inter.interaction_half_width(0.05)
    largest = max(abs(sii[(i, j)]) for i, j in itertools.combinations(range(d), 2))
    for i, j in itertools.combinations(range(d), 2):
        assert abs(est[i, j].item() - sii[(i, j)]) <= bound[i, j].item(), (names[i], names[j])
        assert bound[i, j] < 0.2 * largest
    top = max(inter.interaction_dict().items(), key=lambda kv: abs(kv[1]))[0]
    assert top == ("longitude", "latitude") and abs(sii[(0, 1)]) == largest
    phi, phi_bound = inter.importance, inter.half_width(0.05)
    for j in range(d):
        assert abs(phi[j].item() - sv[(j,)]) <= phi_bound[j].item(), names[j]


# ---------------------------------------------------------------- torchstream run
def test_run_prints_logs_and_writes_the_interactions(tmp_path, capsys):
    """``--explain interactions``: the top pairs printed with their bounds, the result JSON's
    ``interactions`` list largest first (the explainer's own values), one TensorBoard run per
    explained pair (tag ``importance/interactions``) whose last point is the final value."""
    logdir, result = tmp_path / "run", tmp_path / "result.json"
    assert main(["run", "--n-samples", "600", "--explain", "interactions", "--logdir",
                 str(logdir), "--no-progress", "--log-every", "5", "--result-json",
                 str(result)]) == 0
    out = capsys.readouterr().out
    payload = json.loads(result.read_text())
    pairs = payload["interactions"]
    assert len(pairs) == 10  # the pairs among the top 5 of 9 features
    assert [abs(p["value"]) for p in pairs] == sorted((abs(p["value"]) for p in pairs),
                                                      reverse=True)
    assert all(p["bound"] > 0 for p in pairs)
    first = pairs[0]
    line = next(ln for ln in out.splitlines() if ln.startswith("interactions: "))
    a, b = first["features"]
    assert line.startswith(f"interactions: ({a}, {b})={first['value']:.4f} ±{first['bound']:.4f}")
    assert payload["explanations"]["interactions"] == {
        f"({p['features'][0]}, {p['features'][1]})": p["value"] for p in pairs}
    mux = EventMultiplexer(size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    for p in pairs:
        points = mux.Scalars(f"feature/({p['features'][0]}, {p['features'][1]})",
                             "importance/interactions")
        assert points[-1].step == 600
        assert points[-1].value == pytest.approx(p["value"], rel=1e-6, abs=1e-7)
