"""DriftReporter: importance changes, input shifts and the metric around a drift row.

Streams: x ~ N(0, I_3), 2,500 rows, batches of 10, known drift at row N = 1,500; the label is
1[x_0 > 0] (before N) and, in the real-drift stream, 1[x_1 > 0] after N. The learner is a small
MLP (hidden 16, lr 0.05) explained by iPFI with the 0/1 loss and alpha = 0.02.

Tolerances: the report's window is 1,000 rows, not the default 2 / alpha = 100. With 100 rows
the explainer's EMA has turned over but the *learner* has not yet relearned the new rule
(accuracy 0.52 in the 100 rows after N), so iPFI of x_1 is still ~0 and the report rightly says
"unchanged"; after 1,000 rows the MLP is back at ~0.9 accuracy. With this window the intervals
separate by 2.9x (x_1) and 5.0x (x_0) their combined half-widths on seed 0, and the three
stream checks gave the same kinds and verdicts on seeds 0-3. The virtual shift (+1 on x_2) is
~22 standard errors of Welch's t with 1,000 rows a side, far beyond the Bonferroni quantile 2.39.
The detector check replaces the known row with a DDM alarm on the learner's 0/1 errors.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
import torch

from river import drift

from _report_steps import step
from torchstream import OnlineClassifier, Prequential
from torchstream.drift import ErrorDetector
from torchstream.step import Batch
from torchstream.report.reporter import DriftReporter
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.models import MLP
from torchstream.streams import from_numpy

N, T, BATCH, WINDOW = 1500, 2500, 10, 1000


def _run(kind: str, seed: int = 0, detect: bool = False) -> DriftReporter:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 3))
    y = (X[:, 0] > 0).astype(int)
    if kind == "real":
        y[N:] = (X[N:, 1] > 0).astype(int)
    if kind == "virtual":
        X[N:, 2] += 1.0  # the labels depend on x_0 only: P(y | x) unchanged
    stream = from_numpy(X, y, task="classification")
    learner = OnlineClassifier(lambda d, k: MLP(d, k, hidden=(16,)), lr=0.05, seed=seed)
    ipfi = IncrementalPFI(None, "zero_one", 3, alpha=0.02, feature_names=stream.schema, seed=seed)
    if detect:  # DDM on the 0/1 errors; its alarm row opens the report (window: see below)
        det = ErrorDetector(drift.binary.DDM())
        reporter = DriftReporter([ipfi], window=800, settle=0)
        plugins = [ipfi, det, reporter]
    else:
        reporter = DriftReporter([ipfi], window=WINDOW, settle=0, at=[N])
        plugins = [ipfi, reporter]
    Prequential(learner, stream, batch_size=BATCH, plugins=plugins).run()
    return reporter


def _verdicts(report: dict) -> dict[str, str]:
    return {c["feature"]: c["verdict"] for c in report["changes"]}


@pytest.fixture(scope="module")
def real() -> DriftReporter:
    return _run("real")


def test_real_drift_moves_reliance_from_x0_to_x1(real):
    (report,) = real.reports
    assert report["row"] == N and report["detector"] == "known"
    assert report["rows_before"] == WINDOW and report["rows_after"] == WINDOW
    assert _verdicts(report) == {"x0": "lost", "x1": "gained", "x2": "unchanged"}
    assert report["kind"] == "real"
    assert not report["inputs_moved"]
    # the metric fell: the old rule is learned (~0.98), the new one not yet fully
    assert report["metric"] == "accuracy"
    assert report["metric_before"] > 0.95 and report["metric_after"] < report["metric_before"]
    # ranked by evidence: the changed verdicts come first
    assert [c["verdict"] != "unchanged" for c in report["changes"]] == [True, True, False]
    ev = [c["evidence"] for c in report["changes"][:2]]
    assert ev == sorted(ev, reverse=True) and min(ev) > 1
    assert report["summary"].startswith(
        "after row 1,500 the model relies less on `x0` (ipfi), more on `x1` (ipfi)")
    assert "inputs unchanged" in report["summary"] and "accuracy" in report["summary"]


def test_detector_alarm_opens_the_report():
    # DDM alarmed 26-37 rows after N on seeds 0-2; 800 rows after the alarm fit in the stream
    reporter = _run("real", detect=True)
    (report,) = reporter.reports
    assert report["detector"] == "drift_ddm"
    assert N < report["row"] < N + 100
    assert _verdicts(report) == {"x0": "lost", "x1": "gained", "x2": "unchanged"}
    assert report["kind"] == "real"


def test_virtual_drift_flags_the_input_not_the_reliance():
    (report,) = _run("virtual").reports
    assert report["kind"] == "virtual"
    assert set(_verdicts(report).values()) == {"unchanged"}
    x2 = next(c for c in report["changes"] if c["feature"] == "x2")
    assert x2["input_moved"] and x2["input_shift"] > 10
    assert x2["mean_after"] - x2["mean_before"] == pytest.approx(1.0, abs=0.15)
    assert [c["feature"] for c in report["changes"] if c["input_moved"]] == ["x2"]
    assert "inputs moved: `x2`" in report["summary"]


def test_no_drift_with_forced_report_row_is_none():
    (report,) = _run("none").reports
    assert report["kind"] == "none"
    assert set(_verdicts(report).values()) == {"unchanged"}
    assert not any(c["input_moved"] for c in report["changes"])
    assert "reliance is unchanged; inputs unchanged" in report["summary"]


# ------------------------------------------------------------------------ hand-computed case
class _Stub:
    """An explainer whose importance the test sets before each batch."""

    def __init__(self) -> None:
        self.feature_names = ["a", "b"]
        self.alpha = 1.0
        self.value = torch.zeros(2)
        self.name = "stub"

    @property
    def importance(self) -> torch.Tensor:
        return self.value


def _feed(rep: DriftReporter, stub: _Stub, row: int) -> None:
    """Row ``row`` (batch of one): importance a = row+1 before row 4, 10 after; b = 0;
    input column 0 alternates 0, 1 and is shifted by +5 from row 4; regression error = row;
    the detector "det" alarms at row 4 in the step of row 5."""
    stub.value = torch.tensor([float(row + 1) if row < 4 else 10.0, 0.0])
    x0 = float(row % 2) + (5.0 if row >= 4 else 0.0)
    X = torch.tensor([[x0, 1.0]])
    step(rep, Batch(row, row, X, torch.zeros(1), torch.tensor([math.sqrt(row)]), None),
         alerts={"det": [4] if row == 5 else []})


def test_hand_computed_report_from_a_detector_alarm():
    stub = _Stub()
    rep = DriftReporter([stub], window=4, settle=0)
    for row in range(7):
        _feed(rep, stub, row)
    assert rep.reports == []  # the after window [4, 8) is not complete yet
    _feed(rep, stub, 7)
    (r,) = rep.reports
    assert (r["row"], r["detector"], r["rows_before"], r["rows_after"]) == (4, "det", 4, 4)
    z = NormalDist().inv_cdf(1 - 0.05 / 4)  # Bonferroni over 2 features, two-sided
    sd = float(np.std([1, 2, 3, 4], ddof=1))
    a = next(c for c in r["changes"] if c["feature"] == "a")
    # n_eff = rows * alpha / 2 = 2 spans per window
    assert a["importance_before"] == pytest.approx(2.5)
    assert a["bound_before"] == pytest.approx(z * sd / math.sqrt(2))
    assert (a["importance_after"], a["bound_after"], a["verdict"]) == (10.0, 0.0, "gained")
    # Welch: means 0.5 / 5.5, variances 1/3 each, 4 rows a side -> t = 5 / sqrt(1/6)
    assert a["input_shift"] == pytest.approx(5 / math.sqrt(1 / 6))
    assert a["smd"] == pytest.approx(5 / math.sqrt(1 / 3))
    assert a["input_moved"]
    b = next(c for c in r["changes"] if c["feature"] == "b")
    assert (b["verdict"], b["input_shift"], b["input_moved"]) == ("unchanged", 0.0, False)
    # squared errors 0..3 before, 4..7 after
    assert r["metric"] == "squared error"
    assert (r["metric_before"], r["metric_after"]) == (pytest.approx(1.5), pytest.approx(5.5))
    assert r["kind"] == "real" and [c["feature"] for c in r["changes"]] == ["a", "b"]


def test_memory_stays_within_two_windows():
    stub = _Stub()
    rep = DriftReporter([stub], window=4, settle=0)
    for row in range(50):
        _feed(rep, stub, row)
        assert sum(e["end"] - e["start"] for e in rep._entries) <= 2 * 4 + 1


def test_default_window_is_the_explainers_span():
    stub = _Stub()
    stub.alpha = 0.02
    assert DriftReporter([stub]).window == 100
    assert DriftReporter([stub]).settle == 100  # one window: the learner's time to adapt
    with pytest.raises(ValueError, match="explainers is empty"):
        DriftReporter([])


# ------------------------------------------------------------------------ shapes and state
def _timeless(reports: list) -> list:
    """The reports without their build time (a measurement, not state)."""
    return [{k: v for k, v in r.items() if k != "build_ms"} for r in reports]


def test_json_shape_and_markdown(real):
    data = json.loads(real.to_json())
    assert list(data) == ["alarms"] and len(data["alarms"]) == 1
    report = data["alarms"][0]
    for key, typ in [("row", int), ("detector", str), ("summary", str), ("kind", str),
                     ("metric_before", float), ("metric_after", float), ("changes", list)]:
        assert isinstance(report[key], typ), key
    for change in report["changes"]:
        assert {"feature", "verdict", "importance_before", "importance_after",
                "input_shift"} <= set(change)
        assert change["verdict"] in {"gained", "lost", "unchanged"}
    md = real.to_markdown()
    assert md.startswith("# Drift report\n\n## Row 1,500 (known): real drift")
    assert md.count("| ipfi |") == 3


def test_state_round_trip_resumes_to_the_same_report(real):
    # stop after row 5 (the alarm is pending), move the JSON state into a fresh reporter, go on
    whole_stub = _Stub()
    whole = DriftReporter([whole_stub], window=4, settle=0)
    for row in range(8):
        _feed(whole, whole_stub, row)
    stub = _Stub()
    first = DriftReporter([stub], window=4, settle=0)
    for row in range(6):
        _feed(first, stub, row)
    assert first.reports == []
    state = json.loads(json.dumps(first.state_dict()))  # the state is plain JSON data
    resumed = DriftReporter([stub], window=4, settle=0)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    for row in range(6, 8):
        _feed(resumed, stub, row)
    assert _timeless(resumed.reports) == _timeless(whole.reports) and len(whole.reports) == 1
    with pytest.raises(ValueError):
        DriftReporter([stub], window=5, settle=0).load_state_dict(state)
    # a whole run's reports survive the round trip exactly
    again = DriftReporter([real.explainers[0]], window=WINDOW, settle=0, at=[N])
    again.load_state_dict(json.loads(json.dumps(real.state_dict())))
    assert again.reports == real.reports


def test_finish_builds_the_pending_report_from_the_rows_seen():
    stub = _Stub()
    rep = DriftReporter([stub], window=4, settle=0)
    for row in range(6):
        _feed(rep, stub, row)
    (r,) = rep.finish()
    assert (r["row"], r["rows_before"], r["rows_after"]) == (4, 4, 2)
    assert r["metric_after"] == pytest.approx((4 + 5) / 2)
    assert rep.finish() == [r]  # nothing pending any more
