"""DriftReporter's parts beyond the importance test: the metric's recovery (hand-computed), the
distance between PD curves (closed forms), iPDP curves, ERICS partial alerts and CDLEEDS regions
in a report, feature groups, the callback and exact resume.

The stream of the integration checks is that of ``tests/test_drift_report.py``: x ~ N(0, I_3),
2,500 rows, batches of 10, label 1[x_0 > 0] before row 1,500 and 1[x_1 > 0] after it, an MLP
(hidden 16, lr 0.05), iPFI with the 0/1 loss at alpha 0.02 and a window of 1,000 rows.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from _report_steps import read, step
from torchstream import OnlineClassifier, Prequential
from torchstream.drift import ERICS
from torchstream.drift.cdleeds import CDLEEDS, LocalChangeMonitor
from torchstream.report.format import from_json
from torchstream.report.pd import pd_curves, pd_grids
from torchstream.report.stats import curve_difference
from torchstream.step import Batch
from torchstream.report.reporter import DriftReporter
from torchstream.explain.ipdp import IncrementalPDP
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.learners.scaling import RunningStandardizer
from torchstream.models import MLP
from torchstream.models.distributional import ProbitHead
from torchstream.streams import from_numpy

N, T, BATCH, WINDOW = 1500, 2500, 10, 1000


class _Stub:
    """An explainer with a fixed importance."""

    def __init__(self, d: int = 2) -> None:
        self.feature_names = [f"x{j}" for j in range(d)]
        self.alpha = 1.0
        self.value = torch.zeros(d)
        self.name = "stub"

    @property
    def importance(self) -> torch.Tensor:
        return self.value


def _regression_rows(rep: DriftReporter, errors: list[float]) -> None:
    """One row per batch with the absolute error ``errors[row]`` (squared error its square)."""
    for row, e in enumerate(errors):
        X = torch.tensor([[float(row % 2), 0.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([e]), None))


# ------------------------------------------------------------------------ recovery
def test_recovery_hand_computed():
    # squared errors: 1 before the known drift at row 4, then 9, 9, 4, 1, 1, ...; window 4, so
    # the recovery mean runs over window // 4 = 1 row: back at the before mean (1) at row 7,
    # i.e. at the end of the batch [7, 8): 8 - 4 = 4 rows after the drift
    rep = DriftReporter([_Stub()], window=4, settle=0, at=[4])
    _regression_rows(rep, [1, 1, 1, 1, 3, 3, 2, 1, 1, 1])
    (r,) = rep.reports
    assert r["metric_before"] == pytest.approx(1.0)
    assert r["metric_after"] == pytest.approx((9 + 9 + 4 + 1) / 4)
    # Welch: the before window has no spread, after: sd([9, 9, 4, 1]) / 2 = 1.97 < 4.75 / 1.96
    assert r["metric_dropped"]
    assert (r["recovered"], r["rows_to_recovery"]) == (True, 4)
    assert r["summary"].endswith("squared error 1 → 5.75, recovered after 4 rows")


def test_recovery_followed_until_the_horizon():
    rep = DriftReporter([_Stub()], window=4, settle=0, at=[4], horizon=10)
    _regression_rows(rep, [1, 1, 1, 1] + [3] * 9)
    (r,) = rep.reports
    assert r["recovered"] is None  # built at row 8, still followed
    _regression_rows_from(rep, 13, [3, 3])
    assert (r["recovered"], r["rows_to_recovery"]) == (False, 10)
    assert "not recovered after 10 rows" in r["summary"]


def _regression_rows_from(rep: DriftReporter, first: int, errors: list[float]) -> None:
    for i, e in enumerate(errors):
        row = first + i
        X = torch.tensor([[float(row % 2), 0.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([e]), None))


def test_no_drop_means_no_recovery_in_the_summary():
    rep = DriftReporter([_Stub()], window=4, settle=0, at=[4])
    _regression_rows(rep, [1, 2, 1, 2, 1, 2, 1, 2])
    (r,) = rep.reports
    assert not r["metric_dropped"]
    assert r["summary"].endswith("(no significant loss)")


# ------------------------------------------------------------------------ PD curve distance
def test_curve_difference_closed_forms():
    grid = [0.0, 1.0, 2.0]
    # a constant offset c: the level moves by c, the shape not at all
    assert curve_difference(grid, [0.0, 1.0, 2.0], grid, [0.5, 1.5, 2.5]) == pytest.approx(
        (0.0, 0.5))
    # slopes 0 and 1 on [0, 2], 50 even points: differences x, level mean(x) = 1, shape
    # RMS(x - 1) = the population standard deviation of the points
    x = np.linspace(0, 2, 50)
    assert curve_difference(grid, [0, 0, 0], grid, [0, 1, 2]) == pytest.approx(
        (float(np.std(x)), 1.0))
    # different grids: compared on the overlap [1, 2] only (both curves are y = x there)
    assert curve_difference([0.0, 2.0], [0.0, 2.0], [1.0, 3.0], [1.0, 3.0]) == pytest.approx(
        (0.0, 0.0))
    # categories (NaN grid): point by point, differences 0.3 and 0: level 0.15, shape 0.15
    nan = math.nan
    assert curve_difference([nan, nan], [0.1, 0.3], [nan, nan], [0.4, 0.3]) == pytest.approx(
        (0.15, 0.15))
    # nothing shared
    assert all(math.isnan(v) for v in curve_difference([0.0, 1.0], [0, 0], [2.0, 3.0], [0, 0]))


# ------------------------------------------------------------------------ integration
def _stream(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 3))
    y = (X[:, 0] > 0).astype(int)
    y[N:] = (X[N:, 1] > 0).astype(int)
    return from_numpy(X, y, task="classification")


@pytest.fixture(scope="module")
def full() -> tuple[DriftReporter, ERICS, list]:
    torch.manual_seed(0)
    stream = _stream()
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(16,)), lr=0.05, seed=0)
    ipfi = IncrementalPFI(None, "zero_one", 3, alpha=0.02, feature_names=stream.schema, seed=0)
    pdps = [IncrementalPDP(None, f, feature_names=stream.schema, alpha=0.02, seed=0)
            for f in ("x1", "x2")]
    erics = ERICS(ProbitHead(3, epochs=1), partial=True, window_mvg_average=20,
                  window_drift_detect=20)
    seen: list = []
    reporter = DriftReporter([ipfi], window=WINDOW, settle=0, at=[N], pdps=pdps,
                             on_report=seen.append)
    Prequential(learner, stream, batch_size=BATCH,
                plugins=[ipfi, *pdps, erics, reporter]).run()
    reporter.finish()
    return reporter, erics, seen


def test_pdp_curves_of_the_changed_feature(full):
    reporter, _, seen = full
    report = next(r for r in reporter.reports if r["detector"] == "known")
    assert seen and seen[0] is reporter.reports[0]  # the callback got the built report
    curves = {c["feature"]: c for c in report["curves"]}
    # the iPDPs' curves for x1 and x2, the model's PD over the last 200 rows for x0; the
    # features whose importance changed first
    assert set(curves) == {"x0", "x1", "x2"} and list(curves)[2] == "x2"
    assert (curves["x1"]["explainer"], curves["x0"]["explainer"]) == ("ipdp/x1", "pd")
    assert curves["x1"]["verdict_changed"] and curves["x0"]["verdict_changed"]
    assert not curves["x2"]["verdict_changed"]
    # before the drift the model ignores x_1 (a flat PD), after it P(y=1) rises with x_1:
    # the curve moves by a large part of the probability range, x_2's stays flat; x_0's PD
    # goes the other way (a step before, flat after)
    assert curves["x1"]["distance"] > 0.15
    assert curves["x2"]["distance"] < curves["x1"]["distance"] / 3
    pd_after = curves["x1"]["pd_after"]
    assert pd_after[-1] - pd_after[0] > 0.5  # increasing in x_1 after the drift
    x0 = curves["x0"]
    assert x0["pd_before"][-1] - x0["pd_before"][0] > 0.5  # the old rule: a step in x_0
    assert abs(x0["pd_after"][-1] - x0["pd_after"][0]) < 0.25  # ... gone after the drift
    assert x0["grid_before"] == x0["grid_after"]  # one grid, taken at the row
    by_feature = {c["feature"]: c for c in report["changes"]}
    assert by_feature["x1"]["pdp_distance"] == curves["x1"]["distance"]
    assert by_feature["x0"]["pdp_distance"] == curves["x0"]["distance"]


def test_erics_partial_alerts_name_the_features(full):
    reporter, erics, _ = full
    report = next(r for r in reporter.reports if r["detector"] == "known")
    # as a plug-in ERICS makes one update per batch of 10: update s ends at row 10 s + 9; the
    # report lists the features of the partial alerts near the drift, in [N - window // 4,
    # N + window // 4) (settle 0)
    names, near = ["x0", "x1", "x2"], WINDOW // 4
    want = {names[f] for s, f in erics.partial_alerts if N - near <= 10 * s + 9 < N + near}
    assert want  # this ERICS (short windows) raised partial alerts around the drift
    assert set(report["where"]["partial"]["erics"]) == want
    assert {c["feature"] for c in report["changes"] if c["partial_drift"]} == want
    assert "ERICS partial drift on" in report["summary"]
    # the detector's own alarms opened reports too, after the known one's rows they are built
    assert {r["detector"] for r in reporter.reports} == {"known", "erics"}


def test_json_round_trip_of_a_full_report(full):
    reporter, _, _ = full
    back = from_json(reporter.to_json())
    assert len(back) == len(reporter.reports)
    for a, b in zip(back, reporter.reports):
        assert a.keys() == b.keys()
        assert (a["summary"], a["changes"][0]["feature"], a["recovered"]) == (
            b["summary"], b["changes"][0]["feature"], b["recovered"])
        assert a["curves"][0]["pd_after"] == pytest.approx(b["curves"][0]["pd_after"])
    md = reporter.to_markdown({0: [("importance", "report/row1500_importance.png")]})
    assert "![importance](report/row1500_importance.png)" in md
    assert "- PD of `x1` (ipdp/x1, P(class 1)): its shape moved by" in md


# ------------------------------------------------------------------------ CDLEEDS regions
def test_cdleeds_regions_are_described_by_their_columns():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.2, 0.2], [0.8, 0.8]], dtype=torch.float64)
    stub = _Stub()
    stub.column_names = ["age", "salary"]
    det = CDLEEDS(max_depth=3)
    monitor = LocalChangeMonitor(det, monitored=2)
    rep = DriftReporter([stub], window=200, settle=0)

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x.sum(1))

    for t in range(1200):
        x = centres[t % 2].unsqueeze(0) + 0.05 * torch.randn(1, 2, generator=g,
                                                              dtype=torch.float64)
        # the output changes at row 600, near (0.8, 0.8) only
        out = model(x) + (0.2 if t >= 600 and t % 2 else 0.0)
        batch = Batch(t, t, x, torch.zeros(1), out, lambda z: model(z))
        monitor.on_batch(batch)
        step(rep, batch, **read(monitor))
    rep.finish()
    assert det.alerts and rep.reports
    # the first alarm comes within the first window: a warm-up, not a drift
    assert rep.reports[0]["kind"] == "warm-up" and rep.reports[0]["row"] < 200
    # the report of the change at row 600 (the output rose near (0.8, 0.8)): real
    report = next(r for r in rep.reports if r["row"] <= 600 < r["row"] + 200)
    assert report["kind"] == "real" and report["metric_dropped"]
    regions = report["where"]["regions"]
    assert regions
    assert all(set(r["centroid"]) == {"age", "salary"} for r in regions)
    assert any(r["centroid"]["age"] == pytest.approx(0.8, abs=0.1) for r in regions)
    assert regions[0]["distinctive"][0]["column"] in {"age", "salary"}
    assert "local change in" in report["summary"]
    # every alarm is a report's row or joined one (runs of consecutive rows as one entry)
    listed = {r["row"] for r in rep.reports} | {
        row for r in rep.reports for a in r["also"] for row in range(a["first"], a["last"] + 1)}
    assert listed == set(det.alerts)


# ------------------------------------------------------------------------ groups
def test_a_feature_of_several_columns_gets_its_most_moved_column():
    class _Grouped(_Stub):
        pass

    stub = _Grouped(2)
    stub.feature_names = ["colour", "size"]
    stub.column_names = ["colour=red", "colour=blue", "size"]

    class _Groups:
        members = ((0, 1), (2,))

    stub.groups = _Groups()
    rep = DriftReporter([stub], window=4, settle=0, at=[4])
    for row in range(8):
        red = 1.0 if row < 4 else 0.0  # every row red before the drift, blue after it
        X = torch.tensor([[red, 1.0 - red, float(row % 2)]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.zeros(1), None))
    (r,) = rep.reports
    colour = next(c for c in r["changes"] if c["feature"] == "colour")
    size = next(c for c in r["changes"] if c["feature"] == "size")
    # red: 1,1,1,1 -> 0,0,0,0, blue the mirror: no spread in either window, so |t| is infinite
    # for both columns and the first column wins the tie
    assert colour["input_column"] == "colour=red"
    assert colour["input_moved"] and math.isinf(colour["input_shift"])
    assert (size["input_column"], size["input_shift"], size["input_moved"]) == ("size", 0.0,
                                                                                False)


# ------------------------------------------------------------------------ resume
def test_resume_mid_recovery_gives_the_same_reports():
    errors = [1, 1, 1, 1, 3, 3, 3, 3, 3, 2, 1, 1]
    whole = DriftReporter([_Stub()], window=4, settle=0, at=[4])
    _regression_rows(whole, errors)
    first = DriftReporter([_Stub()], window=4, settle=0, at=[4])
    _regression_rows(first, errors[:9])  # built at row 8, recovery still followed
    assert first.reports and first.reports[0]["recovered"] is None
    resumed = DriftReporter([_Stub()], window=4, settle=0, at=[4])
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    _regression_rows_from(resumed, 9, errors[9:])
    strip = [{k: v for k, v in r.items() if k != "build_ms"} for r in resumed.reports]
    want = [{k: v for k, v in r.items() if k != "build_ms"} for r in whole.reports]
    assert strip == want and want[0]["recovered"] and want[0]["rows_to_recovery"] == 7


# ------------------------------------------------------------------------ ERICS input scaling
def test_erics_scale_inputs_is_the_standardised_stream():
    # ERICS(scale_inputs=True) on inputs of scale 1e5 equals ERICS on the same inputs
    # standardised by hand with the same running statistics (updated before each batch)
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.normal(size=(600, 3)) * np.array([1e5, 1.0, 30.0]) + 7.0)
    y = (X[:, 1] > 0).long()
    y[300:] = (X[300:, 2] > 7.0).long()
    a = ERICS(ProbitHead(3), partial=True, scale_inputs=True, window_mvg_average=5,
              window_drift_detect=5)
    b = ERICS(ProbitHead(3), partial=True, window_mvg_average=5, window_drift_detect=5)
    scaler = RunningStandardizer(3)
    for s in range(0, 600, 10):
        a.learn(X[s:s + 10], y[s:s + 10])
        scaler.update(X[s:s + 10])
        b.learn(scaler.transform(X[s:s + 10]), y[s:s + 10])
    assert a.alerts == b.alerts and a.partial_alerts == b.partial_alerts
    assert torch.equal(a.head.param_stats()[0], b.head.param_stats()[0])
    # exact resume, and the setting is checked
    half = ERICS(ProbitHead(3), partial=True, scale_inputs=True, window_mvg_average=5,
                 window_drift_detect=5)
    for s in range(0, 300, 10):
        half.learn(X[s:s + 10], y[s:s + 10])
    resumed = ERICS(ProbitHead(3), partial=True, scale_inputs=True, window_mvg_average=5,
                    window_drift_detect=5)
    resumed.load_state_dict(half.state_dict())
    for s in range(300, 600, 10):
        resumed.learn(X[s:s + 10], y[s:s + 10])
    assert resumed.alerts == a.alerts
    assert torch.equal(resumed.head.param_stats()[0], a.head.param_stats()[0])
    with pytest.raises(ValueError, match="scale_inputs"):
        b.load_state_dict(half.state_dict())


# ------------------------------------------------------------------------ min_effect, kind
def _constant_importance_run(min_effect: float, errors: list[float]) -> dict:
    stub = _Stub()
    rep = DriftReporter([stub], window=4, settle=0, at=[4], min_effect=min_effect)
    for row, e in enumerate(errors):
        stub.value = torch.tensor([1.0 if row < 4 else 1.03, 0.5])
        X = torch.tensor([[float(row % 2), 0.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([e]), None))
    (r,) = rep.reports
    return r


def test_min_effect_keeps_a_sure_but_tiny_change_unchanged():
    # no spread in either window: the intervals are points, 1.0 and 1.03 never overlap; the
    # change, 0.03, is below 5 % of the largest importance (1.03)
    flat = [1.0] * 8
    r = _constant_importance_run(0.05, flat)
    assert {c["feature"]: c["verdict"] for c in r["changes"]}["x0"] == "unchanged"
    assert r["kind"] == "none"
    r = _constant_importance_run(0.0, flat)
    assert {c["feature"]: c["verdict"] for c in r["changes"]}["x0"] == "gained"
    with pytest.raises(ValueError, match="min_effect"):
        DriftReporter([_Stub()], min_effect=1.0)


def test_same_inputs_predicted_worse_is_a_real_drift():
    # reliance unchanged (min_effect), inputs unchanged, squared error 1 -> 9: the relationship
    # changed
    r = _constant_importance_run(0.05, [1, 1, 1, 1, 3, 3, 3, 3])
    assert r["metric_dropped"] and not r["inputs_moved"]
    assert r["kind"] == "real"
    assert "but it predicts the same inputs worse (the relationship changed)" in r["summary"]


def test_cdleeds_on_standardised_inputs_reports_regions_in_input_units():
    # two blobs whose columns differ in scale by 10^6: raw RBF similarities would see one
    # column only; standardised, CDLEEDS separates the blobs, and the report gives the changed
    # blob's centroid in the inputs' units
    g = torch.Generator().manual_seed(1)
    centres = torch.tensor([[2e5, 0.2], [8e5, 0.8]], dtype=torch.float64)
    spread = torch.tensor([5e3, 0.05], dtype=torch.float64)
    stub = _Stub()
    stub.column_names = ["salary", "rate"]

    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x[:, 1])

    def run(rows: range, monitor: LocalChangeMonitor, rep: DriftReporter | None) -> None:
        for t in rows:
            x = centres[t % 2].unsqueeze(0) + spread * torch.randn(1, 2, generator=g,
                                                                    dtype=torch.float64)
            out = model(x) + (0.2 if t >= 600 and t % 2 else 0.0)
            batch = Batch(t, t, x, torch.zeros(1), out, model)
            monitor.on_batch(batch)
            if rep is not None:
                step(rep, batch, **read(monitor))

    monitor = LocalChangeMonitor(CDLEEDS(max_depth=3), monitored=2, scale_inputs=True)
    rep = DriftReporter([stub], window=200, settle=0)
    run(range(1200), monitor, rep)
    rep.finish()
    assert monitor.detector.alerts
    (top, *_) = rep.reports[0]["where"]["regions"]
    assert top["centroid"]["salary"] == pytest.approx(8e5, rel=0.05)
    assert top["centroid"]["rate"] == pytest.approx(0.8, abs=0.05)
    # exact resume with the scaler, and the setting is checked
    first = LocalChangeMonitor(CDLEEDS(max_depth=3), monitored=2, scale_inputs=True)
    g.manual_seed(2)
    run(range(300), first, None)
    state = first.state_dict()
    again = LocalChangeMonitor(CDLEEDS(max_depth=3), monitored=2, scale_inputs=True)
    again.load_state_dict(state)
    assert again.scaler is not None and torch.equal(again.scaler.mean, first.scaler.mean)
    for m in (first, again):
        g.manual_seed(3)
        run(range(300, 700), m, None)
    assert again.detector.alerts == first.detector.alerts
    assert torch.equal(again.detector.leaf_centroids, first.detector.leaf_centroids)
    with pytest.raises(ValueError, match="scale_inputs"):
        LocalChangeMonitor(CDLEEDS(max_depth=3), monitored=2).load_state_dict(state)


# ------------------------------------------------------------------------ PD at one moment
def test_pd_curves_closed_forms():
    g = torch.Generator().manual_seed(0)
    n = 50
    value = torch.rand(n, generator=g, dtype=torch.float64) * 10
    cat = torch.randint(0, 3, (n,), generator=g)
    onehot = torch.nn.functional.one_hot(cat, 3).to(torch.float64)
    missing = (torch.arange(n) % 5 == 0).to(torch.float64)
    rows = torch.cat([value[:, None], onehot, (value * (1 - missing))[:, None], missing[:, None]],
                     1)
    columns = ["v", "c=a", "c=b", "c=z", "m", "m:missing"]
    groups = {"v": [0], "c": [1, 2, 3], "m": [4, 5]}
    w = torch.tensor([2.0, 1.0, -1.0, 5.0, 0.5, 7.0], dtype=torch.float64)

    def model(X: torch.Tensor) -> torch.Tensor:
        return X @ w  # [n]: the PD is the output itself

    grids = pd_grids(rows, ["v", "c", "m"], groups, columns, 5)
    curves = pd_curves(model, rows, grids, chunk=37)  # chunks that split the blocks
    base = rows @ w
    # numeric: 5 quantiles 5 %..95 % of v; PD(g) = mean(f) + 2 (g - mean(v))
    qs = torch.quantile(value, torch.linspace(0.05, 0.95, 5, dtype=torch.float64))
    assert curves["v"]["grid"] == pytest.approx(qs.tolist())
    want = [float(base.mean() + 2 * (q - value.mean())) for q in qs]
    assert curves["v"]["pd"] == pytest.approx(want)
    # categorical: the block set to each category; labels without the "c=" prefix
    assert curves["c"]["labels"] == ["a", "b", "z"]
    rest = base - onehot @ w[1:4]
    assert curves["c"]["pd"] == pytest.approx([float(rest.mean() + w[1 + k]) for k in range(3)])
    assert all(math.isnan(v) for v in curves["c"]["grid"])
    # nullable: the value grid (present values only) with the indicator 0, then "missing"
    present = value[missing == 0]
    assert curves["m"]["labels"][-1] == "missing" and math.isnan(curves["m"]["grid"][-1])
    other = base - rows[:, 4] * 0.5 - rows[:, 5] * 7.0
    assert curves["m"]["pd"][-1] == pytest.approx(float(other.mean() + 0.5 * present.mean() + 7))
    q0 = float(torch.quantile(present, 0.05))
    assert curves["m"]["pd"][0] == pytest.approx(float(other.mean() + 0.5 * q0))


def test_pd_rows_are_the_last_rows_seen():
    rep = DriftReporter([_Stub()], window=4, settle=0, pd_rows=5)
    for row in range(13):  # batches of one row; then one batch of 7 rows
        X = torch.tensor([[float(row), 0.0]])
        step(rep, Batch(row, row, X, torch.zeros(1), torch.zeros(1), None))
    assert sorted(rep._rows[:, 0].tolist()) == [8.0, 9.0, 10.0, 11.0, 12.0]
    X = torch.tensor([[float(r), 0.0] for r in range(13, 20)])
    step(rep, Batch(13, 13, X, torch.zeros(7), torch.zeros(7), None))
    assert sorted(rep._rows[:, 0].tolist()) == [15.0, 16.0, 17.0, 18.0, 19.0]
    again = DriftReporter([_Stub()], window=4, settle=0, pd_rows=5)
    again.load_state_dict(json.loads(json.dumps(rep.state_dict())))
    assert torch.equal(again._rows, rep._rows)


def test_pd_of_several_classes_shows_the_class_predicted_most():
    # three classes, the model predicts class 2 for most rows: the computed PD curves show
    # P(class 2) (named in the curve), the same class at the alarm and after it
    def model(X: torch.Tensor) -> torch.Tensor:
        logits = torch.stack([X[:, 0], -X[:, 0], 2.0 + 0.0 * X[:, 0]], 1)
        return torch.softmax(logits, 1)

    stub = _Stub()
    rep = DriftReporter([stub], window=4, settle=0, at=[4], pd_rows=8, pd_grid=3)
    g = torch.Generator().manual_seed(0)
    for row in range(8):
        X = torch.randn(1, 2, generator=g, dtype=torch.float64)
        step(rep, Batch(row, row, X, torch.zeros(1), model(X), model))
    (r,) = rep.reports
    curve = next(c for c in r["curves"] if c["feature"] == "x0")
    assert curve["output"] == "P(class 2)" and curve["explainer"] == "pd"
    rows = rep._rows
    for g_value, pd in zip(curve["grid_after"], curve["pd_after"]):
        Z = rows.clone()
        Z[:, 0] = g_value
        assert pd == pytest.approx(float(model(Z)[:, 2].mean()))


def test_single_rows_join_into_entries_of_a_hundredth_window():
    # window 1,000: batches of one row join into entries of 10 rows, so the deque holds at most
    # (2 window + settle) / 10 entries (+ the one being filled) whatever the batch size
    def feed(rep: DriftReporter, rows: range) -> None:
        for row in rows:
            X = torch.tensor([[float(row % 7), 1.0]], dtype=torch.float64)
            step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([float(row % 3)]),
                               None))

    whole = DriftReporter([_Stub()], window=1000, settle=500, at=[2000])
    assert whole.block == 10
    feed(whole, range(4000))
    assert len(whole._entries) <= (2 * 1000 + 500) // 10 + 1
    assert all(e["end"] - e["start"] == 10 for e in list(whole._entries)[:-1])
    (r,) = whole.reports
    assert (r["rows_before"], r["rows_after"]) == (1000, 1000)  # the blocks meet the edges
    # the mean squared error over the windows is that of every row (row % 3: 0, 1, 4)
    want = sum(float(v % 3) ** 2 for v in range(1000, 2000)) / 1000
    assert r["metric_before"] == pytest.approx(want)
    # stopped inside a block and resumed: the same report
    first = DriftReporter([_Stub()], window=1000, settle=500, at=[2000])
    feed(first, range(2505))
    again = DriftReporter([_Stub()], window=1000, settle=500, at=[2000])
    again.load_state_dict(json.loads(json.dumps(first.state_dict())))
    feed(again, range(2505, 4000))
    strip = [{k: v for k, v in x.items() if k != "build_ms"} for x in again.reports]
    assert strip == [{k: v for k, v in x.items() if k != "build_ms"} for x in whole.reports]
