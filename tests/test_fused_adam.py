"""The direct fused Adam step and the divergence guard's parameter check on the B = 1 path."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchstream import OnlineClassifier
from torchstream.learners import online
from torchstream.learners.fused_adam import fused_adam_step
from torchstream.models import MLP


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))


def _grads(net: nn.Module, step: int, skip_last: bool = False) -> None:
    g = torch.Generator().manual_seed(100 + step)
    params = list(net.parameters())
    for i, p in enumerate(params):
        p.grad = None if skip_last and i == len(params) - 1 else torch.randn(
            p.shape, generator=g
        )


OPTIONS = [
    (torch.optim.Adam, {}),
    (torch.optim.Adam, {"weight_decay": 0.1, "amsgrad": True}),
    (torch.optim.Adam, {"maximize": True, "betas": (0.8, 0.99), "eps": 1e-6}),
    (torch.optim.AdamW, {"weight_decay": 0.05}),
    (torch.optim.AdamW, {"amsgrad": True}),
]


@pytest.mark.parametrize(("cls", "kwargs"), OPTIONS)
def test_direct_step_is_the_optimizers_step_bit_for_bit(cls, kwargs):
    a, b = _net(), _net()
    opt_a = cls(a.parameters(), lr=0.01, fused=True, **kwargs)
    opt_b = cls(b.parameters(), lr=0.01, fused=True, **kwargs)
    for step in range(6):
        skip = step == 3  # a parameter without a gradient keeps its state and its step count
        _grads(a, step, skip), _grads(b, step, skip)
        opt_a.step()
        took = fused_adam_step(opt_b)
        assert took is (step > 0)  # the first step creates the state: the optimiser's own
        if not took:
            opt_b.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
        for key, va in opt_a.state[pa].items():
            assert torch.equal(va, opt_b.state[pb][key]), key
    assert opt_b.state[list(b.parameters())[-1]]["step"].item() == 5.0


def test_direct_step_declines_what_it_cannot_reproduce():
    def primed(opt_cls, **kw):
        net = _net()
        opt = opt_cls(net.parameters(), lr=0.01, **kw)
        _grads(net, 0)
        opt.step()
        _grads(net, 1)
        return net, opt

    cases = [
        primed(torch.optim.SGD, momentum=0.9),
        primed(torch.optim.Adam, foreach=True),
    ]
    net, opt = primed(torch.optim.Adam, fused=True)
    opt.register_step_post_hook(lambda *a: None)
    cases.append((net, opt))
    net, opt = primed(torch.optim.Adam, fused=True)
    opt.param_groups[0]["lr"] = torch.tensor(0.01)
    cases.append((net, opt))
    for net, opt in cases:
        before = [p.detach().clone() for p in net.parameters()]
        assert fused_adam_step(opt) is False
        assert all(torch.equal(p, q) for p, q in zip(net.parameters(), before))


def test_learner_steps_as_the_plain_torch_loop(monkeypatch):
    """``predict_proba_one`` + ``learn_one`` take exactly the steps of forward, cross-entropy,
    backward and ``Adam(fused=True).step()`` on the same rows; only the first step (which
    creates the optimiser's state) goes through ``optimizer.step()``."""
    calls = []
    monkeypatch.setattr(online, "optimizer_step", lambda opt: calls.append(opt.step()))
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(16, 16)), lr=0.01, seed=3,
                            classes=[0, 1, 2], n_features=4)
    assert learner.module is not None
    ref = MLP(4, 3, hidden=(16, 16))
    ref.load_state_dict(learner.module.state_dict())
    opt = torch.optim.Adam(ref.parameters(), lr=0.01, fused=True)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(40, 4, generator=g)
    y = torch.randint(0, 3, (40,), generator=g)
    for x, t in zip(X, y):
        row = {f"x{j}": float(v) for j, v in enumerate(x)}
        proba = learner.predict_proba_one(row)
        learner.learn_one(row, int(t))
        xr = torch.tensor([[row[f"x{j}"] for j in range(4)]])
        with torch.no_grad():
            expected = ref(xr).softmax(1)[0].double()
        assert list(proba.values()) == pytest.approx((expected / expected.sum()).tolist(),
                                                      rel=1e-6)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(ref(xr), t.view(1)).backward()
        opt.step()
    for p, q in zip(learner.module.parameters(), ref.parameters()):
        assert torch.equal(p, q)
    assert len(calls) == 1


class _WithSpare(nn.Module):
    """A linear model with a parameter the forward pass never reads (no gradient, no step)."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.output_layer = nn.Linear(d, k)
        self.spare = nn.Parameter(torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_layer(x)


@pytest.mark.parametrize(
    ("spare", "flagged"),
    [
        ((3e38, 3e38), False),  # finite entries whose sum overflows: not a divergence
        ((float("inf"), float("-inf")), True),  # the sum is NaN
        ((float("nan"), 1.0), True),
        ((float("inf"), 1.0), True),
    ],
)
def test_guard_flags_exactly_the_non_finite_parameters(spare, flagged):
    learner = OnlineClassifier(_WithSpare, lr=0.01, n_features=2, classes=[0, 1],
                            on_divergence="warn")
    assert learner.module is not None
    with torch.no_grad():
        learner.module.spare.copy_(torch.tensor(spare))
    X = torch.tensor([[0.5, -1.0]])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        learner.learn(X, torch.tensor([1]))
        learner.learn(X, torch.tensor([0]))
    expected = {"non-finite parameters": 2} if flagged else {}
    assert learner.divergences == expected


def test_guard_follows_a_parameter_whose_data_is_replaced():
    learner = OnlineClassifier(_WithSpare, lr=0.01, n_features=2, classes=[0, 1],
                            on_divergence="warn")
    assert learner.module is not None
    X, y = torch.tensor([[0.5, -1.0]]), torch.tensor([1])
    learner.learn(X, y)  # the guard's flat views of the parameters now exist
    learner.module.spare.data = torch.tensor([float("nan"), 0.0])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        learner.learn(X, y)
    assert learner.divergences == {"non-finite parameters": 1}
