"""LocalAttributor: completeness against the chosen baseline (spec §7 check 17), averaging over
baseline draws in one call, closed forms for a linear model, reproducibility, the plug-in and
bad input."""

from __future__ import annotations

import copy

import captum.attr as ca
import pytest
import torch

from torchstream.base import Explainer, ExplainerBase, PluginBase, as_plugin
from torchstream.step import Batch
from torchstream.explain.baselines import (
    ConstantBaseline,
    ExpectationBaseline,
    GaussianBaseline,
    MaxDistanceBaseline,
)
from torchstream.explain.local import LocalAttributor

F64 = torch.float64


def mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1), torch.nn.Flatten(0)
    ).double()


def rows(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 10, generator=torch.Generator().manual_seed(seed), dtype=F64)


def baselines():
    X = rows(200, seed=2)
    out = {
        "zero": ConstantBaseline(0.0),
        "expectation": ExpectationBaseline(50, seed=0),
        "gaussian": GaussianBaseline(0.5, seed=0),
        "max_distance": MaxDistanceBaseline(),
    }
    for b in out.values():
        b.update(X)
    return out


@pytest.mark.parametrize("name", ["zero", "expectation", "gaussian", "max_distance"])
def test_completeness_against_the_baseline(name):
    model, X = mlp(), rows(8)
    base = baselines()[name]
    dl = LocalAttributor(model, "deeplift", base, n_samples=5).attribute(X)
    assert float(dl.delta.abs().max()) <= 1e-4
    # the gap is the real one: recompute f(x) - mean_s f(b_s) from the draws
    fb = model(dl.baselines.reshape(-1, 10)).reshape(dl.baselines.shape[0], -1).mean(0)
    assert torch.allclose(dl.attributions.sum(1), model(X) - fb, atol=1e-4)
    errs = []
    for steps in (10, 200):
        ig = LocalAttributor(
            model, "integrated_gradients", base, n_samples=5, method_kwargs={"n_steps": steps}
        ).attribute(X)
        errs.append(float(ig.delta.abs().mean()))
        if steps == 200:
            assert float(ig.delta.abs().max()) <= 1e-2
    assert errs[1] < errs[0]
    ks = LocalAttributor(model, "kernel_shap", base, n_samples=3).attribute(X[:3])
    assert float(ks.delta.abs().max()) <= 1e-3


def test_stochastic_baseline_averages_draws_in_one_call():
    model, X = mlp(), rows(4)
    base = baselines()["gaussian"]
    exp = LocalAttributor(model, "deeplift", base, n_samples=6)
    calls = []
    original = exp._captum.attribute
    exp._captum.attribute = lambda *a, **k: calls.append(a[0].shape) or original(*a, **k)
    res = exp.attribute(X)
    assert calls == [torch.Size([24, 10])]  # 6 draws x 4 rows, one captum call
    manual = torch.stack(
        [ca.DeepLift(model).attribute(X, baselines=res.baselines[s]) for s in range(6)]
    ).mean(0)
    assert torch.allclose(res.attributions, manual, atol=1e-10)


def test_linear_model_closed_form():
    w = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0, 1.0, -1.0, 0.25, 2.0, -0.5], dtype=F64)

    def linear(z: torch.Tensor) -> torch.Tensor:
        return z @ w + 0.3

    X, base = rows(3), baselines()["expectation"]
    for method in ("shapley_value_sampling", "kernel_shap", "integrated_gradients"):
        res = LocalAttributor(linear, method, base, n_samples=4, seed=3).attribute(X)
        mean_b = res.baselines.mean(0)  # the same 4 rows for every x (static)
        assert torch.allclose(res.attributions, w * (X - mean_b), atol=1e-5), method
    # the expectation baseline is static: every row got the same draws
    assert bool((res.baselines == res.baselines[:, :1]).all())


def test_multi_output_targets_and_reproducibility():
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(10, 3), torch.nn.Softmax(1)).double()
    X = rows(6)
    with pytest.raises(ValueError, match="target"):
        LocalAttributor(net, "shapley_value_sampling").attribute(X)
    state = torch.get_rng_state()
    a = LocalAttributor(net, "shapley_value_sampling", 0.0, target="predicted", seed=1)
    first = a.attribute(X)
    assert torch.equal(torch.get_rng_state(), state)  # captum's draws do not touch the global RNG
    assert torch.equal(first.target, net(X).argmax(1))
    b = LocalAttributor(net, "shapley_value_sampling", 0.0, target="predicted", seed=1)
    assert torch.equal(b.attribute(X).attributions, first.attributions)
    saved = copy.deepcopy(a.state_dict())
    nxt = a.attribute(X).attributions
    c = LocalAttributor(net, "shapley_value_sampling", 0.0, target="predicted", seed=9)
    c.load_state_dict(saved)
    assert torch.equal(c.attribute(X).attributions, nxt)
    fixed = LocalAttributor(net, "integrated_gradients", 0.0, target=2).attribute(X)
    assert fixed.target.tolist() == [2] * 6


def test_plugin_explains_then_updates_the_baseline():
    model = mlp()
    exp = LocalAttributor(model, "integrated_gradients", ExpectationBaseline(20, seed=0))
    X = rows(8)
    assert exp.on_batch(Batch(0, 0, X, torch.zeros(8), model(X), model)) == {}  # empty store
    out = exp.on_batch(Batch(1, 8, X, torch.zeros(8), model(X), model))
    assert set(out) == {f"local/x{j}" for j in range(10)} | {"local_delta/mean_abs"}
    assert exp.baseline.n_seen == 16


def test_bad_input():
    model = mlp()
    with pytest.raises(TypeError, match="nn.Module"):
        LocalAttributor(lambda z: model(z), "deeplift")
    with pytest.raises(TypeError, match="takes no baselines"):
        LocalAttributor(model, ca.Saliency)
    with pytest.raises(ValueError, match="method must be one of"):
        LocalAttributor(model, "lime")
    with pytest.raises(ValueError, match="n_features=3"):
        LocalAttributor(model, "integrated_gradients", [0.0, 0.0, 0.0]).attribute(rows(2))
    with pytest.raises(ValueError, match="empty"):
        LocalAttributor(model, "integrated_gradients", ExpectationBaseline()).attribute(rows(2))
    with pytest.raises(ValueError, match="not arguments"):
        LocalAttributor(model, "integrated_gradients", method_kwargs={"n_step": 3})

    def bad(z: torch.Tensor) -> torch.Tensor:
        out = z.sum(1)
        return torch.where(z[:, 0] > 0.5, torch.full_like(out, float("nan")), out)

    X = rows(4)
    X[2, 0] = 1.0
    X[:2, 0] = 0.0
    X[3, 0] = 0.0
    with pytest.raises(ValueError, match="input row 2 is not finite"):
        LocalAttributor(bad, "shapley_value_sampling").attribute(X)
    with pytest.raises(ValueError, match="baseline row 0 is not finite"):
        LocalAttributor(bad, "shapley_value_sampling", 1.0).attribute(X[:2])
    X[1, 3] = float("inf")
    with pytest.raises(ValueError, match="X row 1"):
        LocalAttributor(model, "integrated_gradients").attribute(X)
    with pytest.raises(RuntimeError, match="completeness"):
        LocalAttributor(
            model, "integrated_gradients", 0.0, completeness_tol=1e-12, method_kwargs={"n_steps": 2}
        ).attribute(rows(3))


def test_a_plug_in_outside_the_global_explainer_contract():
    """Per-row attributions and no running importance: the runner takes it as it is, a
    plug-in, and nothing mistakes it for a global explainer."""
    exp = LocalAttributor(lambda z: z.sum(1), "shapley_value_sampling", 0.0)
    assert isinstance(exp, PluginBase) and as_plugin(exp) is exp
    assert not isinstance(exp, (Explainer, ExplainerBase))
    assert not hasattr(exp, "explain") and not hasattr(exp, "importance")
    assert exp.clone()._get_params() == exp._get_params()
