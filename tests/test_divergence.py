"""Divergent training stops at the step it happens (or warns / undoes the step); inputs that
overflow the model's dtype and missing or fractional labels are errors naming the row."""

from __future__ import annotations

import copy
import io
import math
import re
import statistics
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from torchstream import OnlineClassifier, OnlineLearner, OnlineRegressor, online_learner
from torchstream.learners import DivergenceError, DivergenceWarning
from torchstream.learners.divergence import LossMonitor
from torchstream.learners.guard import read_scalars
from torchstream.learners.tasks import MAX_IMPLIED_CLASSES
from torchstream.models import MLP, Probit
from torchstream.streams import make_synthetic


@pytest.fixture(autouse=True)
def one_thread():
    """Small models: one thread is fastest, and keeps the timings of a busy machine sane."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def mlp(d: int, k: int) -> torch.nn.Module:
    return MLP(d, k, hidden=(16,))


def assert_same_state(a: dict, b: dict) -> None:
    """Two (nested) state dicts hold equal values, tensors compared bit for bit."""
    assert type(a) is type(b) or isinstance(a, dict) and isinstance(b, dict)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same_state(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert_same_state(u, v)
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    else:
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def learner_state(model: OnlineLearner) -> dict:
    return copy.deepcopy(model.state_dict())


# ---------------------------------------------------------------- the explosion rule
def test_loss_monitor_rule_by_hand():
    m = LossMonitor(factor=10.0, window=3, warmup_rows=4)
    m.add_initial(0.5, 3)
    assert m.warming_up and m.reference() is None and not m.exploded(1e30)
    m.add_initial(1.5, 1)  # L_init = (0.5 * 3 + 1.5) / 4 = 0.75
    assert not m.warming_up and m.reference() == 0.75
    for loss in (0.1, 0.2, 0.3):
        m.accept(loss)
    assert m.reference() == 0.75  # the median 0.2 is below L_init
    assert not m.exploded(7.5) and m.exploded(7.5000001)
    for loss in (2.0, 4.0):  # window of 3: [0.3, 2.0, 4.0], median 2.0
        m.accept(loss)
    assert m.reference() == 2.0
    assert not m.exploded(20.0) and m.exploded(20.1)
    m.add_initial(1e9, 10)  # after the warm-up: ignored
    assert m.reference() == 2.0
    for loss in (100.0, 200.0):  # median 100 > ceiling * L_init = 75: the reference stops at 75
        m.accept(loss)
    assert m.reference() == 75.0
    assert not m.exploded(750.0) and m.exploded(750.0001)
    with pytest.raises(ValueError, match="divergence_factor"):
        LossMonitor(factor=1.0)
    off = LossMonitor(factor=math.inf, warmup_rows=1)
    off.add_initial(1.0, 1)
    assert not off.exploded(1e300)


def test_worse_than_a_constant_rule_by_hand():
    """m_t > factor * L_const and m_t > ceiling * (lowest earlier median); the loss that
    breaks it stays in the history until retracted; the state resumes the rule exactly."""
    m = LossMonitor(factor=10.0, window=3, warmup_rows=2)
    m.add_initial(500.0, 1, constant=2.0)
    m.add_initial(1500.0, 1, constant=4.0)  # L_init = 1000, L_const = 3
    assert (m.initial_loss, m.constant_loss, m.poor_start()) == (1000.0, 3.0, 1000.0 / 3.0)
    assert [m.observe(v) for v in (50.0, 40.0, 60.0)] == [None, None, None]
    assert m.lowest_median == 50.0  # the first full window [50, 40, 60]
    assert m.observe(6000.0) is None  # median 60: not above 10 * 3 and 100 * 50
    assert m.observe(5000.0) is None  # median 5000 > 30, but not above 100 * 50 = 5000
    twin = LossMonitor(factor=10.0, window=3, warmup_rows=2)
    twin.load_state_dict(m.state_dict())
    assert m.observe(5001.0) == twin.observe(5001.0) == "worse than a constant"  # median 5001
    m.retract()  # back to [60, 6000, 5000]
    assert m.state_dict() == {**twin.state_dict(), "recent": [60.0, 6000.0, 5000.0]}
    zero = LossMonitor(window=1, warmup_rows=1)
    zero.add_initial(0.5, 1, constant=0.0)  # constant targets so far: no ratio to a constant
    assert zero.poor_start() is None
    assert [zero.observe(v) for v in (0.5, 4000.0)] == [None, None]  # 8000 times its median
    unknown = LossMonitor(window=1, warmup_rows=1)
    unknown.add_initial(1e9, 1)  # no constant measured (a callable loss)
    assert unknown.constant_loss is None and unknown.poor_start() is None


def test_constant_loss_is_log_k_and_the_standardised_targets_mean_square():
    """L_const by independent computation: uniform probabilities over k = 3 outputs cost
    log 3 on every row; for standardised regression targets, the mean of z^2 with z each
    target standardised by the running statistics including its batch."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(32, 2, generator=g)
    clf = OnlineClassifier(mlp, n_features=2, classes=[0, 1, 2], seed=0)
    for i in range(0, 32, 4):
        clf.learn(X[i : i + 4], torch.randint(0, 3, (4,), generator=g))
    assert clf._monitor.constant_loss == pytest.approx(math.log(3), rel=1e-6)
    y = 5.0 + 3.0 * torch.randn(32, generator=g, dtype=torch.float64)
    reg = OnlineRegressor(mlp, n_features=2, seed=0)
    total = 0.0
    for i in range(0, 32, 4):
        reg.learn(X[i : i + 4], y[i : i + 4])
        seen = y[: i + 4]
        z = (y[i : i + 4] - seen.mean()) / seen.std(unbiased=False)
        total += float((z**2).sum())
    assert reg._monitor.constant_loss == pytest.approx(total / 32, rel=1e-9)
    unscaled = OnlineRegressor(mlp, n_features=2, scale_targets=False, seed=0)
    unscaled.learn(X, y)
    assert unscaled._monitor.constant_loss is None  # the targets' unit is the caller's


def test_a_poor_start_is_said_once_and_training_goes_on():
    """Unscaled inputs of magnitude 1.6e9 (a timestamp): the untrained model's loss is about
    1e16 times a constant's. A reference from it alone never fired and a run ended with a mean
    squared error 1e13 times the targets' variance without a word; the end of the warm-up now
    says so (the model still learns: it is not stopped)."""
    g = torch.Generator().manual_seed(0)
    n = 200
    ts = 1.6e9 + 60.0 * torch.arange(n, dtype=torch.float64)
    x1 = torch.randn(n, generator=g, dtype=torch.float64)
    X = torch.stack([ts, x1], 1)
    y = 1e6 * x1 + 1e5 * torch.randn(n, generator=g, dtype=torch.float64)
    model = OnlineRegressor(mlp, n_features=2, seed=0)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", DivergenceWarning)
        for i in range(0, n, 4):
            model.learn(X[i : i + 4], y[i : i + 4])
    poor = [str(w.message) for w in said if "untrained" in str(w.message)]
    assert len(poor) == 1
    assert re.match(r"the untrained model's mean loss on rows 0-31, \S+, is \S+ times a constant "
                    r"prediction's .* Fix: scale the inputs \(scale_inputs=True\)", poor[0])
    monitor = model._monitor
    assert monitor.poor_start() == monitor.initial_loss / monitor.constant_loss > 1e10
    assert model.n_samples_seen == n
    scaled = OnlineRegressor(mlp, n_features=2, scale_inputs=True, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        scaled.learn(X[:40], y[:40])  # a fair start says nothing
    assert scaled._monitor.poor_start() is None


class _Drifting(torch.nn.Module):
    """Predicts ``start * growth**t`` at its t-th training forward pass, whatever the input
    (eval mode: ``start``, the untrained prediction): a model that slowly diverges."""

    mode_sensitive = True

    def __init__(self, start: float, growth: float) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        self.start, self.growth, self.t = start, growth, 0

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.t += 1
        value = self.start * self.growth ** (self.t if self.training else 0)
        return (self.bias * 0 + value).expand(X.shape[0], 1)


@pytest.mark.parametrize("action", ["raise", "skip"])
def test_a_slowly_diverging_model_far_worse_than_a_constant_is_stopped(action):
    """Predictions 1000 * 1.02^t against standardised targets +-1 (batches of 2 rows: mean 0,
    deviation 1 exactly): step t's loss is (1000 * 1.02^t)^2 + 1 and a constant's is 1. The
    explosion rule waits for 1e6 * L_init (step 349); the comparison with the constant stops
    the run where an independent replay of the rule says, naming it."""
    start, growth, window = 1000.0, 1.02, 64
    losses = [(start * growth**t) ** 2 + 1.0 for t in range(1, 400)]
    recent: list[float] = []
    lowest, expected = math.inf, None
    for t, loss in enumerate(losses):
        recent = (recent + [loss])[-window:]
        if t < 16 or len(recent) < window:  # the warm-up: 32 rows
            continue
        median = statistics.median(recent)
        if median > 1e4 * 1.0 and median > 100 * lowest:
            expected = t
            break
        lowest = min(lowest, median)
    assert expected is not None and expected < 349
    model = OnlineRegressor(_Drifting(start, growth), n_features=1,
                          optimizer="sgd", lr=1e-30, dtype=torch.float64, on_divergence=action)
    X, y = torch.zeros(2, 1, dtype=torch.float64), torch.tensor([1.0, -1.0], dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)  # the poor start: 1e6 times 1
        if action == "raise":
            with pytest.raises(DivergenceError, match=rf"diverged at row {2 * expected + 1} .*"
                                                      r"the median loss of the last 64 steps, "
                                                      r"\S+, is \S+ times a constant "
                                                      r"prediction's \(1: the targets' running "
                                                      r"mean\) .*\[worse than a constant\]"):
                for _ in range(400):
                    model.learn(X, y)
            assert model.n_samples_seen == 2 * (expected + 1)
        else:
            for _ in range(expected + 3):
                model.learn(X, y)
            assert model.divergences == {"worse than a constant": 3}
            assert len(model._monitor._recent) == window  # the undone steps' losses left out


def test_constructor_and_from_spec_take_on_divergence():
    for action in ("raise", "warn", "skip"):
        model = OnlineClassifier.from_spec("mlp", on_divergence=action, divergence_factor=1e3)
        assert model.on_divergence == action and model.divergence_factor == 1e3
    assert OnlineClassifier(mlp).on_divergence == "raise"
    with pytest.raises(ValueError, match="on_divergence must be one of raise, warn, skip"):
        OnlineClassifier(mlp, on_divergence="ignore")
    with pytest.raises(ValueError, match="divergence_factor"):
        OnlineClassifier(mlp, divergence_factor=0.5)
    assert issubclass(DivergenceError, ValueError)


# ---------------------------------------------------------------- raise
def test_probit_on_unscaled_inputs_stops_at_the_step():
    """A probit on inputs of scale 1e6 reached `log_loss nan`; now the first divergent step
    raises, naming a row of the batch it was given, the loss and the remedies."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(400, 3, generator=g, dtype=torch.float64) * 1e6
    y = (X[:, 0] + X[:, 1] > 0).long()
    model = OnlineClassifier.from_spec("probit", scale_inputs=False, seed=0)
    losses = []
    with pytest.raises(DivergenceError) as info:
        for i in range(0, 400, 4):
            first = model.n_samples_seen
            model.learn(X[i : i + 4], y[i : i + 4])
            losses.append(model.last_loss)
    msg = str(info.value)
    assert all(math.isfinite(v) for v in losses)  # nothing diverged before the step named
    row = int(re.search(r"at row (\d+)", msg).group(1))
    assert first <= row < first + 4
    assert f"batch of rows {first}-{first + 3}" in msg
    assert "scale the inputs (scale_inputs=True)" in msg
    assert "lower the learning rate (lr=0.01)" in msg
    assert re.search(r"\[(non-finite loss|non-finite parameters|exploding loss)\]", msg)
    assert model.divergences and sum(model.divergences.values()) == 1


def test_sgd_blow_up_names_the_non_finite_loss():
    stream = make_synthetic("friedman", n_samples=400, seed=1)
    model = OnlineRegressor(
        mlp, optimizer="sgd", lr=1.0, scale_inputs=True, seed=0,
        dtype=torch.float32,  # float32's range: the blow-up reaches inf
    )
    with pytest.raises(DivergenceError, match=r"the loss is (inf|nan) \[non-finite loss\]"):
        for X, y in stream.batches(4):
            model.learn(X, y)


def test_large_learning_rate_explosion_is_caught_before_any_nan():
    """Adam at lr=10 on Friedman: the loss stays finite (MSE 3.6e7 over the run) but rises far
    above the untrained model's loss; the explosion rule stops it."""
    stream = make_synthetic("friedman", n_samples=2000, seed=0)
    model = OnlineRegressor.from_spec("mlp", lr=10.0, scale_inputs=True, seed=0)
    with pytest.raises(DivergenceError, match=r"\[exploding loss\]") as info:
        for X, y in stream.batches(4):
            model.learn(X, y)
    found = re.search(r"is ([0-9.e+]+) times its running reference", str(info.value))
    ratio = float(found.group(1))
    assert ratio > 1e4
    assert model.n_samples_seen < 200  # early: the warm-up is 32 rows


# ---------------------------------------------------------------- warn / skip
def _overflowing_row(d: int) -> torch.Tensor:
    """A row finite in float32 whose first layer overflows: the loss becomes non-finite."""
    return torch.full((1, d), 3e38)


def test_warn_warns_once_per_kind_and_goes_on():
    model = OnlineRegressor(mlp, n_features=2, on_divergence="warn", seed=0,
                          dtype=torch.float32)  # the row overflows float32
    good = torch.tensor([[0.5, -0.5]])
    with pytest.warns(DivergenceWarning) as record:
        model.learn(good, torch.tensor([1.0]))
        for _ in range(3):
            model.learn(_overflowing_row(2), torch.tensor([1.0]))
    assert len(record) == 1 and "non-finite loss" in str(record[0].message)
    assert model.divergences == {"non-finite loss": 3}
    assert model.n_samples_seen == 4


def test_skip_undoes_the_step_exactly():
    """A skipped step leaves module, optimiser and both scalers bit for bit as before; the next
    good step gives the same parameters as a learner that never saw the bad rows."""
    poison = [False]

    def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # NaN on demand
        err = (out.reshape(-1) - y) ** 2
        return err * math.nan if poison[0] else err

    g = torch.Generator().manual_seed(3)
    X = torch.randn(40, 2, generator=g)
    y = X.sum(1)
    kw = dict(n_features=2, scale_inputs=True, loss=loss, seed=0)
    skip = OnlineRegressor(mlp, on_divergence="skip", **kw)
    plain = OnlineRegressor(mlp, **kw)
    assert skip.scale_targets and plain.scale_targets
    for i in range(0, 36, 4):
        skip.learn(X[i : i + 4], y[i : i + 4])
        plain.learn(X[i : i + 4], y[i : i + 4])
    before = learner_state(skip)
    poison[0] = True
    with pytest.warns(DivergenceWarning, match="the step was undone"):
        skip.learn(X[36:39] * 100, y[36:39] * 100)
    poison[0] = False
    after = learner_state(skip)
    for key in ("module", "optimizer", "input_scaler", "target_scaler"):
        assert_same_state(before[key], after[key])
    assert after["n_samples_seen"] == before["n_samples_seen"] + 3
    assert skip.divergences == {"non-finite loss": 1}
    skip.learn(X[36:], y[36:])
    plain.learn(X[36:], y[36:])
    assert_same_state(skip.state_dict()["module"], plain.state_dict()["module"])
    assert_same_state(skip.state_dict()["optimizer"], plain.state_dict()["optimizer"])


def test_skip_undoes_a_step_that_makes_parameters_non_finite():
    model = OnlineRegressor(
        mlp, n_features=2, optimizer="sgd", lr=1e39, on_divergence="skip",
        seed=0, dtype=torch.float32,  # lr=1e39 is inf in float32
    )
    before = learner_state(model)
    with pytest.warns(DivergenceWarning, match=r"\[non-finite parameters\]"):
        model.learn(torch.tensor([[1.0, 2.0]]), torch.tensor([3.0]))
    assert_same_state(before["module"], model.state_dict()["module"])
    assert all(torch.isfinite(p).all() for p in model.module.parameters())


# ---------------------------------------------------------------- checkpoint / resume
@pytest.mark.parametrize("n_first", [3, 20])  # inside and after the 32-row warm-up (B = 4)
def test_divergence_state_resumes_exactly(n_first):
    stream = make_synthetic("sea-drift", n_samples=4 * (n_first + 20), seed=2)
    batches = list(stream.batches(4))
    a = OnlineClassifier.from_spec("mlp", scale_inputs=True, seed=0, on_divergence="warn")
    for X, y in batches[:n_first]:
        a.learn(X, y)
    a.divergences["exploding loss"] = 2  # a count carried by the checkpoint
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    b = OnlineClassifier.from_spec("mlp", scale_inputs=True, seed=0, on_divergence="warn")
    b.load_state_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    assert (b._initial is None) == (a._initial is None) == (n_first * 4 >= 32)
    for X, y in batches[n_first:]:
        a.learn(X, y)
        b.learn(X, y)
        assert a.last_loss == b.last_loss
    assert_same_state(a.state_dict(), b.state_dict())
    assert b.divergences == {"exploding loss": 2}


# ---------------------------------------------------------------- no false alarm
@pytest.mark.parametrize("name, batch", [("sea-drift", 1), ("agrawal-drift", 4)])
def test_healthy_seeded_run_never_fires(name, batch):
    stream = make_synthetic(name, n_samples=3000, seed=0)
    model = online_learner("mlp", task=stream.task, scale_inputs=True, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        for X, y in stream.batches(batch):
            with torch.no_grad():
                model(X)
            model.learn(X, y)
    assert model.divergences == {} and model.n_samples_seen == 3000
    assert model._monitor.reference() is not None  # the rule was armed


# ---------------------------------------------------------------- inputs beyond the dtype
def test_overflowing_input_is_an_error_naming_row_and_column():
    model = OnlineClassifier(mlp, seed=0)
    model.learn_one({"a": 1.0, "b": 2.0}, 0)
    model.learn_one({"a": 2.0, "b": 1.0}, 1)
    before = learner_state(model)
    pattern = r"row 2, column 'b': 1e\+39 overflows the model's float32"
    with pytest.raises(ValueError, match=pattern):
        model.learn_one({"a": 1.0, "b": 1e39}, 1)
    with pytest.raises(ValueError, match=pattern):
        model.predict_proba_one({"a": 1.0, "b": 1e39})
    with pytest.raises(ValueError, match=r"row 3, column 'b': -1e\+39 overflows"):
        model.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, -1e39]}), pd.Series([0, 1]))
    with pytest.raises(ValueError, match=r"X row 1, column 'a': 1e\+39 overflows"):
        X = torch.tensor([[0.0, 0.0], [1e39, 0.0]], dtype=torch.float64)
        model.learn(X, torch.tensor([0, 1]))
    assert_same_state(before, learner_state(model))
    p = model.predict_proba_one({"a": 1.0, "b": 2.0})
    assert all(math.isfinite(v) for v in p.values())
    wide = OnlineClassifier(mlp, seed=0, dtype=torch.float64)
    wide.learn_one({"a": 1.0, "b": 1e39}, 1)  # float64 holds it
    assert wide.n_samples_seen == 1


def test_overflowing_regression_target_is_an_error():
    model = OnlineRegressor(mlp, seed=0, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"row 0\): 1e\+39 overflows the model's float32"):
        model.learn_one({"a": 1.0}, 1e39)


# ---------------------------------------------------------------- labels
def test_nan_labels_are_errors_never_a_class():
    model = OnlineClassifier(mlp, seed=0)
    for i in range(100):
        with pytest.raises(ValueError, match=r"row 0: the label is missing \(nan\)"):
            model.learn_one({"a": float(i)}, float("nan"))
    assert model.classes_ == [] and model.n_samples_seen == 0
    model.learn_one({"a": 0.0}, 0)
    for missing in (None, np.nan, pd.NA):
        with pytest.raises(ValueError, match="row 1: the label is missing"):
            model.learn_one({"a": 1.0}, missing)
    with pytest.raises(ValueError, match="row 2: the label is missing"):
        model.learn_many(pd.DataFrame({"a": [1.0, 2.0, 3.0]}), pd.Series([0, None, 1]))
    with pytest.raises(ValueError, match=r"y\[1\] \(row 2\): nan is not a class index"):
        model.learn(torch.zeros(2, 1), torch.tensor([0.0, float("nan")]))
    assert model.classes_ == [0] and model.n_samples_seen == 1


def test_fractional_label_among_integer_classes_is_an_error():
    model = OnlineClassifier(mlp, seed=0)
    model.learn_one({"a": 0.0}, 0)
    model.learn_one({"a": 1.0}, 1)
    msg = r"row 2: label 0.5 is not an integer, but the classes are integers \(0, 1\)"
    with pytest.raises(ValueError, match=msg):
        model.learn_one({"a": 0.5}, 0.5)
    model.learn_one({"a": 1.0}, 1.0)  # 1.0 is the class 1
    model.learn_one({"a": 1.0}, np.int64(1))
    assert model.classes_ == [0, 1]
    fresh = OnlineClassifier(mlp, seed=0)
    with pytest.raises(ValueError, match=r"row 1: label 0.5 is not an integer.*\(1\)"):
        fresh.learn_many(pd.DataFrame({"a": [0.0, 1.0]}), pd.Series([1, 0.5], dtype=object))
    assert fresh.classes_ == []
    floats = OnlineClassifier(mlp, seed=0)  # a 0/1 column read as floats
    floats.learn_many(pd.DataFrame({"a": [0.0, 1.0]}), pd.Series([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"row 2: label 0.5 is not an integer"):
        floats.learn_one({"a": 0.5}, 0.5)
    with pytest.raises(ValueError, match=r"row 2: label 2.5 .* declare them, classes="):
        floats.learn_many(pd.DataFrame({"a": [0.0]}), pd.Series([2.5]))
    halves = OnlineClassifier(mlp, classes=[1.0, 2.5], seed=0)  # fractional classes, declared
    halves.learn_many(pd.DataFrame({"a": [0.0, 1.0, 2.0]}), pd.Series([1.0, 2.5, 0.5]))
    assert halves.classes_ == [1.0, 2.5, 0.5]
    names = OnlineClassifier(mlp, seed=0)
    names.learn_one({"a": 0.0}, "low")
    names.learn_one({"a": 1.0}, 2.5)  # no integer classes: a new class, as any label
    assert names.classes_ == ["low", 2.5]


def test_regression_missing_target_names_the_row():
    model = OnlineRegressor(mlp, seed=0)
    model.learn_one({"a": 0.0}, 1.0)
    with pytest.raises(ValueError, match=r"row 1\): non-finite target nan"):
        model.learn_one({"a": 0.0}, float("nan"))
    with pytest.raises(ValueError, match="row 1: target None; regression targets must be numbers"):
        model.learn_one({"a": 0.0}, None)
    with pytest.raises(ValueError, match=r"y\[1\] \(row 2\): non-finite target nan"):
        model.learn_many(pd.DataFrame({"a": [0.0, 1.0]}), pd.Series([1.0, np.nan]))


def test_probit_module_instance_without_scaling_is_caught():
    """The same probit failure through a module instance and the river API."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = OnlineClassifier(Probit(2, 1), lr=0.01, seed=0)
    g = np.random.default_rng(0)
    with pytest.raises(DivergenceError, match="training diverged at row"):
        for _ in range(400):
            x = g.normal(size=2) * 1e6
            model.learn_one({"a": x[0], "b": x[1]}, int(x[0] > 0))


def test_a_bad_label_in_a_batch_adds_no_class():
    model = OnlineClassifier(mlp, seed=0)
    model.learn_many(pd.DataFrame({"a": [0.0, 1.0]}), pd.Series([0, 1]))
    before = learner_state(model)
    with pytest.raises(ValueError, match="row 4: the label is missing"):
        model.learn_many(pd.DataFrame({"a": [0.0, 1.0, 2.0]}), pd.Series([5.0, 1.0, np.nan]))
    assert model.classes_ == [0, 1]
    assert_same_state(before, learner_state(model))
    model.learn_many(pd.DataFrame({"a": [0.0, 1.0, 2.0]}), pd.Series([7, 5, 7]))
    assert model.classes_ == [0, 1, 7, 5]


def test_both_read_backs_give_the_same_values():
    """The stacked single-transfer read (used on accelerators) and the scalar reads (CPU)."""
    tensors = [torch.tensor(v) for v in (1.5, math.inf, math.nan, -2.0)]
    one = read_scalars(tensors, one_transfer=True)
    many = read_scalars(tensors, one_transfer=False)
    assert one[:2] == many[:2] == [1.5, math.inf] and one[3] == many[3] == -2.0
    assert math.isnan(one[2]) and math.isnan(many[2])


class _NoCopy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.output_layer = torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_layer(x)

    def __deepcopy__(self, memo: dict) -> None:
        raise TypeError("not copyable")


def test_a_module_that_cannot_be_copied_takes_l_init_from_its_own_first_losses():
    model = OnlineRegressor(_NoCopy(), scale_inputs=True, n_features=2, seed=0)
    assert model._initial is None
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 2, generator=g)
    losses = []
    for i in range(0, 32, 4):
        model.learn(X[i : i + 4], X[i : i + 4, 0])
        losses.append(model.last_loss)
    assert not model._monitor.warming_up
    assert model._monitor._init_sum / model._monitor._init_rows == pytest.approx(
        sum(losses) / len(losses), rel=1e-12
    )


# ---------------------------------------------------------------- inputs no step can use
def test_a_label_far_beyond_the_classes_is_an_error_naming_it():
    """y holds indices into classes_: 10**6 would make 1,000,001 output units for two rows.
    The error names the row, the index and what to do, and nothing grows; an index that
    implies at most MAX_IMPLIED_CLASSES unseen classes still adds them."""
    model = OnlineClassifier(mlp, n_features=3, seed=0)
    model.learn(torch.zeros(2, 3), torch.tensor([0, 1]))
    before = learner_state(model)
    with pytest.raises(ValueError, match=r"y\[1\] \(row 3\): class index 1,000,000 would make "
                                         r"1,000,001 classes .*999,997 of them never seen .*"
                                         r"declare the classes \(classes=\.\.\.\)"):
        model.learn(torch.zeros(3, 3), torch.tensor([0, 1_000_000, 5]))
    assert_same_state(before, learner_state(model))
    assert model.classes_ == [0, 1] and model.module.output_layer.out_features == 2
    top = 2 + MAX_IMPLIED_CLASSES  # classes 2..top-1 implied, top itself seen
    model.learn(torch.zeros(1, 3), torch.tensor([top]))
    assert len(model.classes_) == top + 1 == model.module.output_layer.out_features
    with pytest.raises(ValueError, match=r"1,001 of them never seen"):
        model.learn(torch.zeros(1, 3), torch.tensor([top + 2 + MAX_IMPLIED_CLASSES]))


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_complex_inputs_are_an_error_never_their_real_part(task):
    model = online_learner(mlp, n_features=2, task=task, seed=0)
    X = torch.tensor([[1.0 + 2.0j, 3.0 + 0.0j]])
    y = torch.tensor([1]) if task == "classification" else torch.tensor([0.5])
    with pytest.raises(TypeError, match=r"X must hold real numbers, got dtype torch.complex64"):
        model.learn(X, y)
    with pytest.raises(TypeError, match=r"X must hold real numbers"):
        model.predict(X)
    assert model.n_samples_seen == 0
    if task == "regression":
        with pytest.raises(TypeError, match=r"targets must be real numbers, got dtype "
                                            r"torch.complex128"):
            model.learn(torch.ones(1, 2), torch.tensor([0.5 + 1j], dtype=torch.complex128))


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_an_empty_batch_on_a_trained_learner_is_a_clear_error(task):
    """As the explainers and the dict / frame API: an empty batch is a ValueError saying so
    (it reached the divergence guard's row search as an IndexError), and changes nothing."""
    model = online_learner(mlp, n_features=2, task=task, seed=0)
    y = torch.tensor([0, 1]) if task == "classification" else torch.tensor([0.5, -1.0])
    model.learn(torch.randn(2, 2), y)
    before = learner_state(model)
    with pytest.raises(ValueError, match=r"X has no rows \(shape \[0, 2\]\)"):
        model.learn(torch.zeros(0, 2), y[:0])
    frame = pd.DataFrame({0: [], 1: []}, dtype=float)
    model_dict = online_learner(mlp, task=task, seed=0)
    model_dict.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 1.0]}), pd.Series(y.tolist()))
    with pytest.raises(ValueError, match=r"X has no rows|empty batch"):
        model_dict.learn_many(frame.rename(columns={0: "a", 1: "b"}), pd.Series([], dtype=float))
    assert_same_state(before, learner_state(model))
    assert model.n_samples_seen == 2 and model_dict.n_samples_seen == 2
