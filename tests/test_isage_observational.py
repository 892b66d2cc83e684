"""Observational iSAGE and its conditional sampler (spec §1.7, §3.4, §4.3 of [SAGE], check 13).

The sampler keeps one incremental regression tree per feature. Tests: the tree learns a clear
dependence and its draws follow it; with independent features the draws are marginal; with the
split feature absent a child is chosen in proportion to its visits; on a stream where ``x1`` is a
coarsened copy of ``x0`` and the model reads ``x1`` only, observational iSAGE splits the
importance between ``x0`` and ``x1`` while interventional iSAGE gives it all to ``x1`` (the
paper's §4.3 claim, with the exact finite-``m`` expectations); efficiency; batches versus single
rows; checkpoints; bad input.
"""

from __future__ import annotations

import io
import math

import pytest
import torch
from _explain_checks import resumed_and_whole
from scipy import stats

from torchstream.explain import ConditionalTreeSampler, IncrementalSAGE
from torchstream.losses import get_loss

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small tensors: one thread avoids waiting on busy cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def step_rows(n: int, seed: int, edge: float = 0.3) -> torch.Tensor:
    """``x0 ~ U(0, 1)``, ``x1 = 1(x0 > edge) + 0.05 noise``, ``x2 ~ N(0, 1)`` independent."""
    g = torch.Generator().manual_seed(seed)
    x0 = torch.rand(n, generator=g, dtype=F64)
    x1 = (x0 > edge).to(F64) + 0.05 * torch.randn(n, generator=g, dtype=F64)
    return torch.stack([x0, x1, torch.randn(n, generator=g, dtype=F64)], 1)


def feed(sampler: ConditionalTreeSampler, X: torch.Tensor, batch: int) -> None:
    for start in range(0, X.shape[0], batch):
        sampler.update(X[start : start + batch])


@pytest.fixture(scope="module")
def step_sampler() -> ConditionalTreeSampler:
    sampler = ConditionalTreeSampler(3, seed=0)
    feed(sampler, step_rows(4000, seed=1), batch=100)
    return sampler


# ---------------------------------------------------------------------------------- (a)
def test_tree_learns_a_step_dependence(step_sampler):
    """The tree for x1 splits on x0 near the step at 0.3 (candidates are the q/17 quantiles of
    about 500 recent rows: spacing ~0.06 in x0, quantile sd ~0.02, so the best candidate lies
    within 0.1 of the edge); draws of x1 given x0 come from the right regime."""
    tree = step_sampler.tree(1)
    assert tree["feature"][0] == 0
    assert abs(tree["threshold"][0] - 0.3) < 0.1
    assert set(tree["feature"]) <= {-1, 0}  # x2 is independent of x1: never a split of h_1
    X = torch.tensor(
        [[0.05, 7.0, 0.0], [0.2, 7.0, 0.0], [0.45, 7.0, 0.0], [0.9, 7.0, 0.0]], dtype=F64
    )
    for present in ([True, False, False], [True, False, True]):
        draws = step_sampler.sample(X, torch.tensor(present), n=400)  # [4, 400, 3]
        assert torch.equal(draws[..., 0], X[:, :1].expand(4, 400))  # present values kept
        high = draws[..., 1] > 0.5
        # leaves away from the edge are pure: every value comes from the right regime
        assert not bool(high[:2].any()) and bool(high[2:].all())
    # the tree for x0 splits on x1: x0 given x1 = 1 lies above the edge, given x1 = 0 below
    assert step_sampler.tree(0)["feature"][0] == 1
    given = step_sampler.sample(
        torch.tensor([[9.0, 0.0, 0.0], [9.0, 1.0, 0.0]], dtype=F64),
        torch.tensor([False, True, True]),
        n=400,
    )
    assert float(given[0, :, 0].max()) <= 0.3 + 0.1 and float(given[1, :, 0].min()) >= 0.3 - 0.1


def test_leaf_reservoirs_follow_a_drift(step_sampler):
    """After the relation flips (x1 = 1(x0 <= 0.3)), the tree keeps its splits but the leaf
    reservoirs are geometric: a leaf that receives k new rows keeps an old value in a given slot
    with probability (1 - 1/L)^k. The leaves holding x0 = 0.1 and 0.9 get at least 100 of the
    1000 new rows (checked), so all of their 10 slots are renewed except with probability
    10 * 0.9^100 < 3e-4, and every draw of x1 given x0 comes from the new regime."""
    sampler = ConditionalTreeSampler(3, seed=0)
    sampler.load_state_dict(step_sampler.state_dict())
    rows = torch.tensor([[0.1, 7.0, 0.0], [0.9, 7.0, 0.0]], dtype=F64)
    given_x0 = torch.tensor([True, False, False])
    leaves = sampler.traverse(rows, given_x0)[:, 1]
    before = sampler.trees.visits[1, leaves].clone()
    flipped = step_rows(1000, seed=2)
    flipped[:, 1] = 1.0 - flipped[:, 1]
    feed(sampler, flipped, batch=100)
    assert bool((sampler.traverse(rows, given_x0)[:, 1] == leaves).all())  # same leaves
    assert bool((sampler.trees.visits[1, leaves] - before >= 100).all())
    draws = sampler.sample(rows, given_x0, n=400)[..., 1]
    assert bool((draws[0] > 0.5).all()) and bool((draws[1] < 0.5).all())


# ---------------------------------------------------------------------------------- (b)
def test_independent_features_give_marginal_draws():
    """X ~ N(0, I): the trees do not split (a split needs a relative variance reduction above
    eps = sqrt(ln(1/delta) / (2n)) >= 0.037 for n <= 6000, noise reaches about 15 / n), so a
    draw of x0 given any x1, x2 is a uniform draw from the root's reservoir of the last 400
    values, iid N(0, 1). KS distance of 4000 draws to N(0, 1): at most 1.63/sqrt(400) (reservoir
    vs N(0, 1), 1% level) + 1.63/sqrt(4000) (draws vs reservoir) = 0.107."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(6000, 3, generator=g, dtype=F64)
    sampler = ConditionalTreeSampler(3, leaf_reservoir_length=400, seed=4)
    feed(sampler, X, batch=200)
    assert sampler.n_leaves.tolist() == [1, 1, 1]
    normal = stats.norm.cdf
    for given in (-1.5, 1.5):
        row = torch.tensor([[0.0, given, -given]], dtype=F64)
        draws = sampler.sample(row, torch.tensor([False, True, True]), n=4000)[0, :, 0]
        assert stats.kstest(draws.numpy(), normal).statistic < 0.107
        assert abs(float(draws.mean())) < 5 / math.sqrt(400)  # reservoir mean: sd 1/20


def test_dependent_gaussian_draws_shift_with_the_condition():
    """rho = 0.8: E[x0 | x1 = +-1.5] = +-1.2. A depth-5 tree approximates the conditional mean
    by the mean of the leaf's interval (its reservoir of 10 values: sd ~0.6/sqrt(10) = 0.2),
    so averaged over 2000 draws the conditional mean must lie within 0.5 of +-1.2 and the
    marginal (x1 absent too) near 0."""
    g = torch.Generator().manual_seed(5)
    z = torch.randn(8000, 2, generator=g, dtype=F64)
    X = torch.stack([0.8 * z[:, 0] + 0.6 * z[:, 1], z[:, 0]], 1)
    sampler = ConditionalTreeSampler(2, seed=6)
    feed(sampler, X, batch=200)
    rows = torch.tensor([[0.0, -1.5], [0.0, 1.5]], dtype=F64)
    cond = sampler.sample(rows, torch.tensor([False, True]), n=2000)[:, :, 0].mean(1)
    assert abs(float(cond[0]) + 1.2) < 0.5 and abs(float(cond[1]) - 1.2) < 0.5
    marg = sampler.sample(rows, torch.tensor([False, False]), n=2000)[:, :, 0].mean(1)
    assert float(marg.abs().max()) < 0.3  # mixture of leaf reservoirs, 2000 draws


# ---------------------------------------------------------------------------------- (c)
def leaf_probabilities(tree: dict) -> dict[int, float]:
    """P(leaf) when every split feature is absent: product of visits(child)/visits(children)."""
    visits = dict(zip(tree["node"], tree["visits"]))
    feature = dict(zip(tree["node"], tree["feature"]))
    probs, stack = {}, [(0, 1.0)]
    while stack:
        node, p = stack.pop()
        if feature[node] < 0:
            probs[node] = p
            continue
        left, right = 2 * node + 1, 2 * node + 2
        total = visits[left] + visits[right]
        stack += [(left, p * visits[left] / total), (right, p * visits[right] / total)]
    return probs


def test_absent_split_feature_picks_children_in_proportion_to_visits(step_sampler):
    tree = step_sampler.tree(1)
    leaves = [n for n, f in zip(tree["node"], tree["feature"]) if f < 0]
    assert len(leaves) >= 3
    assert all(dict(zip(tree["node"], tree["n_values"]))[n] > 0 for n in leaves)  # no fallback
    expected = leaf_probabilities(tree)
    n = 20000
    row = torch.tensor([[0.5, 0.0, 0.0]], dtype=F64)
    nodes = step_sampler.traverse(row.expand(n, 3), torch.tensor([False, False, True]))[:, 1]
    observed = torch.tensor([int((nodes == leaf).sum()) for leaf in expected], dtype=F64)
    probs = torch.tensor(list(expected.values()), dtype=F64)
    assert int(observed.sum()) == n  # every draw ends in a leaf
    # root: binomial, 5 sd
    visits = dict(zip(tree["node"], tree["visits"]))
    p_left = visits[1] / (visits[1] + visits[2])
    in_left = float(_under(nodes, 1).sum())
    assert abs(in_left / n - p_left) < 5 * math.sqrt(p_left * (1 - p_left) / n)
    # all leaves: chi-square test at the 1e-6 level
    chi2 = float(((observed - n * probs) ** 2 / (n * probs)).sum())
    assert chi2 < stats.chi2.ppf(1 - 1e-6, df=len(expected) - 1)
    # with x0 present every split of h_1 follows the row: one leaf for all draws
    present = step_sampler.traverse(row.expand(500, 3), torch.tensor([True, False, True]))[:, 1]
    assert present.unique().numel() == 1
    assert float(row[0, 0]) > 0.3 and _under(present[:1], 2).item()


def _under(nodes: torch.Tensor, ancestor: int) -> torch.Tensor:
    """Whether each heap index lies in the subtree of ``ancestor``."""
    node = nodes.clone()
    out = node == ancestor
    for _ in range(8):
        node = torch.where(node > 0, (node - 1) // 2, node)
        out |= node == ancestor
    return out


# ---------------------------------------------------------------------------------- (d)
def redundant_stream(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x0 ~ U(0, 1), x1 = floor(4 x0) (a coarsened copy of x0), x2 ~ N(0, 1); y = x1 + 0.5 eps."""
    g = torch.Generator().manual_seed(seed)
    x0 = torch.rand(n, generator=g, dtype=F64)
    x1 = torch.floor(4 * x0)
    X = torch.stack([x0, x1, torch.randn(n, generator=g, dtype=F64)], 1)
    return X, x1 + 0.5 * torch.randn(n, generator=g, dtype=F64)


def reads_x1(Z: torch.Tensor) -> torch.Tensor:
    return Z[:, 1]


V = 1.25  # Var(x1), x1 uniform on {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("empty", "observational", "interventional"),
    [
        # imputed empty prediction, m = 1: (1 + 1/m) phi with phi_obs = (V/2, V/2, 0),
        # phi_int = (0, V, 0) (W(S) = V - nu(S) under both removals here)
        ("imputed", (V, V, 0.0), (0.0, 2 * V, 0.0)),
        # paper's estimator, m = 1, Shapley values of nu_m(S) = nu(S) - W(S)/m:
        # observational nu_m = V for every S touching {x0, x1}, -V for {x2}
        #   -> (V/2 + V/6, V/2 + V/6, -V/3); interventional (2 phi - V/3) = (-V/3, 5V/3, -V/3)
        ("ema", (2 * V / 3, 2 * V / 3, -V / 3), (-V / 3, 5 * V / 3, -V / 3)),
    ],
)
def test_redundant_feature_shares_importance_only_observationally(
    empty, observational, interventional
):
    """[SAGE] §4.3 in small: the model reads x1, x0 carries the same information. Observational
    iSAGE gives x0 the same share as x1; interventional iSAGE gives x0 nothing (the model does
    not read it). Tolerance: the Chebyshev half-width at delta = 1/25 (5 sd of the EMA), plus
    2 alpha V / d for the mean-prediction EMA, plus 0.05 for the tree sampler (leaves that
    straddle a bucket edge: under 10% of rows, conditional variance at most 1/4)."""
    alpha, batch, n = 2e-4, 250, 20000
    sampler = ConditionalTreeSampler(3, seed=1)
    feed(sampler, redundant_stream(4000, seed=0)[0], batch=250)  # warm-up before explaining
    obs = IncrementalSAGE(
        reads_x1, "mse", 3, alpha=alpha, removal=sampler, empty_prediction=empty, seed=2
    )
    inter = IncrementalSAGE(reads_x1, "mse", 3, alpha=alpha, empty_prediction=empty, seed=3)
    X, y = redundant_stream(n, seed=5)
    for start in range(0, n, batch):
        obs.explain(X[start : start + batch], y[start : start + batch])
        inter.explain(X[start : start + batch], y[start : start + batch])
    for explainer, expected in ((obs, observational), (inter, interventional)):
        tol = explainer.half_width(1 / 25) + 2 * alpha * V / 3 + 0.05
        err = (explainer.importance - torch.tensor(expected, dtype=F64)).abs()
        assert bool((err <= tol).all()), (empty, explainer.importance.tolist(), expected)
    # the paper's observation: observational x0 >> interventional x0
    assert float(obs.importance[0] - inter.importance[0]) > V / 2


# ---------------------------------------------------------------------------------- (e)
def regression_model(Z):
    return Z[:, 0] * Z[:, 1] + torch.sin(2 * Z[:, 2]) - Z[:, 3] ** 2


def correlated_rows(n, g):
    z = torch.randn(n, 4, generator=g, dtype=F64)
    z[:, 1] = 0.9 * z[:, 0] + 0.3 * z[:, 1]
    z[:, 3] = (z[:, 2] > 0).to(F64) + 0.1 * z[:, 3]
    return z


def test_efficiency_holds_at_every_step():
    """sum_i phi_t(i) = EMA of l(y_empty_t, y_t) - l(f(x_t), y_t) for observational removal too
    (the contributions along the coalition chain telescope whatever the sampler draws)."""
    alpha, d, B = 0.03, 4, 48
    g = torch.Generator().manual_seed(0)
    sampler = ConditionalTreeSampler(d, grace_period=30, seed=1)
    isage = IncrementalSAGE(
        regression_model, "mse", d, alpha=alpha, n_samples=2, removal=sampler, seed=1
    )
    lf = get_loss("mse")
    y_empty, ref = None, 0.0
    for step in range(12):
        X = correlated_rows(B, g)
        out = regression_model(X)
        y = out + 0.3 * torch.randn(B, generator=g, dtype=F64)
        isage.explain(X, y)
        if step == 0:
            assert isage.n_explained == 0
            continue
        for b in range(B):
            y_empty = out[b] if y_empty is None else (1 - alpha) * y_empty + alpha * out[b]
            gap = lf(y_empty[None], y[b : b + 1]) - lf(out[b : b + 1], y[b : b + 1])
            ref = (1 - alpha) * ref + alpha * float(gap)
        assert abs(float(isage.importance_raw.sum()) - ref) <= 1e-9 * max(1.0, abs(ref))
    assert int(sampler.n_leaves.sum()) > d  # the trees did grow during the test


def test_one_model_call_per_batch():
    sizes = []

    def model(Z):
        sizes.append(Z.shape[0])
        return regression_model(Z)

    isage = IncrementalSAGE(
        model, "mse", 4, alpha=0.1, n_samples=3, removal="observational", seed=0
    )
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        X = correlated_rows(32, g)
        isage.explain(X, regression_model(X))
    assert sizes == [32 * (1 + 3 * 3)] * 2  # B (1 + (d - 1) m); the first batch only stores
    assert isinstance(isage.storage, ConditionalTreeSampler) and len(isage.storage) == 96


# ---------------------------------------------------------------------------------- (f)
def test_sampler_batch_equals_rows_while_the_trees_are_fixed():
    """With max_depth = 1 the root's children cannot split, so after the root split the trees
    are fixed: updating with one batch or row by row gives the same reservoirs and visit counts
    (one uniform number per (row, node), drawn in time order), and sampling a batch equals
    sampling its rows one after the other."""
    warm = ConditionalTreeSampler(3, max_depth=1, seed=7)
    feed(warm, step_rows(2000, seed=8), batch=100)
    assert warm.tree(1)["feature"][0] == 0
    state = warm.state_dict()
    one, many = (ConditionalTreeSampler(3, max_depth=1, seed=0) for _ in range(2))
    one.load_state_dict(state)
    many.load_state_dict(state)
    X = step_rows(300, seed=9)
    for i in range(300):
        one.update(X[i : i + 1])
    many.update(X)
    for key in ("res_values", "res_len"):
        assert torch.equal(getattr(one, key), getattr(many, key))
    assert torch.equal(one.trees.visits, many.trees.visits)
    assert torch.equal(one.trees.feature, many.trees.feature)
    mask = torch.rand(300, 3, generator=torch.Generator().manual_seed(1)) < 0.5
    rowwise = torch.cat([one.sample(X[i : i + 1], mask[i : i + 1], n=3) for i in range(300)])
    assert torch.equal(many.sample(X, mask, n=3), rowwise)


class FrozenSampler:
    """A trained sampler whose content no longer changes (update is ignored)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def impute(self, x, mask, storage=None):
        return self.sampler.impute(x, mask)

    def update(self, X):
        pass

    def __len__(self):
        return len(self.sampler)


@pytest.mark.parametrize("empty", ["ema", "imputed"])
def test_explainer_batch_equals_single_rows_with_a_fixed_sampler(empty):
    d, B = 4, 64
    g = torch.Generator().manual_seed(9)

    def frozen():
        sampler = ConditionalTreeSampler(d, grace_period=50, seed=3)
        feed(sampler, correlated_rows(1000, torch.Generator().manual_seed(2)), batch=100)
        return FrozenSampler(sampler)

    X = correlated_rows(B, g)
    y = regression_model(X) + 0.1 * torch.randn(B, generator=g, dtype=F64)
    kw = {"alpha": 0.05, "n_samples": 3, "empty_prediction": empty, "seed": 0}
    one = IncrementalSAGE(regression_model, "mse", d, removal=frozen(), **kw)
    for i in range(B):
        one.explain(X[i : i + 1], y[i : i + 1])
    many = IncrementalSAGE(regression_model, "mse", d, removal=frozen(), **kw)
    many.explain(X, y)
    torch.testing.assert_close(many.importance, one.importance, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(many.importance_raw, one.importance_raw, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------- (g)
def test_explainer_checkpoint_resume_is_bit_exact():
    def make(seed):
        sampler = ConditionalTreeSampler(4, grace_period=25, seed=seed)
        return IncrementalSAGE(
            regression_model, "mse", 4, alpha=0.02, n_samples=2, removal=sampler, seed=seed
        )

    g = torch.Generator().manual_seed(6)
    batches = []
    for _ in range(10):
        X = correlated_rows(40, g)
        batches.append((X, regression_model(X) + 0.1 * torch.randn(40, generator=g, dtype=F64)))
    resumed, whole = resumed_and_whole(make, batches, split=5)
    assert torch.equal(resumed.y_empty, whole.y_empty)
    a, b = resumed.storage.state_dict(), whole.storage.state_dict()
    assert torch.equal(a["res_values"], b["res_values"])
    assert all(torch.equal(a["trees"][k], b["trees"][k]) for k in a["trees"])
    assert int(whole.storage.n_leaves.sum()) > 4  # the trees grew, before and after the split


def test_default_observational_explainer_resumes_and_checks_the_removal():
    def make(seed):
        return IncrementalSAGE(
            regression_model, "mse", 4, alpha=0.05, removal="observational", seed=seed
        )

    g = torch.Generator().manual_seed(2)
    batches = [(X := correlated_rows(32, g), regression_model(X)) for _ in range(4)]
    resumed, _ = resumed_and_whole(make, batches, split=2)
    buf = io.BytesIO()
    torch.save(resumed.state_dict(), buf)
    buf.seek(0)
    interventional = IncrementalSAGE(regression_model, "mse", 4, seed=0)
    with pytest.raises(ValueError, match="state has"):
        interventional.load_state_dict(torch.load(buf, weights_only=True))


def test_sampler_state_dict_round_trip():
    sampler = ConditionalTreeSampler(3, grace_period=50, seed=11)
    feed(sampler, step_rows(600, seed=12), batch=60)
    buf = io.BytesIO()
    torch.save(sampler.state_dict(), buf)
    buf.seek(0)
    copy = ConditionalTreeSampler(3, grace_period=50, seed=99)
    copy.load_state_dict(torch.load(buf, weights_only=True))
    more = step_rows(400, seed=13)
    feed(sampler, more, batch=40)
    feed(copy, more, batch=40)
    mask = torch.tensor([True, False, False])
    assert torch.equal(sampler.sample(more[:50], mask, n=5), copy.sample(more[:50], mask, n=5))
    assert torch.equal(sampler.trees.threshold, copy.trees.threshold)
    with pytest.raises(ValueError, match="grace_period"):
        ConditionalTreeSampler(3, grace_period=51).load_state_dict(sampler.state_dict())


def test_float32_rows_and_inputs_not_mutated():
    sampler = ConditionalTreeSampler(3, grace_period=50, seed=0)
    X = step_rows(300, seed=1).float()
    Xc = X.clone()
    feed(sampler, X, batch=100)
    out = sampler.sample(X[:5], torch.tensor([True, False, True]), n=2)
    assert out.dtype == torch.float32 and out.shape == (5, 2, 3)
    assert torch.equal(X, Xc)
    assert torch.equal(out[:, :, 0], X[:5, :1].expand(5, 2))


# ---------------------------------------------------------------------------------- (h)
def test_bad_arguments_raise():
    for kwargs, name in [
        ({"max_depth": 0}, "max_depth"),
        ({"max_depth": 17}, "max_depth"),
        ({"leaf_reservoir_length": 0}, "leaf_reservoir_length"),
        ({"grace_period": 1.5}, "grace_period"),
        ({"n_thresholds": 0}, "n_thresholds"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"tau": -0.1}, "tau"),
        ({"insert_prob": 0.0}, "insert_prob"),
        ({"candidate_rows": 0}, "candidate_rows"),
        ({"seed": 1.5}, "seed"),
    ]:
        with pytest.raises(ValueError, match=name):
            ConditionalTreeSampler(3, **kwargs)
    with pytest.raises(ValueError, match="n_features"):
        ConditionalTreeSampler(0)
    f = regression_model
    with pytest.raises(TypeError, match="removal"):
        IncrementalSAGE(f, "mse", 4, removal=object())
    with pytest.raises(ValueError, match="removal"):
        IncrementalSAGE(f, "mse", 4, removal="conditional")
    with pytest.raises(ValueError, match="storage and imputer"):
        IncrementalSAGE(f, "mse", 4, removal="observational", storage="uniform")
    with pytest.raises(ValueError, match="storage and imputer"):
        IncrementalSAGE(f, "mse", 4, removal="observational", imputer="product")
    with pytest.raises(ValueError, match="n_features=3"):
        IncrementalSAGE(f, "mse", 4, removal=ConditionalTreeSampler(3))


def test_bad_inputs_raise():
    sampler = ConditionalTreeSampler(3, seed=0)
    X = step_rows(10, seed=0)
    with pytest.raises(ValueError, match="empty"):
        sampler.sample(X, torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match=r"X must have shape \[B >= 1, n_features=3\]"):
        sampler.update(X[:, :2])
    with pytest.raises(TypeError, match="X must be a tensor"):
        sampler.update(X.numpy())
    bad = X.clone()
    bad[4, 2] = float("nan")
    with pytest.raises(ValueError, match="row 4, column 2"):
        sampler.update(bad)
    assert sampler.n_seen == 0  # nothing was learned from the bad batches
    sampler.update(X)
    with pytest.raises(ValueError, match="bool"):
        sampler.sample(X, torch.tensor([1, 0, 1]))
    with pytest.raises(ValueError, match=r"present must have shape"):
        sampler.sample(X, torch.ones(10, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="n must be"):
        sampler.sample(X, torch.ones(3, dtype=torch.bool), n=0)
    with pytest.raises(ValueError, match="j must be"):
        sampler.tree(3)
