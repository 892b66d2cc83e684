"""The drift report's tests of the data: each input's distribution (KS for a numeric feature,
chi-squared for a categorical block, against scipy on fixed samples), the test of P(y|x) by the
calibration gap, and the kind on closed-form streams: a virtual drift of a relevant feature, a
change of spread with the same mean, a real drift (labels flipped), a stationary control."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchstream import OnlineClassifier, Prequential
from torchstream.report.stats import chi2_test, kept_rows, ks_test
from torchstream.report.reporter import DriftReporter
from torchstream.explain import IncrementalPFI
from torchstream.models import MLP
from torchstream.streams import from_numpy
from torchstream.viz.report import plot_report_inputs


@pytest.mark.parametrize("n, m, shift, scale", [(300, 250, 0.1, 1.3), (40, 1000, 0.0, 1.0),
                                                (500, 500, 0.5, 0.5)])
def test_ks_equals_scipy(n, m, shift, scale):
    g = torch.Generator().manual_seed(n + m)
    a = torch.randn(n, generator=g, dtype=torch.float64)
    b = torch.randn(m, generator=g, dtype=torch.float64) * scale + shift
    d, p = ks_test(a, b)
    want = stats.ks_2samp(a.numpy(), b.numpy(), method="asymp")
    assert d == pytest.approx(float(want.statistic), abs=1e-12)
    assert p == pytest.approx(float(want.pvalue), rel=1e-9)
    # ties: a discrete column
    a, b = torch.tensor([0.0, 1.0, 1.0, 2.0] * 20), torch.tensor([1.0, 2.0, 2.0, 3.0] * 15)
    d, p = ks_test(a, b)
    want = stats.ks_2samp(a.numpy(), b.numpy(), method="asymp")
    assert (d, p) == pytest.approx((float(want.statistic), float(want.pvalue)))
    assert all(math.isnan(v) for v in ks_test(a, torch.empty(0)))


@pytest.mark.parametrize("before, after", [([10, 20, 30], [15, 25, 10]),
                                           ([100, 0, 5, 7], [90, 3, 0, 20]),
                                           ([50, 50], [50, 50])])
def test_chi2_equals_scipy(before, after):
    chi2, p, tv = chi2_test(before, after)
    table = np.array([before, after], dtype=float)
    table = table[:, table.sum(0) > 0]
    want = stats.chi2_contingency(table, correction=False)
    assert chi2 == pytest.approx(want[0]) and p == pytest.approx(want[1])
    shares = table / table.sum(1, keepdims=True)
    assert tv == pytest.approx(0.5 * np.abs(shares[0] - shares[1]).sum())


def test_kept_rows_are_a_share_without_a_period():
    keep = kept_rows(0, 100_000, 0.25)
    assert keep.float().mean().item() == pytest.approx(0.25, abs=0.01)
    for period in (2, 3, 4, 8):  # every phase of a periodic stream is sampled alike
        shares = [keep[k::period].float().mean().item() for k in range(period)]
        assert max(shares) - min(shares) < 0.02
    assert torch.equal(kept_rows(500, 1000, 0.25), keep[500:1500])  # by row number: resumes


# ------------------------------------------------------------------ closed-form streams
N, DRIFT, WINDOW = 4000, 2500, 500


def _report(kind: str, seed: int = 0) -> dict:
    """An MLP on ``y = 1[x0 + x1 > 0]`` (x0, x1, x2 uniform on [-1, 1]) with a change at row
    2,500: ``virtual`` x0 drawn from [0, 2] after (P(y|x) unchanged); ``spread`` the
    irrelevant x2 from +-[0.8, 1] (same mean); ``real`` the labels flipped where x0 > 0;
    ``none`` nothing."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (N, 3))
    after = np.arange(N) >= DRIFT
    if kind == "virtual":
        X[after, 0] = rng.uniform(0, 1, after.sum())
    if kind == "spread":
        X[after, 2] = rng.choice([-1, 1], after.sum()) * rng.uniform(0.8, 1, after.sum())
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    if kind == "real":
        flip = after & (X[:, 0] > 0)
        y[flip] = 1 - y[flip]
    torch.manual_seed(seed)
    stream = from_numpy(X, y, task="classification")
    learner = OnlineClassifier(MLP, lr=0.01, scale_inputs=True, seed=seed)
    ipfi = IncrementalPFI(None, "cross_entropy", 3, feature_names=["x0", "x1", "x2"],
                          alpha=2 / WINDOW, seed=seed)
    reporter = DriftReporter([ipfi], at=[DRIFT], window=WINDOW, settle=WINDOW)
    Prequential(learner, stream, batch_size=8, plugins=[ipfi, reporter]).run()
    (report,) = reporter.reports
    return report


#: Seeds of the streams. Seed 0 is left out: its x1 differs between the two windows by chance
#: (scipy's ks_2samp: p = 0.006 < 0.05 / 3), so every case of it flags x1, rightly.
SEEDS = (1, 2, 3)


def _moved(report: dict) -> set[str]:
    return {c["feature"] for c in report["changes"] if c["input_moved"]}


@pytest.mark.parametrize("seed", SEEDS)
def test_virtual_drift_of_a_relevant_feature_is_virtual(seed):
    r = _report("virtual", seed)
    assert _moved(r) == {"x0"} and r["conditional"]["changed"] is False
    assert r["kind"] == "virtual", r["summary"]
    x0 = next(c for c in r["changes"] if c["feature"] == "x0")
    assert x0["input_test"] == "ks" and x0["input_statistic"] > 0.4
    # the deciles: before ~ uniform [-1, 1], after ~ uniform [0, 1]
    assert x0["input_before"][4] == pytest.approx(0.0, abs=0.15)
    assert x0["input_after"][4] == pytest.approx(0.5, abs=0.1)
    assert r["share_moved"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_spread_change_with_the_same_mean_is_seen(seed):
    r = _report("spread", seed)
    x2 = next(c for c in r["changes"] if c["feature"] == "x2")
    assert abs(x2["smd"]) < 0.2  # Welch's t on the means sees nothing
    assert _moved(r) == {"x2"} and r["kind"] == "virtual", r["summary"]
    assert "`x2` (ks" in r["summary"]


@pytest.mark.parametrize("seed", SEEDS)
def test_flipped_labels_are_a_real_drift(seed):
    r = _report("real", seed)
    assert r["conditional"]["changed"] and r["conditional"]["z"] > 3
    assert r["kind"] == "real" and not _moved(r), r["summary"]
    assert "P(y|x) changed" in r["summary"]


@pytest.mark.parametrize("seed", SEEDS)
def test_stationary_control_reports_no_change(seed):
    r = _report("none", seed)
    assert not _moved(r) and not r["conditional"]["changed"]
    assert r["kind"] in ("none", "learning"), r["summary"]


def test_inputs_figure_draws_the_reported_distributions():
    r = _report("virtual", 1)
    fig = plot_report_inputs(r)
    first = fig.axes[0]
    assert first.get_title().startswith("x0 (moved): ks")  # the moved feature first
    x0 = next(c for c in r["changes"] if c["feature"] == "x0")
    before, after = (line.get_ydata() for line in first.get_lines()[:2])
    assert list(before) == pytest.approx(x0["input_before"])
    assert list(after) == pytest.approx(x0["input_after"])
    # the deciles are those of the rows each window kept (every row here: window 500): the
    # batches of 8 lying wholly in 2,000..2,499, rows 2,000..2,495 (float32, as learned)
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (N, 3)).astype(np.float32).astype(np.float64)
    want = np.quantile(X[DRIFT - WINDOW:DRIFT - 4, 0], np.linspace(0.1, 0.9, 9))
    assert list(before) == pytest.approx(list(want), abs=1e-6)
