"""FIRES weights and selection (spec fires_erics §3, check 6) and the runner plug-in."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchstream.evaluate import Prequential
from torchstream.models.distributional import ProbitHead
from torchstream.select import FIRES, FIRESSelector, fires_weights, minmax_scale
from torchstream.sinks import History
from torchstream.streams import from_numpy
from torchstream.viz.figures import plugin_figures


def _random_stats(g, d):
    mu = torch.randn(d, generator=g, dtype=torch.float64)
    sigma = torch.rand(d, generator=g, dtype=torch.float64) * 2
    return mu, sigma


# ---------------------------------------------------------------------- check 6: the weights
def test_weights_closed_form_and_properties():
    # seeded random property loop (hypothesis is not a dependency)
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        d = int(torch.randint(2, 30, (1,), generator=g))
        ls = float(10 ** (torch.rand(1, generator=g) * 4 - 3))  # 1e-3 .. 10
        lr = float(10 ** (torch.rand(1, generator=g) * 4 - 3))
        mu, sigma = _random_stats(g, d)
        fires = FIRES(n_selected=1, lambda_s=ls, lambda_r=lr, scale_weights=False)
        fires.update(mu, sigma)
        w = fires.raw_weights
        # the closed form, element by element
        for j in range(d):
            m, s = mu[j].item(), sigma[j].item()
            assert w[j].item() == pytest.approx((m * m - ls * s * s) / (2 * lr), rel=1e-12)

        # it maximises the concave objective omega mu^2 - ls omega sigma^2 - lr omega^2:
        # moving omega either way by eps lowers it
        def obj(o, mu=mu, sigma=sigma, ls=ls, lr=lr):
            return o * mu**2 - ls * o * sigma**2 - lr * o**2

        assert (obj(w) >= obj(w + 1e-3)).all() and (obj(w) >= obj(w - 1e-3)).all()
        # P1: mu = 0 => omega <= 0
        assert (fires_weights(torch.zeros(d, dtype=torch.float64), sigma, ls, lr) <= 0).all()
        # sign of mu does not matter
        assert torch.equal(fires_weights(-mu, sigma, ls, lr), w)
        # P2.1: equal |mu|, larger sigma -> smaller omega; P2.2: equal sigma, larger |mu| -> larger
        s2 = sigma + torch.rand(d, generator=g, dtype=torch.float64) + 1e-3
        assert (fires_weights(mu, s2, ls, lr) < w).all()
        m2 = mu.abs() + torch.rand(d, generator=g, dtype=torch.float64) + 1e-3
        assert (fires_weights(m2, sigma, ls, lr) > w).all()
        # min-max scaling keeps the order and maps into [0, 1]
        sw = minmax_scale(w)
        assert sw.min() == 0 and sw.max() == 1
        i, j = torch.randint(0, d, (2,), generator=g).tolist()
        if w[i] < w[j]:
            assert sw[i] <= sw[j]
        assert torch.equal(torch.argsort(sw, stable=True), torch.argsort(w, stable=True)) or (
            len(set(sw.tolist())) < d  # ties created by rounding only
        )


def test_scaled_weights_no_nan_when_all_equal():
    fires = FIRES(n_selected=2)
    fires.update(torch.zeros(4), torch.ones(4))
    assert fires.weights.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert fires.raw_weights.tolist() == [-0.5] * 4  # 50 mu^2 - 0.5 sigma^2 at the defaults
    assert fires.selected.tolist() == [0, 1]  # ties: lower index first


def test_selection_top_k_with_stable_ties():
    mu = torch.tensor([0.1, 0.3, -0.3, 0.0, 0.3])
    sigma = torch.ones(5)
    fires = FIRES(n_selected=3, scale_weights=False)
    fires.update(mu, sigma)
    # 0.3, -0.3, 0.3 tie: lower index first
    assert fires.selected.tolist() == [1, 2, 4]
    assert fires.mask.tolist() == [False, True, True, False, True]
    fires = FIRES(n_selected=2)
    fires.update(mu, torch.tensor([1.0, 2.0, 1.0, 1.0, 0.5]))
    # omega = 50 mu^2 - 0.5 sigma^2: 0, 2.5, 4, -0.5, 4.375
    assert fires.selected.tolist() == [4, 2]
    assert fires.as_dict() == pytest.approx(
        {"x0": 0.5 / 4.875, "x1": 3 / 4.875, "x2": 4.5 / 4.875, "x3": 0.0, "x4": 1.0}
    )


def test_history_is_bounded_and_ordered():
    fires = FIRES(n_selected=1, history=3, feature_names=["a", "b"])
    for t in range(5):
        fires.update(torch.tensor([float(t % 2), 1.0 - t % 2]), torch.ones(2))
    h = fires.history
    assert h["steps"] == [2, 3, 4]
    assert h["selected"].flatten().tolist() == [1, 0, 1]  # mu = (0, 1), (1, 0), (0, 1)
    assert h["weights"].shape == (3, 2)
    assert h["feature_names"] == ["a", "b"]
    assert fires.n_updates == 5


def test_learn_reads_the_head_and_resume_is_exact():
    g = torch.Generator().manual_seed(3)
    batches = []
    for _ in range(20):
        X = torch.randn(50, 6, generator=g, dtype=torch.float64)
        batches.append((X, (X[:, 1] - X[:, 4] > 0).long()))
    a = FIRES(ProbitHead(6, lr_mu=0.1), n_selected=2)
    for X, y in batches[:8]:
        a.learn(X, y)
        mu, sigma = a.head.feature_stats()
        assert torch.equal(a.raw_weights, fires_weights(mu, sigma))
    b = FIRES(ProbitHead(6, lr_mu=0.1), n_selected=2)
    b.load_state_dict(a.state_dict())
    for X, y in batches[8:]:
        a.learn(X, y)
        b.learn(X, y)
        assert torch.equal(a.raw_weights, b.raw_weights)
        assert torch.equal(a.selected, b.selected)
    assert sorted(a.selected.tolist()) == [1, 4]
    assert a.history["steps"] == b.history["steps"]


def test_bad_input():
    with pytest.raises(ValueError, match="n_selected"):
        FIRES(n_selected=0)
    with pytest.raises(ValueError, match="n_selected=4 exceeds"):
        FIRES(ProbitHead(3), n_selected=4)
    with pytest.raises(ValueError, match="n_selected=3 exceeds"):
        FIRES(n_selected=3).update(torch.zeros(2), torch.ones(2))
    for name in ("lambda_s", "lambda_r"):
        with pytest.raises(ValueError, match=name):
            FIRES(n_selected=1, **{name: 0.0})
        with pytest.raises(ValueError, match=name):
            FIRES(n_selected=1, **{name: -1.0})
    with pytest.raises(ValueError, match="history"):
        FIRES(n_selected=1, history=0)

    class NoMapping:
        def learn(self, X, y):
            return self

        def feature_stats(self):
            raise NotImplementedError("no feature mapping")

    with pytest.raises(ValueError, match="no mapping of its parameters to features"):
        FIRES(NoMapping(), n_selected=1)
    with pytest.raises(TypeError, match="feature_stats"):
        FIRES(object(), n_selected=1)
    fires = FIRES(n_selected=1)
    with pytest.raises(ValueError, match="shape of mu"):
        fires.update(torch.zeros(3), torch.ones(2))
    with pytest.raises(ValueError, match=r"sigma\[1\] is negative"):
        fires.update(torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match=r"mu\[2\] is not finite"):
        fires.update(torch.tensor([0.0, 0.0, math.nan]), torch.ones(3))
    fires.update(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="mu has 4 features, expected 3"):
        fires.update(torch.zeros(4), torch.ones(4))
    with pytest.raises(RuntimeError, match="no head"):
        fires.learn(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(ValueError, match="feature_names has 2 names"):
        FIRES(ProbitHead(3), n_selected=1, feature_names=["a", "b"])


# ---------------------------------------------------------------------- the plug-in
class _RecordingLearner:
    """Learner stand-in: records what it is shown for prediction and learning."""

    task = "classification"
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self):
        self.predicted, self.learned = [], []
        self.classes_ = []

    def __call__(self, X):
        self.predicted.append(X.clone())
        return torch.full((X.shape[0], 2), 0.5)

    def learn(self, X, y):
        self.learned.append(X.clone())
        return torch.tensor(0.0)

    def _add_class(self, c):
        self.classes_.append(c)


@pytest.mark.parametrize("baseline", [0.0, -7.5, "vector"])
def test_plugin_masks_exactly_the_unselected_columns(baseline):
    d, B, T = 8, 20, 12
    rng = np.random.default_rng(0)
    X = rng.uniform(1.0, 2.0, size=(B * T, d))  # never equal to a baseline
    y = (X[:, 2] - X[:, 5] > 0).astype(int)
    if baseline == "vector":
        baseline = torch.arange(d, dtype=torch.float64) * -1.0 - 1.0
    selector = FIRESSelector(FIRES(ProbitHead(d, lr_mu=0.5), n_selected=3), baseline=baseline)
    twin = FIRES(ProbitHead(d, lr_mu=0.5), n_selected=3)  # learns from the raw batches itself
    learner, history = _RecordingLearner(), History()
    Prequential(
        learner,
        from_numpy(X, y, task="classification"),
        batch_size=B,
        plugins=[selector],
        sinks=[history],
    ).run()
    raw = torch.tensor(X, dtype=torch.float32)
    fill = torch.as_tensor(baseline, dtype=torch.float32).expand(d)
    for t in range(T):
        Xt = raw[t * B : (t + 1) * B]
        seen = learner.learned[t]
        assert torch.equal(learner.predicted[t], seen)  # same view for testing and learning
        if t == 0:
            assert torch.equal(seen, Xt)  # nothing known yet: nothing masked
        else:
            keep = torch.zeros(d, dtype=torch.bool)
            keep[twin.selected] = True  # the selection after step t-1
            assert torch.equal(seen[:, keep], Xt[:, keep])
            assert torch.equal(seen[:, ~keep], fill[~keep].expand(B, -1))
        twin.learn(Xt.double(), torch.tensor(y[t * B : (t + 1) * B]))
        # FIRES learned from the raw batch: same weights as the twin
        assert torch.allclose(
            torch.tensor(history.values(f"fires/x{0}")[t]), twin.weights[0].float(), atol=1e-6
        )
    assert torch.equal(selector.fires.selected, twin.selected)
    assert {2, 5} <= set(twin.selected.tolist()), twin.selected
    stab = history.values("fires/stability")
    assert all(math.isnan(v) for v in stab[:9]) and not math.isnan(stab[9])
    figs = plugin_figures(selector)
    assert set(figs) == {"fires/weights", "fires/selection"}


def test_plugin_state_and_errors():
    with pytest.raises(ValueError, match="needs a head"):
        FIRESSelector(FIRES(n_selected=1))
    with pytest.raises(ValueError, match=r"baseline must be a number or a tensor \[3\]"):
        FIRESSelector(FIRES(ProbitHead(3), n_selected=1), baseline=torch.zeros(2))
    with pytest.raises(ValueError, match="baseline must be finite"):
        FIRESSelector(FIRES(ProbitHead(3), n_selected=1), baseline=math.nan)
    sel = FIRESSelector(FIRES(ProbitHead(3), n_selected=1))
    with pytest.raises(ValueError, match=r"X must have shape \[B, 3\]"):
        sel.transform(torch.zeros(2, 4), 0)
    g = torch.Generator().manual_seed(0)
    data = [torch.randn(10, 3, generator=g, dtype=torch.float64) for _ in range(20)]
    for X in data[:7]:
        sel.learn(X, (X[:, 0] > 0).long())
    other = FIRESSelector(FIRES(ProbitHead(3), n_selected=1))
    other.load_state_dict(sel.state_dict())
    for X in data[7:]:
        sel.learn(X, (X[:, 0] > 0).long())
        other.learn(X, (X[:, 0] > 0).long())
        out = sel.scalars()
        assert other.scalars() == pytest.approx(out, abs=0, nan_ok=True)
    assert out["fires/stability"] == 1.0  # feature 0 selected throughout the last 10 steps
