"""An online learner's compile=True: the compiled step and prediction give the eager path's
predictions and parameters under a fixed seed (within float tolerance), through a new class
appearing mid-stream, input and target scaling; the divergence guard raises the eager message;
clone, pickle and state_dict resume keep the compiled learner; a module that cannot be compiled
warns once and runs eagerly.

Tolerance: the compiled graphs fuse the forward pass, loss and gradients into a few kernels that
sum in another order than the eager kernels, so float32 results differ by rounding (a few ulps
per step, compounded over the steps): predictions and parameters agree within 1e-5 (relative
and absolute), the updates themselves being about ``lr = 1e-2`` per step.

The module is skipped, with the reason, where ``torch.compile`` cannot compile a tiny function on
this machine (no C compiler). Shapes are few (d = 4, B = 1 and 8) to keep the compile time low.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from torchstream import OnlineClassifier, OnlineLearner, online_learner
from torchstream.checkpoint import load_checkpoint, save_checkpoint
from torchstream.learners.divergence import DivergenceError
from torchstream.models import MLP

D = 4
N_ROWS = 48
TOL = {"rtol": 1e-5, "atol": 1e-5}


pytestmark = pytest.mark.usefixtures("compiler_works")


def factory(d: int, k: int) -> nn.Module:
    return MLP(d, k, hidden=(16,))


def data(task: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``N_ROWS`` rows; for classification, class 2 first appears at row 20 (mid-stream)."""
    g = torch.Generator().manual_seed(7)
    X = torch.randn(N_ROWS, D, generator=g) * 3 + 1
    if task == "regression":
        return X, 2 * X[:, 0] - X[:, 2] + 5
    y = (X[:, 0] > 1).long()
    y[20::5] = 2
    return X, y


def make(task: str, compile: bool, **kw: object) -> OnlineLearner:
    return online_learner(factory, task=task, lr=1e-2, seed=0, compile=compile, **kw)


def run(learner: OnlineLearner, X: torch.Tensor, y: torch.Tensor, b: int) -> list[torch.Tensor]:
    """Prequential over batches of ``b`` rows (tensor API): the predictions, learning after."""
    preds = []
    for i in range(0, X.shape[0], b):
        if learner.module is not None:
            p = learner.predict_proba(X[i : i + b]) if learner.task == "classification" else (
                learner.predict(X[i : i + b]))
            preds.append(p)
        learner.learn(X[i : i + b], y[i : i + b])
    return preds


def assert_same(eager: OnlineLearner, compiled: OnlineLearner) -> None:
    assert eager.module is not None and compiled.module is not None
    for (name, a), (_, b) in zip(eager.module.named_parameters(),
                                 compiled.module.named_parameters()):
        torch.testing.assert_close(b, a, **TOL, msg=lambda m: f"{name}: {m}")
    assert compiled.n_samples_seen == eager.n_samples_seen
    assert compiled.classes_ == eager.classes_


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no silent or announced fallback
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("b", [1, 8])
def test_compiled_equals_eager(task: str, b: int) -> None:
    X, y = data(task)
    kw = {"scale_inputs": True} if task == "regression" else {}
    eager, compiled = make(task, False, **kw), make(task, True, **kw)
    p_eager, p_compiled = run(eager, X, y, b), run(compiled, X, y, b)
    assert compiled.compile_off_reason is None and compiled.compile_seconds > 0.0
    assert compiled._graphs is not None and len(compiled._graphs.keys) == 2  # train, predict
    for a, c in zip(p_eager, p_compiled, strict=True):
        torch.testing.assert_close(c, a, **TOL)
    assert_same(eager, compiled)
    if task == "classification":
        assert compiled.classes_ == [0, 1, 2]  # the output layer grew mid-stream
        assert compiled.module.output_layer.out_features == 3  # type: ignore[union-attr]
    assert eager.last_loss == pytest.approx(compiled.last_loss, rel=1e-5)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_river_api_with_a_new_label_equals_eager() -> None:
    X, y = data("classification")
    names = ["a", "b", "c", "d"]
    labels = ["no", "yes", "maybe"]
    learners = [make("classification", False), make("classification", True)]
    probas: list[list[dict[object, float]]] = [[], []]
    for row, label in zip(X.tolist(), y.tolist()):
        x = dict(zip(names, row))
        for out, learner in zip(probas, learners):
            out.append(learner.predict_proba_one(x))
            learner.learn_one(x, labels[label])
    eager, compiled = learners
    assert compiled.classes_ == ["no", "yes", "maybe"]
    for a, c in zip(*probas, strict=True):
        assert a.keys() == c.keys()
        for k in a:
            assert c[k] == pytest.approx(a[k], rel=1e-5, abs=1e-5)
    assert_same(eager, compiled)


@pytest.mark.parametrize("action", ["raise", "skip"])
def test_divergence_guard_fires_with_the_eager_message(action: str) -> None:
    """A batch whose values overflow inside the network (finite inputs, non-finite loss:
    float32's range)."""
    X, y = data("regression")
    bad = torch.full((1, D), 3e38)
    results = []
    for compile in (False, True):
        learner = make("regression", compile, on_divergence=action, dtype=torch.float32)
        run(learner, X[:8], y[:8], 1)
        before = [p.detach().clone() for p in learner.module.parameters()]  # type: ignore[union-attr]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if action == "raise":
                with pytest.raises(DivergenceError) as info:
                    learner.learn(bad, torch.tensor([1.0]))
                message = str(info.value)
            else:
                learner.learn(bad, torch.tensor([1.0]))
                message = str(caught[-1].message)
                for p, q in zip(learner.module.parameters(), before):  # type: ignore[union-attr]
                    assert torch.equal(p, q)  # the step was undone
        assert not [w for w in caught if "compile=True" in str(w.message)]
        assert learner.compile_off_reason is None
        results.append((message, dict(learner.divergences)))
    assert results[0] == results[1]
    assert "training diverged at row 8" in results[0][0]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_clone_pickle_and_state_dict_resume(tmp_path: Path) -> None:
    X, y = data("classification")
    full = make("classification", True)
    run(full, X, y, 8)

    first = make("classification", True)
    run(first, X[:24], y[:24], 8)
    clone = first.clone()
    assert clone._get_params()["compile"] is True and clone.compile is True
    assert clone.n_samples_seen == 0 and clone._graphs is None

    # the whole learner through the signed checkpoint (its pickled part): graphs are rebuilt
    path = save_checkpoint({"learner": first}, tmp_path / "learner.ckpt")
    copy = load_checkpoint(path)["learner"]
    assert isinstance(copy, OnlineLearner)
    assert copy.compile and copy._graphs is None
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = make("classification", True)
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    for learner in (copy, resumed):
        run(learner, X[24:], y[24:], 8)
        assert learner.compile_off_reason is None and learner._graphs is not None
        assert_same(full, learner)


class GraphBreak(nn.Module):
    """An MLP whose forward pass cannot be captured as one graph."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.output_layer = nn.Linear(d, k)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return self.output_layer(X)


def test_a_module_that_cannot_compile_warns_once_and_runs_eagerly() -> None:
    X, y = data("classification")
    eager = OnlineClassifier(GraphBreak, lr=1e-2, seed=0)
    compiled = OnlineClassifier(GraphBreak, lr=1e-2, seed=0, compile=True)
    run(eager, X, y, 8)
    with pytest.warns(RuntimeWarning, match=r"compile=True\): torch.compile failed") as caught:
        run(compiled, X, y, 8)
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert compiled.compile_off_reason is not None and compiled._graphs is None
    for a, c in zip(eager.module.parameters(), compiled.module.parameters()):  # type: ignore[union-attr]
        assert torch.equal(a, c)  # the eager path, exactly
