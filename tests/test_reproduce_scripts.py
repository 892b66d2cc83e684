"""Helper functions of the ERICS, DMT and baselines reproductions, on hand-computed inputs
(fast: no stream, model or data file is touched)."""

from __future__ import annotations

import pytest

from torchstream.reproductions import load


def test_erics_measures_hand_computed():
    erics = load("erics")
    # 400 batches of 100 rows; drifts at batches 100, 200, 300; alerts at batches 120 and 350
    m = erics.measures([10_000, 20_000, 30_000], [12_000, 35_000], 40_000, window=50)
    # delays 20, 100 (missed: the whole gap), 50 batches
    assert m["delay"] == pytest.approx(170 / 3)
    # closed windows of 50 batches: [100, 150] and [300, 350] hold an alert, [200, 250] none
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["fdr"] == 0.0
    # an alert before the next drift: drifts 1 and 3
    assert m["eventual_recall"] == pytest.approx(2 / 3)


def test_erics_warm_up_alerts_are_ignored():
    erics = load("erics")
    assert erics.warm_up_batches(100_000) == 80  # the paper's 80 batches
    assert erics.warm_up_batches(20_000) == 20  # at most 10% of the stream
    # an alert in the warm-up (batch 10 < 40) is no detection and no false alarm
    m = erics.measures([10_000], [1_000], 40_000, window=50)
    assert m["recall"] == 0.0 and m["fdr"] == 0.0


def test_erics_eventual_recall_tolerance():
    erics = load("erics")
    # 16 drifts (quick): 2 binomial sd of a share at 0.9 = 2 sqrt(0.09 / 16) = 0.15
    assert erics.eventual_recall_tolerance(16) == pytest.approx(0.15)
    # 80 drifts (full): 2 sd = 0.067 < 0.1, the floor that keeps a perfect 1.0 inside
    assert erics.eventual_recall_tolerance(80) == pytest.approx(0.1)


def test_dmt_f1_is_the_mean_of_weighted_precision_and_recall():
    import numpy as np

    dmt = load("dmt")
    y, pred = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    p = 0.5 * 1.0 + 0.5 * (2 / 3)  # weighted precision
    r = 0.5 * 0.5 + 0.5 * 1.0  # weighted recall
    assert dmt.f1_weighted_pr(y, pred) == pytest.approx(2 * p * r / (p + r))


def _dmt_result(f1: float, splits: float, rows: int) -> dict[str, float]:
    return {"f1": f1, "f1_std": 0.2, "splits": splits, "splits_std": 1.0, "rows": rows}


def test_dmt_comparisons_check_only_the_whole_electricity_set():
    dmt = load("dmt")
    whole = {
        ("electricity", "dmt"): _dmt_result(0.75, 3.0, 45_312),
        ("electricity", "vfdt"): _dmt_result(0.77, 37.0, 45_312),
    }
    rows = {r.measure: r for r in dmt.comparisons(whole)}
    assert rows["electricity: DMT mean F1"].tolerance == pytest.approx(0.024, abs=5e-4)
    assert rows["electricity: VFDT (MC) mean number of splits"].tolerance == 2.5
    assert rows["electricity: DMT mean number of splits"].tolerance is None
    order = rows["electricity: DMT has fewer splits than VFDT (MC) (1 = yes)"]
    assert order.ours == 1.0 and order.within
    part = {k: {**v, "rows": 3_000} for k, v in whole.items()}
    rows = {r.measure: r for r in dmt.comparisons(part)}
    assert rows["electricity: DMT mean F1"].tolerance is None
    assert rows["electricity: VFDT (MC) mean number of splits"].tolerance is None
    # the ordering is the paper's on every data set: a DMT as large as the VFDT fails it
    big = {**whole, ("electricity", "dmt"): _dmt_result(0.75, 40.0, 45_312)}
    rows = {r.measure: r for r in dmt.comparisons(big)}
    assert rows["electricity: DMT has fewer splits than VFDT (MC) (1 = yes)"].within is False


def _areas(**area: float) -> dict[tuple[str, str], tuple[float, float, int, float]]:
    return {("IG", b): (a, 0.7, 100, 0.0) for b, a in area.items()}


def test_baselines_ordering_check():
    bl = load("baselines")
    good = _areas(constant=0.2, blurred=0.3, max_distance=0.6, uniform=0.55, expectation=0.4)
    rows = bl.comparisons({"spambase": good})
    order = rows[0]
    assert order.ours == 1.0 and order.tolerance == 0.0 and order.within
    assert "margin here 0.250" in order.why
    # uniform as discriminative as blurred: the ordering fails
    bad = {**good, ("IG", "uniform"): (0.25, 0.7, 100, 0.0)}
    assert bl.comparisons({"spambase": bad})[0].within is False
    # not a data set of the paper: reported only
    assert bl.comparisons({"adult": good})[0].tolerance is None
    margins = {r.measure: r.ours for r in rows[1:]}
    assert margins["spambase, IG, constant: random-ablation mean F1 minus ours"] == pytest.approx(
        0.5
    )
