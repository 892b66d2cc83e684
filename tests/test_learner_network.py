"""``learner.network``: the learner's whole prediction (input scaling, module, output) as one
``nn.Module``, equal to ``learner(X)``, that captum's attribution methods take."""

from __future__ import annotations

import pytest
import torch
from captum.attr import DeepLift, IntegratedGradients

from torchstream.learners import OnlineLearner
from torchstream.models import MLP, Probit

F64 = torch.float64


def _trained(task: str, factory, *, scale_targets=None, n_classes: int = 3) -> OnlineLearner:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 4, generator=g, dtype=F64) * 5 + 3  # far from standard: scaling matters
    if task == "classification":
        y = ((X[:, 0] > 3).long() + (X[:, 1] > 3).long()).clamp(max=n_classes - 1)
    else:
        y = 2 * X[:, 0] + X[:, 1]
    learner = OnlineLearner(factory, task=task, lr=0.01, seed=0, scale_inputs=True,
                            scale_targets=scale_targets, dtype=F64)
    for i in range(0, 300, 20):
        learner.learn(X[i:i + 20], y[i:i + 20])
    return learner


CASES = {
    "softmax": ("classification", lambda d, k: MLP(d, k, hidden=(16,)), 3),
    "logistic": ("classification", lambda d, k: MLP(d, 1, hidden=(16,)), 2),
    "probit": ("classification", lambda d, k: Probit(d), 2),
    "regression": ("regression", lambda d, k: MLP(d, 1, hidden=(16,)), 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_network_is_the_learners_prediction(case):
    task, factory, k = CASES[case]
    learner = _trained(task, factory, n_classes=max(k, 2))
    X = torch.randn(7, 4, dtype=F64) * 5 + 3
    assert learner.input_scaler is not None
    torch.testing.assert_close(learner.network(X), learner(X), rtol=0, atol=0)
    # the network is live: it follows the learner as it learns
    net = learner.network
    learner.learn(X, learner.predict(X) if task == "classification" else X[:, 0])
    torch.testing.assert_close(net(X), learner(X), rtol=0, atol=0)


def test_network_shares_parameters_and_has_no_copies():
    learner = _trained(*CASES["softmax"][:2])
    net = learner.network
    assert {id(p) for p in net.parameters()} == {id(p) for p in learner.module.parameters()}


@pytest.mark.parametrize("case", ["softmax", "logistic", "regression"])
def test_integrated_gradients_on_scaled_inputs_are_complete(case):
    """IG's completeness (sum of attributions = f(x) - f(baseline)) holds for the learner's own
    function, input scaling included. A tanh network makes the path integral smooth, so
    captum's 200-point Gauss-Legendre rule leaves errors far below 1e-6 (a ReLU network's kinks
    would only allow O(1 / steps))."""
    task, _, k = CASES[case]
    smooth = {"softmax": lambda d, c: MLP(d, c, hidden=(16,), activation="tanh"),
              "logistic": lambda d, c: MLP(d, 1, hidden=(16,), activation="tanh"),
              "regression": lambda d, c: MLP(d, 1, hidden=(16,), activation="tanh")}[case]
    learner = _trained(task, smooth, n_classes=max(k, 2))
    net = learner.network
    X = torch.randn(5, 4, dtype=F64) * 5 + 3
    base = torch.full((1, 4), 3.0, dtype=F64)
    target = 1 if task == "classification" else None
    attr = IntegratedGradients(net).attribute(X, baselines=base, target=target, n_steps=200)
    out, out0 = net(X), net(base)
    if target is not None:
        out, out0 = out[:, target], out0[:, target]
    gap = (attr.sum(1) - (out - out0)).abs().max().item()
    assert gap < 1e-6 * max(1.0, (out - out0).abs().max().item())


def test_deeplift_on_a_scaled_regressor_is_exact():
    """DeepLift's rescale rule is exact for a ReLU network and an affine scaling around it."""
    learner = _trained("regression", CASES["regression"][1], scale_targets=True)
    net = learner.network
    X = torch.randn(5, 4, dtype=F64) * 5 + 3
    base = torch.full((1, 4), 3.0, dtype=F64)
    attr = DeepLift(net).attribute(X, baselines=base)
    gap = (attr.sum(1) - (net(X) - net(base))).abs().max().item()
    assert gap < 1e-9
    # attributing learner.module alone would explain another function
    assert not torch.allclose(learner.module(X).view(-1), learner(X))


def test_network_before_learning_needs_a_width():
    with pytest.raises(RuntimeError, match="no module yet"):
        OnlineLearner(lambda d, k: MLP(d, k), lr=0.01).network
    learner = OnlineLearner(lambda d, k: MLP(d, k), lr=0.01, n_features=3, classes=[0, 1])
    X = torch.zeros(2, 3)
    torch.testing.assert_close(learner.network(X), learner(X))
