"""Every public learner, explainer, drift detector and feature selector fits its contract
(:mod:`torchstream.base`): the protocol, one return convention, ``importance`` a tensor ``[d]``,
``alerts`` in rows, ``clone()`` unfitted with the same arguments, a state round trip."""

from __future__ import annotations

import math

import pytest
import torch
from river import linear_model

from torchstream.base import (
    Base,
    DriftDetector,
    Explainer,
    FeatureSelector,
    Learner,
    Plugin,
    PluginBase,
    Sink,
    SinkBase,
    as_plugin,
    as_sink,
)
from torchstream.drift import (
    CDLEEDS,
    ERICS,
    ErrorDetector,
    LabelFreeERICS,
    LocalChangeMonitor,
    PDPDriftDetector,
)
from torchstream.evaluate import Evaluator
from torchstream.step import Batch
from torchstream.explain import IncrementalPDP, IncrementalPFI, IncrementalSAGE
from torchstream.learners import OnlineClassifier, RiverLearner
from torchstream.models.distributional import ProbitHead
from torchstream.select import FIRES, FIRESSelector
from torchstream.sinks import History
from torchstream.streams import from_numpy
from torchstream.trees import DynamicModelTree

D, B = 3, 10
W = torch.tensor([1.0, -2.0, 0.0], dtype=torch.float64)


def linear(Z: torch.Tensor) -> torch.Tensor:
    return Z @ W.to(Z.dtype)


def batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        X = torch.randn(B, D, generator=g, dtype=torch.float64)
        out.append((X, (X[:, 0] > 0).long()))
    return out


# ---------------------------------------------------------------------------- explainers
EXPLAINERS = {
    "ipfi": lambda: IncrementalPFI(linear, "mse", D, alpha=0.1, seed=0),
    "isage": lambda: IncrementalSAGE(linear, "mse", D, alpha=0.1, seed=0),
    "ipdp": lambda: IncrementalPDP(linear, 1, grid_size=5, alpha=0.1, grid="fixed",
                                   fixed_range=(-1.0, 1.0)),
}


@pytest.mark.parametrize("name", sorted(EXPLAINERS))
def test_explainer_contract(name):
    exp = EXPLAINERS[name]()
    assert isinstance(exp, Explainer) and isinstance(exp, Plugin)
    data = batches(6)
    for X, _ in data[:4]:
        exp.explain(X, linear(X))  # the model is exact: only its features add loss
    imp = exp.importance
    assert isinstance(imp, torch.Tensor) and imp.shape == (D,)
    assert exp.importance_dict() == pytest.approx(dict(zip(exp.feature_names, imp.tolist())),
                                                  nan_ok=True)
    if name == "ipdp":  # one feature explained; the PD of x1 is -2 z on 5 points of [-1, 1]
        expected = 2 * 0.5 * math.sqrt(5 * 6 / 12)  # |beta| (b - a) / (m - 1) sqrt(m(m+1)/12)
        assert imp[1].item() == pytest.approx(expected, rel=1e-9)
        assert math.isnan(imp[0]) and math.isnan(imp[2])
    elif name == "ipfi":  # x2 does not enter the model: permuting it changes no loss
        assert imp[2].item() == 0.0 and imp[1].item() > imp[0].item() > 0
    else:  # SAGE: x1 (weight -2) dominates; x2's value is sampling noise
        assert imp[1].item() > max(abs(imp[0].item()), abs(imp[2].item()))
    fresh = exp.clone()
    assert type(fresh) is type(exp) and fresh._settings() == exp._settings()
    assert fresh.n_explained == 0 and fresh._get_params().keys() == exp._get_params().keys()
    fresh.load_state_dict(exp.state_dict())
    for X, _ in data[4:]:
        exp.explain(X, linear(X))
        fresh.explain(X, linear(X))
    torch.testing.assert_close(fresh.importance, exp.importance, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------------------- detectors
class _Threshold:
    """A river-style change detector: alarms when a value exceeds 0.5."""

    def __init__(self) -> None:
        self.drift_detected = False

    def update(self, x: float) -> None:
        self.drift_detected = x > 0.5


class _Third:
    """A river-style change detector that alarms at its third update."""

    def __init__(self) -> None:
        self.n, self.drift_detected = 0, False

    def update(self, x: float) -> None:
        self.n += 1
        self.drift_detected = self.n == 3


def test_error_detector_alerts_are_rows():
    det = ErrorDetector(_Threshold())
    assert isinstance(det, DriftDetector) and isinstance(det, PluginBase)
    y = torch.zeros(B, dtype=torch.long)
    right = torch.tensor([[0.9, 0.1]]).expand(B, 2)
    wrong = right.clone()
    wrong[4] = torch.tensor([0.1, 0.9])  # row 4 of the third batch is mispredicted
    for p in (right, right, wrong):
        assert det.observe(y, p) is None
    assert det.alerts == [24] and det.drift_detected
    twin = det.clone()
    assert twin.alerts == [] and twin.n_rows == 0 and twin._settings() == det._settings()
    twin.load_state_dict(det.state_dict())
    assert twin.alerts == [24] and twin.n_rows == 30
    plug = ErrorDetector(_Threshold())  # as a plug-in: stream rows from Batch.start
    plug.on_batch(Batch(7, 100, torch.zeros(B, 1), y, wrong, None))
    assert plug.alerts == [104] and plug.drift_steps == [7]


def test_pdp_drift_detector_alerts_are_rows():
    det = PDPDriftDetector(EXPLAINERS["ipdp"](), _Third())
    assert isinstance(det, DriftDetector)
    for X, y in batches(4):
        assert det.explain(X, y) is None
    assert det.alerts == [29] and det.drift_positions == [30]
    fresh = det.clone()
    assert fresh.alerts == [] and fresh.explainer.n_explained == 0
    fresh.load_state_dict(det.state_dict())
    assert fresh.alerts == [29]


def test_erics_alerts_are_rows():
    erics = ERICS(window_mvg_average=1, window_drift_detect=1, warm_up=0, refractory=0,
                  partial=False)
    assert isinstance(erics, DriftDetector)
    mu, sigma = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    for t in range(4):  # a jump of the mean at the third snapshot only
        assert erics.observe(mu + (3.0 if t == 2 else 0.0), sigma, rows=B) is None
    assert 2 in erics.alert_steps
    assert erics.alerts == [s * B + B - 1 for s in erics.alert_steps]
    assert [a for a, s in zip(erics.alerts, erics.alert_steps) if s == 2] == [29]
    fresh = erics.clone()
    assert fresh.alerts == [] and fresh.n_updates == 0 and fresh._settings() == erics._settings()
    fresh.load_state_dict(erics.state_dict())
    assert fresh.alerts == erics.alerts and fresh.alert_steps == erics.alert_steps


def test_erics_with_head_counts_the_batch_rows():
    erics = ERICS(ProbitHead(D, epochs=2), window_mvg_average=2, window_drift_detect=2,
                  warm_up=0, refractory=0)
    for X, y in batches(30):
        assert erics.learn(X, y) is None
    assert erics.n_rows == 30 * B and erics.alert_steps
    assert erics.alerts == [s * B + B - 1 for s in erics.alert_steps]
    fresh = erics.clone()  # the head as it was built, not as it was trained
    assert fresh.n_updates == 0
    assert torch.equal(fresh.head.param_stats()[0], ProbitHead(D, epochs=2).param_stats()[0])


def test_cdleeds_alerts_are_rows():
    g = torch.Generator().manual_seed(0)
    det = CDLEEDS(max_depth=3)
    assert isinstance(det, DriftDetector)
    centres = torch.tensor([[0.2, 0.2], [0.8, 0.8]], dtype=torch.float64)
    for t in range(120):
        x = centres[torch.arange(B) % 2] + 0.05 * torch.randn(B, 2, generator=g,
                                                               dtype=torch.float64)
        shift = 0.5 * (torch.arange(B) % 2) if t >= 60 else torch.zeros(B)
        assert det.observe(x, torch.sigmoid(x.sum(1)) + shift) is None
    assert det.alert_steps and det.n_rows == 120 * B
    assert det.alerts == [s * B + B - 1 for s in det.alert_steps]
    fresh = det.clone()
    assert fresh.alerts == [] and fresh.n_updates == 0 and fresh._settings() == det._settings()
    fresh.load_state_dict(det.state_dict())
    assert fresh.alerts == det.alerts


def test_label_free_erics_contract():
    det = LabelFreeERICS(D, seed=0, warm_up=0)
    assert isinstance(det, DriftDetector) and isinstance(det, PluginBase)
    for X, _ in batches(5):
        assert det.learn(X.float()) is None
    assert det.erics.n_rows == 5 * B
    assert det.alerts == [s * B + B - 1 for s in det.alert_steps]
    fresh = det.clone()
    assert fresh.erics.n_updates == 0 and fresh._settings() == det._settings()
    fresh.load_state_dict(det.state_dict())
    assert fresh.erics.n_updates == 5


def test_local_change_monitor_reports_stream_rows():
    mon = LocalChangeMonitor(CDLEEDS(max_depth=2, window=8), monitored=4)
    assert isinstance(mon, PluginBase) and mon.alerts == []
    assert isinstance(mon.clone().detector, CDLEEDS)


# ---------------------------------------------------------------------------- selectors
def test_fires_contract():
    fires = FIRES(ProbitHead(D), n_selected=1)
    assert isinstance(fires, FeatureSelector) and isinstance(fires, Base)
    data = batches(6)
    for X, y in data[:4]:
        assert fires.learn(X, y) is None
    assert fires.weights.shape == (D,) and fires.mask.tolist() == [True, False, False]
    fresh = fires.clone()
    assert fresh.n_updates == 0 and fresh.selected is None
    assert fresh._settings() == fires._settings()
    fresh.load_state_dict(fires.state_dict())
    for X, y in data[4:]:
        fires.learn(X, y)
        fresh.learn(X, y)
    assert torch.equal(fresh.weights, fires.weights)


def test_fires_selector_contract():
    sel = FIRESSelector(FIRES(ProbitHead(D), n_selected=1), baseline=-1.0)
    assert isinstance(sel, FeatureSelector) and isinstance(sel, PluginBase)
    X, y = batches(1)[0]
    assert sel.learn(X, y) is None
    assert sel.mask.tolist() == [True, False, False]
    assert sel.scalars()["fires/stability"] != sel.scalars()["fires/stability"]  # nan: 1 of 10
    fresh = sel.clone()
    assert fresh.fires.n_updates == 0 and fresh.mask is None
    fresh.load_state_dict(sel.state_dict())
    assert torch.equal(fresh.transform(X, 0), sel.transform(X, 0))


# ---------------------------------------------------------------------------- learners
def _stream():
    X, _ = batches(1)[0]
    return from_numpy(X.numpy(), (X[:, 0] > 0).long().numpy(), task="classification")


@pytest.mark.parametrize("make", [
    lambda: RiverLearner.for_stream(linear_model.LogisticRegression(), _stream()),
    lambda: DynamicModelTree(n_classes=2),
], ids=["river", "dmt"])
def test_learner_contract(make):
    learner = make()
    assert isinstance(learner, Learner)
    X, y = batches(1)[0]
    assert learner.learn(X.float(), y) is None
    assert learner(X.float()).shape == (B, 2)


def test_online_learner_learn_returns_none_and_keeps_the_loss():
    learner = OnlineClassifier(torch.nn.Linear(D, 2), classes=[0, 1])
    X, y = batches(1)[0]
    assert math.isnan(learner.last_loss)
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(learner.module(X.float()), y).item()
    assert learner.learn(X.float(), y) is None
    assert learner.last_loss == pytest.approx(expected, rel=1e-6)
    assert isinstance(learner, Learner)


def test_river_learner_clone_and_classes():
    learner = RiverLearner.for_stream(linear_model.LogisticRegression(), _stream())
    X, y = batches(1)[0]
    learner.learn(X.float(), y)
    fresh = learner.clone()
    assert fresh.n_classes == learner.n_classes and fresh.model.weights == {}
    with pytest.raises(ValueError, match="3 classes"):
        learner.register_classes(["a", "b", "c"])


# ---------------------------------------------------------------------------- plug-ins, sinks
def test_foreign_plugins_and_sinks_are_wrapped_once():
    class OnlyBatch:
        def __init__(self) -> None:
            self.steps: list[int] = []

        def on_batch(self, batch):
            self.steps.append(batch.step)
            return {"seen": float(len(self.steps))}

    class PlainSink:
        def __init__(self) -> None:
            self.steps: list[int] = []

        def log_config(self, config):
            pass

        def log_scalars(self, step, scalars):
            self.steps.append(step)

        def close(self):
            pass

    foreign, sink = OnlyBatch(), PlainSink()
    assert isinstance(sink, Sink) and not isinstance(sink, SinkBase)
    wrapped = as_plugin(foreign)
    assert wrapped.figures() == {} and wrapped.drift_detected is False
    assert as_sink(History()) is not None and as_plugin(DynamicModelTree(2)).plugin.name == "dmt"
    with pytest.raises(TypeError, match="on_batch"):
        as_plugin(object())
    learner = RiverLearner.for_stream(linear_model.LogisticRegression(), _stream())
    X, y = batches(3)[0]
    stream = from_numpy(X.numpy(), y.numpy(), task="classification")
    ev = Evaluator(learner, stream, batch_size=2, plugins=[foreign], sinks=[sink],
                   figure_every=2)
    ev.run()
    assert foreign.steps == [0, 1, 2, 3, 4] and sink.steps == [2, 4, 6, 8, 10]  # rows seen
    state = ev.state_dict()
    assert state["plugins"] == {"only_batch": {}} and state["sinks"] == {"0": {}}


def test_runner_logs_last_loss_and_registers_classes():
    from torchstream.base import LearnerBase

    class Constant(LearnerBase):
        """Predicts class 0 with probability 0.75; its loss is the batch's size."""

        def __init__(self) -> None:
            self.seen = 0

        def __call__(self, X: torch.Tensor) -> torch.Tensor:
            return torch.tensor([[0.75, 0.25]]).expand(X.shape[0], 2)

        def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
            self.seen += X.shape[0]
            self.last_loss = float(X.shape[0])

    X, y = batches(1)[0]
    history = History()
    Evaluator(Constant(), from_numpy(X.numpy(), y.numpy(), task="classification"),
              batch_size=4, sinks=[history]).run()
    assert history.values("learner/loss") == [4.0, 4.0, 2.0]  # 10 rows in batches of 4
    labels = torch.tensor([0, 1, 2] * 3 + [0])  # three classes, a two-column river learner
    stream = from_numpy(X.numpy(), labels.numpy(), task="classification")
    small = RiverLearner(linear_model.LogisticRegression(), stream.schema, n_classes=2)
    with pytest.raises(ValueError, match="3 classes"):
        Evaluator(small, stream, batch_size=4)
