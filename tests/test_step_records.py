"""The step record as plug-ins read it: ``on_record`` comes after every plug-in's batch and
before the learner learns; the record carries each detector's alarms, partial alerts and
regions; the drift report opens its reports from the records alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _report_steps import step
from torchstream import OnlineClassifier, Prequential
from torchstream.base import PluginBase
from torchstream.drift import ERICS
from torchstream.drift.cdleeds import CDLEEDS, LocalChangeMonitor
from torchstream.models import MLP
from torchstream.models.distributional import ProbitHead
from torchstream.report.reporter import DriftReporter
from torchstream.sinks import History
from torchstream.step import Batch, StepRecord
from torchstream.streams import from_numpy, make_synthetic


class _Watch(PluginBase):
    """Keeps each record it is given, the learner's first weight then, and every detector's
    outcome as read from the detectors themselves."""

    name = "watch"

    def __init__(self, detectors: dict[str, object]) -> None:
        self.detectors = detectors
        self.records: list[StepRecord] = []
        self.weights: list[torch.Tensor] = []
        self.seen: list[dict[str, object]] = []
        self.learner: object = None

    def on_batch(self, batch: Batch) -> None:
        self.learner = batch.learner

    def on_record(self, record: StepRecord) -> None:
        self.records.append(record)
        self.weights.append(next(self.learner.module.parameters()).detach().clone())
        self.seen.append({
            name: (list(d.new_alerts), list(d.new_partial_alerts),
                   None if d.new_regions is None else d.new_regions.clone())
            for name, d in self.detectors.items()})


class _Weights(PluginBase):
    """The learner's first weight at each batch (before it learns the batch)."""

    name = "weights"

    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []

    def on_batch(self, batch: Batch) -> None:
        self.weights.append(next(batch.learner.module.parameters()).detach().clone())


def _stream(n: int = 1600, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] > 0).astype(int)
    y[n // 2:] = (X[n // 2:, 1] > 0).astype(int)
    return from_numpy(X, y, task="classification")


def test_on_record_sees_the_model_before_it_learns_and_the_detectors_outcome():
    torch.manual_seed(0)
    stream = _stream()
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(8,)), lr=0.05, seed=0)
    erics = ERICS(ProbitHead(3, epochs=1), partial=True, window_mvg_average=5,
                  window_drift_detect=5, warm_up=0, refractory=0)
    monitor = LocalChangeMonitor(CDLEEDS(max_depth=3), monitored=4, name="monitor")
    before = _Weights()
    watch = _Watch({"erics": erics, "monitor": monitor})
    history = History()
    Prequential(learner, stream, batch_size=10, plugins=[before, erics, monitor, watch],
                sinks=[history], log_every=4).run()
    records = watch.records
    assert len(records) == 160 and [r.start for r in records] == list(range(0, 1600, 10))
    # before learning: the model of each on_record is the one its batch was tested with
    for w_batch, w_record in zip(before.weights, watch.weights):
        assert torch.equal(w_batch, w_record)
    assert any(not torch.equal(a, b) for a, b in zip(watch.weights, watch.weights[1:]))
    # the loss is not known yet; every detector has an entry in alerts, partial only ERICS
    assert all(r.loss is None for r in records)
    for r, seen in zip(records, watch.seen):
        assert set(r.alerts) == {"erics", "monitor"} and set(r.partial_alerts) == {"erics"}
        for name, (alerts, partial, regions) in seen.items():
            assert list(r.alerts[name]) == alerts
            if name == "erics":
                assert list(r.partial_alerts[name]) == partial
            if regions is None:
                assert name not in r.regions
            else:
                assert torch.equal(r.regions[name], regions)
    # the run raised alarms, partial alerts and regions, each in the record of its step
    assert erics.alerts == [row for r in records for row in r.alerts["erics"]]
    assert [(s, k) for s, k in erics.partial_alerts] == [
        (i, k) for i, r in enumerate(records) for k in r.partial_alerts["erics"]]
    assert erics.partial_alerts and monitor.alerts
    with_regions = [r for r in records if "monitor" in r.regions]
    assert with_regions and all(r.alerts["monitor"] for r in with_regions)
    # a region is a centroid of a changed leaf, in the inputs' units (3 columns)
    assert all(r.regions["monitor"].shape[1] == 3 for r in with_regions)
    # the sinks get the same records with the loss of a logged step filled in
    logged = [r for r in records if r.logged]
    assert len(logged) == 40 and len(history.values("learner/loss")) == 40


def test_a_foreign_plugin_gets_the_record_through_its_adapter():
    class Foreign:
        def __init__(self) -> None:
            self.stops: list[int] = []

        def on_batch(self, batch: Batch) -> None:
            pass

        def on_record(self, record: StepRecord) -> None:
            self.stops.append(record.stop)

    foreign = Foreign()
    stream = make_synthetic("sea-drift", n_samples=100, seed=0)
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(4,)), seed=0)
    Prequential(learner, stream, batch_size=25, plugins=[foreign]).run()
    assert foreign.stops == [25, 50, 75, 100]


class _Fixed:
    name = "fixed"
    alpha = 1.0

    def __init__(self) -> None:
        self.feature_names = ["a", "b"]
        self.importance = torch.zeros(2)


def _rows(rep: DriftReporter, n: int, **record: object) -> None:
    for row in range(n):
        X = torch.tensor([[float(row % 2), 1.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([0.5]), None),
             **{k: v(row) for k, v in record.items()})


def test_the_report_opens_at_the_records_alarms_and_known_drifts():
    # alarms of two detectors at rows 5 and 30 (far apart: two changes), a known drift at
    # row 50 and a row of at= (60): four reports, each at its row, named by its source
    rep = DriftReporter([_Fixed()], window=4, settle=0, at=[60])
    _rows(rep, 80, alerts=lambda r: {"one": [5] if r == 6 else [], "two": [30] if r == 30 else []},
          known=lambda r: [50] if r == 50 else [])
    assert [(r["row"], r["detector"]) for r in rep.reports] == [
        (5, "one"), (30, "two"), (50, "known"), (60, "known")]
    # detectors= restricts the alarms read; a known drift of the stream and a row of at= that
    # coincide open one report
    only = DriftReporter([_Fixed()], detectors=["two"], window=4, settle=0, at=[50])
    _rows(only, 80, alerts=lambda r: {"one": [5] if r == 6 else [], "two": [30] if r == 30 else []},
          known=lambda r: [50] if r == 50 else [])
    assert [(r["row"], r["detector"]) for r in only.reports] == [(30, "two"), (50, "known")]


def test_the_report_names_partial_alerts_and_regions_of_the_records():
    rep = DriftReporter([_Fixed()], window=8, settle=0)
    rep.explainers[0].column_names = ["a", "b"]
    _rows(rep, 40, alerts=lambda r: {"det": [20] if r == 20 else [], "erics": []},
          partial=lambda r: {"erics": [1] if r == 21 else []},
          regions=lambda r: {"det": torch.tensor([[1.0, 1.0]])} if r == 20 else {})
    (report,) = rep.reports
    assert report["where"]["partial"] == {"erics": ["b"]}
    (region,) = report["where"]["regions"]
    assert (region["detector"], region["row"], region["centroid"]) == ("det", 20,
                                                                      {"a": 1.0, "b": 1.0})
    # column 0 alternates 0, 1 (mean ~0.5, sd ~0.5), column 1 is constant: a is distinctive
    assert region["distinctive"][0]["column"] == "a"
    assert [c["partial_drift"] for c in report["changes"] if c["feature"] == "b"] == [True]


def test_a_record_without_its_batch_is_an_error():
    rep = DriftReporter([_Fixed()], window=4, settle=0)
    with pytest.raises(ValueError, match="on_record follows on_batch of the same batch"):
        rep.on_record(StepRecord(0, 0, 10))
    step(rep, Batch(0, 0, torch.zeros(10, 2), torch.zeros(10), torch.zeros(10), None))
    with pytest.raises(ValueError, match="rows 10-19"):
        rep.on_record(StepRecord(1, 10, 20))
    with pytest.raises(ValueError, match="recorded last is none"):  # one record per batch
        rep.on_record(StepRecord(0, 0, 10))


def test_an_alarm_within_the_settle_joins_the_change_it_follows():
    # window 4, settle 10: alarms at rows 20, 27 (past the before window, inside the settle:
    # the model adapting to the change at 20) and 33 (past both: a change of its own, before
    # the first report's after window [30, 34) is complete)
    rep = DriftReporter([_Fixed()], window=4, settle=10)
    _rows(rep, 60, alerts=lambda r: {"det": [r] if r in (20, 27, 33) else []})
    assert [r["row"] for r in rep.reports] == [20, 33]
    (joined,) = rep.reports[0]["also"]
    assert (joined["first"], joined["last"]) == (27, 27)
    assert joined["note"] == ("while the model adapts to the change at row 20 (10 rows, the "
                              "settle, have not passed since)")
    assert rep.reports[0]["cut_at"] == 33  # the next change ends its windows
    assert rep.reports[0]["rows_after"] == 3  # rows 30, 31, 32
