"""The verdicts of the windows around an alarm (``torchstream.report.windows``), against hand
computations and scipy."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from torchstream.explain.pdp_grid import group_spec
from torchstream.report.windows import (
    classify,
    distribution_test,
    interval_verdict,
    pair_changes,
    window_metric,
)


def _entry(start: int, end: int, **fields: object) -> dict:
    base = {"start": start, "end": end, "snapshots": [], "pairs": [], "sums": [], "squares": [],
            "metric": 0.0, "metric_sq": 0.0, "sample": [], "labels": [], "gap": 0.0,
            "gap_sq": 0.0}
    base.update(fields)
    return base


def test_interval_verdict_closed_forms():
    # intervals [0.9, 1.1] and [1.9, 2.1] apart: gained, evidence |2 - 1| / 0.2
    assert interval_verdict(1.0, 0.1, 2.0, 0.1, scale=2.0, min_effect=0.05) == ("gained",
                                                                               pytest.approx(5.0))
    assert interval_verdict(2.0, 0.1, 1.0, 0.1, scale=2.0, min_effect=0.05)[0] == "lost"
    # overlapping intervals: unchanged, evidence 0.1 / 0.4
    assert interval_verdict(1.0, 0.2, 1.1, 0.2, scale=2.0, min_effect=0.0) == (
        "unchanged", pytest.approx(0.25))
    # apart but below min_effect * scale (0.03 < 0.05 * 1.03): unchanged; no width: infinite
    assert interval_verdict(1.0, 0.0, 1.03, 0.0, scale=1.03, min_effect=0.05) == (
        "unchanged", math.inf)


def test_window_metric_is_the_rows_mean_and_its_standard_error():
    # 0/1 correctness: 3 of 4 rows right, then 1 of 4: mean 0.5 over 8 rows
    entries = [_entry(0, 4, metric=3.0, metric_sq=3.0), _entry(4, 8, metric=1.0, metric_sq=1.0)]
    mean, se = window_metric(entries)
    values = [1, 1, 1, 0, 1, 0, 0, 0]
    assert mean == pytest.approx(0.5)
    assert se == pytest.approx(stats.sem(values))


def test_distribution_test_of_a_numeric_column_is_scipys_ks():
    g = torch.Generator().manual_seed(0)
    xb = torch.randn(300, generator=g, dtype=torch.float64)
    xa = torch.randn(300, generator=g, dtype=torch.float64) + 0.5
    spec = group_spec("x", {"x": [0]}, ["x"])
    out = distribution_test(spec, [], [], (xb[:, None], xa[:, None]), 1, level=0.05,
                            min_shift=0.1)
    want = stats.ks_2samp(xb.numpy(), xa.numpy())
    assert out["input_test"] == "ks"
    assert out["input_statistic"] == pytest.approx(want.statistic)
    # p: the one-sample distribution of D at n_e = n m / (n + m) = 150 (report.stats.ks_test)
    assert out["input_p"] == pytest.approx(stats.kstwo.sf(want.statistic, 150), rel=1e-6)
    assert out["input_moved"]  # p far below 0.05 and D well above 0.1
    assert out["input_before"] == pytest.approx(
        torch.quantile(xb, torch.linspace(0.1, 0.9, 9, dtype=torch.float64)).tolist())


def test_distribution_test_of_a_one_hot_block_is_chi_squared_on_its_counts():
    # colour=red / colour=blue: 30 / 10 rows before, 10 / 30 after
    spec = group_spec("colour", {"colour": [0, 1]}, ["colour=red", "colour=blue"])
    before = [_entry(0, 40, sums=[30.0, 10.0])]
    after = [_entry(40, 80, sums=[10.0, 30.0])]
    out = distribution_test(spec, before, after, (torch.empty(0, 0), torch.empty(0, 0)), 1,
                            level=0.05, min_shift=0.1)
    chi2, p, _, _ = stats.chi2_contingency([[30, 10], [10, 30]], correction=False)
    assert out["input_test"] == "chi2" and out["input_p"] == pytest.approx(p)
    assert out["input_statistic"] == pytest.approx(0.5)  # total variation |0.75 - 0.25|
    assert out["input_labels"] == ["red", "blue"] and out["input_moved"]


def test_pair_changes_rank_a_gained_pair_first():
    # two pairs over 4 one-row entries a side, alpha 1 (n_eff = rows / 2): pair 0 jumps from
    # 0.1 to 0.9 with no spread, pair 1 stays at 0.5; a pair never explained is not compared
    before = [_entry(i, i + 1, pairs=[[0.1, 0.5, math.nan]]) for i in range(4)]
    after = [_entry(i, i + 1, pairs=[[0.9, 0.5, math.nan]]) for i in range(8, 12)]
    out = pair_changes(["inter"], [[["a", "b"], ["a", "c"], ["b", "c"]]], [1.0], before, after,
                       level=0.05, min_effect=0.05)
    assert [(p["features"], p["verdict"]) for p in out] == [
        (["a", "b"], "gained"), (["a", "c"], "unchanged"), (["b", "c"], "not compared")]
    assert out[0]["value_before"] == pytest.approx(0.1)
    assert out[0]["value_after"] == pytest.approx(0.9)


@pytest.mark.parametrize("case, kind", [
    (dict(warm_up=True), "warm-up"),
    (dict(conditional_changed=True, moved=True), "real"),
    (dict(conditional_changed=False, dropped=True), "real"),
    (dict(conditional_changed=False, accuracy_dropped=True), "real"),
    (dict(conditional_changed=False, lost=True), "real"),
    (dict(conditional_changed=False, improved=True), "learning"),
    (dict(conditional_changed=False, changed=True, moved=True), "virtual"),
    (dict(conditional_changed=False), "none"),
    (dict(improved=True), "learning"),
    (dict(changed=True), "real"),
    (dict(dropped=True), "real"),
    (dict(dropped=True, moved=True), "virtual"),
    (dict(), "none"),
])
def test_classify_follows_the_stated_rules(case, kind):
    args = dict(warm_up=False, moved=False, dropped=False, improved=False, changed=False,
                lost=False, conditional_changed=None, accuracy_dropped=False)
    args.update(case)
    assert classify(**args) == kind
