"""The drift report's test of P(y|x) by a reference model: the reweighted calibration gap
against scipy and hand-computed cells, and closed-form streams fed batch by batch — a band of
inputs relabelled while the learner relearns within 20 rows (the prequential gap right after
the row misses it, the reference model does not), a calibration that varies with x0 while x0
moves (P(y|x) fixed: the plain gap drop is the P(x) part, the reweighted one is not), a
control, a learner that cannot be copied, and a resume mid-way."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from scipy import stats

from _report_steps import step
from torchstream.report.reporter import DriftReporter
from torchstream.report.stats import quantile_cells, reweighted_gap
from torchstream.step import Batch


# ------------------------------------------------------------------ the statistic
def test_reweighted_gap_without_cells_is_welchs_t():
    g = torch.Generator().manual_seed(3)
    before = torch.rand(300, generator=g, dtype=torch.float64) - 0.4
    after = torch.rand(450, generator=g, dtype=torch.float64) * 1.3 - 0.6
    drop = reweighted_gap(before, after)
    want = stats.ttest_ind(before.numpy(), after.numpy(), equal_var=False)
    assert drop.drop / drop.se == pytest.approx(float(want.statistic), rel=1e-12)
    assert drop.expected == drop.gap_before == pytest.approx(float(before.mean()), rel=1e-12)
    assert (drop.rows_before, drop.rows_after, drop.rows_left_out) == (300, 450, 0)


def test_reweighted_gap_by_hand():
    # cell 0: before 0, 2 (mean 1, var 2); cell 1: before 4, 6, 8 (mean 6, var 4); cell 2: one
    # before row (fewer than two: its after rows are left out); cell -1: no cell
    before = torch.tensor([0.0, 2.0, 4.0, 6.0, 8.0, 9.0])
    cb = torch.tensor([0, 0, 1, 1, 1, 2])
    after = torch.tensor([1.0, 3.0, 5.0, 5.0, 100.0, 100.0])
    ca = torch.tensor([0, 1, 1, 1, 2, -1])
    d = reweighted_gap(before, after, cb, ca)
    w0, w1 = 1 / 4, 3 / 4  # the after rows used: one in cell 0, three in cell 1
    assert d.expected == pytest.approx(w0 * 1 + w1 * 6)
    assert d.gap_after == pytest.approx((1 + 3 + 5 + 5) / 4)
    assert d.drop == pytest.approx(d.expected - 3.5)
    var_after = float(np.var([1, 3, 5, 5], ddof=1)) / 4
    assert d.se == pytest.approx(math.sqrt(w0 ** 2 * 2 / 2 + w1 ** 2 * 4 / 3 + var_after))
    assert (d.rows_before, d.rows_after, d.rows_left_out) == (6, 4, 2)
    assert math.isnan(reweighted_gap(before, after[:1]).drop)  # fewer than two after rows


def test_quantile_cells_are_the_before_deciles():
    rng = np.random.default_rng(0)
    b, a = rng.normal(size=500), rng.normal(0.5, 1.5, size=300)
    cb, ca = quantile_cells(torch.from_numpy(b), torch.from_numpy(a), 10)
    edges = np.quantile(b, np.linspace(0, 1, 11)[1:-1])
    assert cb.tolist() == np.digitize(b, edges).tolist()  # right-closed bins as digitize
    inside = (a >= b.min()) & (a <= b.max())
    assert ca.tolist() == np.where(inside, np.digitize(a, edges), -1).tolist()
    assert np.bincount(cb.numpy()).tolist() == [50] * 10


def test_reweighting_removes_the_part_due_to_p_x():
    # a fixed model's gap is +0.05 where x0 < 0 and -0.25 where x0 >= 0 (P(y|x) fixed, its
    # calibration differs); x0 moves from U(-1, 1) to U(0, 1): the plain drop is the P(x) part
    # (the before mean (0.05 - 0.25) / 2 = -0.1 less the after mean -0.25: 0.15), the
    # reweighted drop is zero
    g = torch.Generator().manual_seed(1)
    xb = torch.rand(2000, generator=g, dtype=torch.float64) * 2 - 1
    xa = torch.rand(2000, generator=g, dtype=torch.float64)

    def gaps(x: torch.Tensor) -> torch.Tensor:
        return torch.where(x < 0, 0.05, -0.25) + 0.1 * torch.randn(x.shape, generator=g,
                                                                  dtype=torch.float64)

    gb, ga = gaps(xb), gaps(xa)
    plain = reweighted_gap(gb, ga)
    assert plain.drop == pytest.approx(0.15, abs=4 * plain.se) and plain.drop / plain.se > 20
    cells = quantile_cells(xb, xa, 10)
    weighted = reweighted_gap(gb, ga, *cells)
    assert abs(weighted.drop) < 3 * weighted.se
    assert weighted.expected == pytest.approx(-0.25, abs=0.02)


# ------------------------------------------------------------------ closed-form streams
ROW, WINDOW, SETTLE, BATCH, C = 1200, 400, 400, 10, 0.9
BAND = 0.4  # the threshold moves from 0 to 0.4: share s = (2 t - t^2 / 2) / 4 = 0.18


class _Stub:
    """An explainer whose importance never moves."""

    def __init__(self) -> None:
        self.feature_names = ["a", "b"]
        self.alpha = 1.0
        self.name = "stub"

    @property
    def importance(self) -> torch.Tensor:
        return torch.tensor([1.0, 1.0])


class Band(torch.nn.Module):
    """P(class 1) = C where x0 + x1 > theta, else 1 - C (confidence C everywhere)."""

    def __init__(self, theta: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("theta", torch.tensor(theta, dtype=torch.float64))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        p = torch.where(X[:, 0] + X[:, 1] > self.theta, C, 1 - C).to(torch.float64)
        return torch.stack([1 - p, p], 1)


class Uncopyable(Band):
    def __deepcopy__(self, memo: dict) -> Band:
        raise TypeError("holds a handle")


def _run(kind: str, seed: int = 0, learner: Band | None = None, adapt: int = 20,
         stop: int | None = None, state: dict | None = None) -> DriftReporter:
    """Rows x ~ U(-1, 1)^2 in batches of 10, a known change at ROW; the learner's predictions
    are fed. ``real``: after ROW the labels follow the threshold BAND (a band of share 0.18
    relabelled) and the learner moves its threshold there ``adapt`` rows later; ``covariate``:
    the learner is right with probability 0.9 where x0 < 0 and 0.6 where x0 >= 0 throughout
    (its confidence 0.9 everywhere) and x0 is drawn from U(0, 1) after ROW; ``none``: nothing
    changes. ``stop`` / ``state``: stop after that row and return, or resume from a state."""
    g = torch.Generator().manual_seed(seed)
    model = learner if learner is not None else Band()
    rep = DriftReporter([_Stub()], window=WINDOW, settle=SETTLE, at=[ROW])
    if state is not None:
        rep.load_state_dict(copy.deepcopy(state))
    for start in range(0, ROW + SETTLE + WINDOW, BATCH):
        X = torch.rand(BATCH, 2, generator=g, dtype=torch.float64) * 2 - 1
        u = torch.rand(BATCH, generator=g, dtype=torch.float64)
        if kind == "covariate" and start >= ROW:
            X[:, 0] = (X[:, 0] + 1) / 2
        if kind == "real" and start == ROW + adapt:
            model.theta.fill_(BAND)  # the learner has relearned
        theta = BAND if kind == "real" and start >= ROW else 0.0
        y = (u < torch.where(X[:, 0] + X[:, 1] > theta, C, 1 - C)).to(torch.float64)
        if kind == "covariate":
            right = u < torch.where(X[:, 0] < 0, 0.9, 0.6)
            predicted = (X[:, 0] + X[:, 1] > 0).to(torch.float64)
            y = torch.where(right, predicted, 1 - predicted)
        if state is not None and start < stop:  # type: ignore[operator]
            continue  # the rows the stopped run saw
        with torch.no_grad():
            y_pred = model(X)
        step(rep, Batch(start // BATCH, start, X, y, y_pred, model))
        if state is None and stop is not None and start + BATCH >= stop:
            return rep
    rep.on_end()
    return rep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_relabelled_band_the_learner_relearns_at_once_is_real(seed):
    (r,) = _run("real", seed).reports
    cond = r["conditional"]
    assert cond["test"] == "reference model" and cond["note"] == ""
    # the oldest copy in the before window (copies every WINDOW // 2 rows) and every row kept
    assert (cond["model_row"], cond["rows_before"], cond["rows"]) == (800, 400, 800)
    assert cond["stratified_by"] is None and not r["inputs_moved"]
    # closed form: confidence C everywhere, right with C outside the band and 1 - C inside
    # it after the row: the gap drops by s (2 C - 1) = 0.18 * 0.8 = 0.144
    drop = cond["gap_expected"] - cond["gap_after"]
    se = drop / cond["z"]
    assert drop == pytest.approx(0.18 * (2 * C - 1), abs=4 * se)
    assert cond["changed"] and cond["z"] > 4
    assert cond["expected"] - cond["accuracy"] == pytest.approx(drop)
    assert r["kind"] == "real", r["summary"]
    assert "P(y|x) changed: the model of row 800 is right on" in r["summary"]
    # the learner's own predictions right after the row (WINDOW // 4 = 100 rows, 20 of them
    # before it relearned) show no significant change: the test the report used to make
    assert not cond["accuracy_dropped"] and cond["rows_right_after"] == 100


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_calibration_that_varies_with_a_moved_input_is_virtual(seed):
    (r,) = _run("covariate", seed).reports
    cond = r["conditional"]
    assert r["inputs_moved"] and cond["stratified_by"] == "a"
    # the P(x) part: before the mean gap is (0 + -0.3) / 2, after every row has x0 >= 0: -0.3
    assert cond["gap_before"] - cond["gap_after"] == pytest.approx(0.15, abs=0.06)
    # reweighted to the after rows' cells of x0, the before rows predict -0.3 as well
    assert cond["gap_expected"] == pytest.approx(-0.3, abs=0.06)
    assert not cond["changed"] and abs(cond["z"]) < 3
    assert r["kind"] == "virtual", r["summary"]
    # U(0, 1) lies inside U(-1, 1): only the few after rows above the largest before value
    # of x0 (and none below) are left out
    assert cond["rows_left_out"] + cond["rows"] == 800 and cond["rows_left_out"] < 10


def test_the_control_is_none():
    (r,) = _run("none", 0).reports
    assert r["conditional"]["test"] == "reference model" and not r["conditional"]["changed"]
    assert r["kind"] == "none", r["summary"]


def test_a_learner_that_cannot_be_copied_is_said_and_tested_right_after():
    (r,) = _run("real", 0, learner=Uncopyable()).reports
    cond = r["conditional"]
    assert cond["test"] == "right after the row" and cond["model_row"] is None
    assert cond["note"].startswith("the learner could not be copied (TypeError: holds a handle)")
    assert cond["rows"] == cond["rows_right_after"] == 100


def test_copies_are_bounded_and_let_go_at_the_end():
    rep = _run("none", 0, stop=ROW + 300)  # a report waiting, holding its copy of row 800
    assert sorted(rep._references) == [800, 1000, 1200, 1400]
    rep = _run("none", 0, stop=ROW + SETTLE + WINDOW)  # the last batch, before the end hook
    assert rep.reports and sorted(rep._references) == [1400, 1600, 1800, 2000]  # 800 let go
    assert _run("none", 0)._references == {}


def test_resume_rebuilds_the_copies_from_the_state():
    # stopped while the report waits: its copy (theta 0) is saved as a state dict and rebuilt
    # on the learner, which has relearned (theta 0.4) by then: the same report as one run
    whole = _run("real", 0)
    half = _run("real", 0, stop=ROW + 300)
    state = half.state_dict()
    assert isinstance(state["references"]["800"], dict)
    assert float(state["references"]["800"]["theta"]) == 0.0
    learner = Band(BAND)  # as the stopped run left it
    resumed = _run("real", 0, learner=learner, stop=ROW + 300, state=state)
    strip = [{k: v for k, v in x.items() if k != "build_ms"} for x in resumed.reports]
    assert strip == [{k: v for k, v in x.items() if k != "build_ms"} for x in whole.reports]
    assert strip[0]["conditional"]["changed"]
