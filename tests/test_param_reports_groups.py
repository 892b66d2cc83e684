"""FIRES and ERICS reports per user feature (``feature_groups``) next to the per-column ones."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from torchstream.drift import ERICS
from torchstream.models.distributional import ProbitHead
from torchstream.select.fires import FIRES, fires_weights
from torchstream.select.plugin import FIRESSelector
from torchstream.streams.csv_reader import read_csv

F64 = torch.float64
MU = [0.4, -0.1, 0.0, -0.3, 0.25, 0.05]
SIGMA = [0.5, 2.0, 1.0, 0.7, 1.5, 0.2]
GROUPS = {"a": [0, 3], "b": [1], "c": [2, 4, 5]}


def _fires(
    groups: dict[str, list[int]], n_selected: int = 2, scale_weights: bool = True
) -> FIRES:
    f = FIRES(n_selected=n_selected, lambda_s=0.2, lambda_r=0.05, feature_groups=groups,
              scale_weights=scale_weights)
    f.update(torch.tensor(MU, dtype=F64), torch.tensor(SIGMA, dtype=F64))
    return f


def _closed_form(cols: list[int], lambda_s: float = 0.2, lambda_r: float = 0.05) -> float:
    mu2 = sum(MU[c] ** 2 for c in cols)
    s2 = sum(SIGMA[c] ** 2 for c in cols)
    return (mu2 - lambda_s * s2) / (2 * lambda_r)


# ---------------------------------------------------------------------------- FIRES
def test_group_weight_is_the_weight_formula_on_the_aggregated_distribution() -> None:
    f = _fires(GROUPS, scale_weights=False)
    w = f.feature_weights
    assert w is not None and list(w) == ["a", "b", "c"]
    # a: (0.16 + 0.09 - 0.2 (0.25 + 0.49)) / 0.1 = 1.02
    assert w["a"] == pytest.approx(1.02, abs=1e-12)
    for name, cols in GROUPS.items():
        assert w[name] == pytest.approx(_closed_form(cols), abs=1e-12)
    # the column weights are still reported, and they sum to the group weight
    assert f.raw_weights is not None
    col = fires_weights(torch.tensor(MU, dtype=F64), torch.tensor(SIGMA, dtype=F64), 0.2, 0.05)
    torch.testing.assert_close(f.raw_weights, col)
    assert sum(col[c].item() for c in GROUPS["c"]) == pytest.approx(w["c"], abs=1e-12)


def test_scaled_group_weights_are_min_max_over_the_groups() -> None:
    w = _fires(GROUPS).feature_weights
    raw = {k: _closed_form(v) for k, v in GROUPS.items()}
    lo, hi = min(raw.values()), max(raw.values())
    assert w == pytest.approx({k: (v - lo) / (hi - lo) for k, v in raw.items()})


def test_selected_features_are_the_top_groups_and_selected_holds_their_columns() -> None:
    raw = {k: _closed_form(v) for k, v in GROUPS.items()}
    best = sorted(raw, key=raw.__getitem__, reverse=True)
    f = _fires(GROUPS, n_selected=2)
    assert f.selected_features == best[:2]
    assert f.selected is not None
    assert f.selected.tolist() == [c for name in best[:2] for c in GROUPS[name]]
    mask = f.mask
    assert mask is not None
    for cols in GROUPS.values():  # whole blocks only
        assert len({bool(mask[c]) for c in cols}) == 1


def test_group_weights_ignore_the_sign_of_mu() -> None:
    """A one-hot block whose categories push in opposite directions keeps its weight."""
    g = {"x": [0, 1]}
    same = FIRES(n_selected=1, scale_weights=False, feature_groups=g)
    same.update(torch.tensor([0.5, 0.5]), torch.ones(2))
    opposite = FIRES(n_selected=1, scale_weights=False, feature_groups=g)
    opposite.update(torch.tensor([0.5, -0.5]), torch.ones(2))
    assert same.feature_weights == opposite.feature_weights == {"x": pytest.approx(24.0)}


def test_group_order_invariance() -> None:
    ref = _fires(GROUPS, n_selected=2)
    shuffled = {"c": [5, 2, 4], "a": [3, 0], "b": [1]}
    other = _fires(shuffled, n_selected=2)
    assert ref.feature_weights is not None and other.feature_weights is not None
    assert other.feature_weights == pytest.approx(ref.feature_weights, abs=1e-12)
    assert ref.selected_features == other.selected_features
    assert ref.selected is not None and other.selected is not None
    assert sorted(ref.selected.tolist()) == sorted(other.selected.tolist())
    ref_mask, other_mask = ref.mask, other.mask
    assert ref_mask is not None and other_mask is not None
    assert torch.equal(ref_mask, other_mask)


def test_one_column_groups_reproduce_the_column_selection() -> None:
    cols = FIRES(n_selected=3, lambda_s=0.2, lambda_r=0.05)
    cols.update(torch.tensor(MU, dtype=F64), torch.tensor(SIGMA, dtype=F64))
    singles = _fires({f"x{j}": [j] for j in range(6)}, n_selected=3)
    assert singles.selected is not None and cols.selected is not None
    assert singles.selected.tolist() == cols.selected.tolist()
    assert singles.feature_weights == pytest.approx(cols.as_dict(), abs=1e-12)
    assert singles.selected_features == [f"x{j}" for j in cols.selected.tolist()]


def test_without_groups_the_feature_reports_are_none() -> None:
    f = FIRES(n_selected=1)
    f.update(torch.tensor([0.1, 0.2]), torch.ones(2))
    assert f.feature_weights is None and f.selected_features is None


def test_n_selected_counts_features_and_bad_groups_are_named() -> None:
    with pytest.raises(ValueError, match="n_selected=4 exceeds the number of feature groups 3"):
        _fires(GROUPS, n_selected=4)
    with pytest.raises(ValueError, match="does not cover the columns"):
        _fires({"a": [0, 3], "b": [1]})
    with pytest.raises(ValueError, match=r"feature_groups\['b'\] has column 0 also in group"):
        _fires({"a": [0, 3], "b": [0, 1, 2, 4, 5]})


def test_history_and_state_with_groups() -> None:
    f = FIRES(n_selected=1, feature_groups=GROUPS, history=None)
    f.update(torch.tensor(MU, dtype=F64), torch.tensor(SIGMA, dtype=F64))
    flipped = torch.tensor([0.0, 3.0, 0.0, 0.0, 0.0, 0.0], dtype=F64)
    f.update(flipped, torch.ones(6, dtype=F64))
    h = f.history
    sel = h["selected"]
    assert isinstance(sel, torch.Tensor) and sel.shape == (2, 3)  # widest group: c, 3 columns
    for row, step_sel in zip(sel.tolist(), (_best(), "b")):
        assert set(row) == set(GROUPS[step_sel])
    g = FIRES(n_selected=1, feature_groups=GROUPS)
    g.load_state_dict(f.state_dict())
    assert g.selected_features == ["b"] and g.feature_weights == f.feature_weights
    with pytest.raises(ValueError, match="differ in having feature_groups"):
        FIRES(n_selected=1).load_state_dict(f.state_dict())


def _best() -> str:
    raw = {k: _closed_form(v, 0.01, 0.01) for k, v in GROUPS.items()}
    return max(raw, key=raw.__getitem__)


def _onehot_stream(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns: 0 numeric noise, 1..3 one-hot ``colour``, 4 numeric noise; y from colour."""
    cat = torch.randint(0, 3, (n,), generator=g)
    X = torch.zeros(n, 5, dtype=F64)
    X[:, 0] = torch.randn(n, generator=g, dtype=F64)
    X[torch.arange(n), 1 + cat] = 1.0
    X[:, 4] = torch.randn(n, generator=g, dtype=F64)
    return X, (cat == 0).long()


def test_fires_selector_with_groups_masks_whole_features() -> None:
    groups = {"u": [0], "colour": [1, 2, 3], "v": [4]}
    head = ProbitHead(5, lr_mu=0.1, lr_sigma=0.1)
    sel = FIRESSelector(FIRES(head, n_selected=1), feature_groups=groups, stability_window=3)
    assert sel.fires.groups is not None and sel.stability.n_features == 3
    g = torch.Generator().manual_seed(0)
    prev_mask = torch.ones(5, dtype=torch.bool)
    for step in range(20):
        X, y = _onehot_stream(g, 200)
        Xm = sel.transform(X, step)
        sel.learn(X, y)
        mask = sel.mask
        assert mask is not None
        for cols in groups.values():
            assert len({bool(mask[c]) for c in cols}) == 1
        for cols in groups.values():  # the learner's batch keeps or blanks whole blocks
            kept = torch.equal(Xm[:, cols], X[:, cols])
            blank = bool((Xm[:, cols] == 0).all())
            assert kept != blank or bool((X[:, cols] == 0).all())
            if step:
                assert kept == bool(prev_mask[cols[0]])
        prev_mask = mask.clone()
    assert sel.fires.selected_features == ["colour"]
    final = sel.mask
    assert final is not None and final.tolist() == [False, True, True, True, False]
    out = sel.scalars()
    assert set(out) == {"fires/u", "fires/colour", "fires/v", "fires/stability"} | {
        f"fires/column/x{j}" for j in range(5)
    }
    assert out["fires/colour"] == 1.0 and out["fires/stability"] == pytest.approx(1.0)


def test_fires_selector_refuses_different_groups() -> None:
    fires = FIRES(ProbitHead(2), n_selected=1, feature_groups={"a": [0], "b": [1]})
    with pytest.raises(ValueError, match="differs"):
        FIRESSelector(fires, feature_groups={"a": [0, 1]})


# ---------------------------------------------------------------------------- ERICS
def _erics_run(groups: dict[str, list[int]] | None, steps: int = 300) -> ERICS:
    erics = ERICS(window_mvg_average=20, window_drift_detect=20, feature_groups=groups)
    mu = torch.zeros(5, dtype=F64)
    for t in range(steps):
        if t >= 100:  # the one-hot block 2..4 moves: two categories swap sign
            mu[2], mu[3] = 0.8, -0.8
        erics.observe(mu, torch.ones(5, dtype=F64))
    return erics


def test_erics_partial_alarms_per_feature_and_keeps_the_columns() -> None:
    groups = {"p": [0], "q": [1], "colour": [2, 3, 4]}
    grouped, plain = _erics_run(groups), _erics_run(None)
    assert grouped.partial_alerts == [(100, "colour")]
    assert plain.partial_alerts == [(100, 2), (100, 3)]
    assert grouped.column_partial_alerts == plain.partial_alerts == plain.column_partial_alerts
    assert grouped.alert_steps == plain.alert_steps == [100]
    assert grouped.feature_names == ["p", "q", "colour"]
    torch.testing.assert_close(grouped.partial_ma, plain.partial_ma)


def test_erics_group_score_is_eq8_on_the_group_columns() -> None:
    """At the drift step only the pair (99, 100) differs: r_2 - 1 = r_3 - 1 = 0.64, so the
    group MA is |0.64 + 0.64 + 0| / (2 M) and a one-column group equals its column."""
    groups = {"p": [0], "q": [1], "colour": [2, 3, 4]}
    erics = ERICS(window_mvg_average=20, window_drift_detect=20, feature_groups=groups)
    mu = torch.zeros(5, dtype=F64)
    for t in range(101):
        if t >= 100:
            mu[2], mu[3] = 0.8, -0.8
        erics.observe(mu, torch.ones(5, dtype=F64))
    ma = erics.feature_partial_ma
    assert ma is not None and erics.partial_ma is not None
    assert ma.tolist() == pytest.approx([0.0, 0.0, 1.28 / 40], abs=1e-12)
    assert erics.partial_ma.tolist() == pytest.approx([0, 0, 0.64 / 40, 0.64 / 40, 0], abs=1e-12)
    assert erics.partial_detected.tolist() == [2]
    assert erics.column_partial_detected.tolist() == [2, 3]
    d = erics.feature_partial_drift_statistic
    assert d is not None and d[2].item() == pytest.approx(1.28 / 40, abs=1e-12)
    thr = erics.feature_partial_threshold
    assert thr is not None and not math.isnan(thr[2].item())


def test_erics_groups_state_roundtrip_and_checks() -> None:
    groups = {"p": [0], "q": [1], "colour": [2, 3, 4]}
    a = _erics_run(groups, 150)
    b = ERICS(window_mvg_average=20, window_drift_detect=20, feature_groups=groups)
    b.load_state_dict(a.state_dict())
    assert b.partial_alerts == a.partial_alerts and b.feature_names == a.feature_names
    with pytest.raises(ValueError, match="feature_groups"):
        ERICS(window_mvg_average=20, window_drift_detect=20).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="needs partial=True"):
        ERICS(partial=False, feature_groups=groups)
    bad = ERICS(feature_groups={"p": [0], "q": [1, 2]})
    with pytest.raises(ValueError, match="does not cover the columns"):
        bad.observe(torch.zeros(5, dtype=F64), torch.ones(5, dtype=F64))


# ---------------------------------------------------------------------------- adult


def test_adult_fires_and_erics_report_the_schema_features(adult_csv: Path) -> None:
    stream = read_csv(adult_csv, "income", nrows=3000)
    groups = stream.schema.feature_groups()
    X = torch.as_tensor(stream.X, dtype=F64)
    X = (X - X.mean(0)) / X.std(0).clamp_min(1e-9)
    y = torch.as_tensor(stream.y).long()
    d = X.shape[1]
    sel = FIRESSelector(FIRES(ProbitHead(d, lr_mu=0.1, lr_sigma=0.1), n_selected=3),
                        feature_groups=groups)
    erics = ERICS(ProbitHead(d), window_mvg_average=5, window_drift_detect=5,
                  feature_groups=groups)
    for step, s in enumerate(range(0, X.shape[0], 100)):
        sel.transform(X[s : s + 100], step)
        sel.learn(X[s : s + 100], y[s : s + 100])
        erics.learn(X[s : s + 100], y[s : s + 100])
    names = [str(n) for n in groups]
    weights = sel.fires.feature_weights
    assert weights is not None and list(weights) == names and len(names) < d
    chosen = sel.fires.selected_features
    assert chosen is not None and len(chosen) == 3 and set(chosen) <= set(names)
    mask = sel.mask
    assert mask is not None
    assert sorted(mask.nonzero().flatten().tolist()) == sorted(
        c for n in chosen for c in groups[n]
    )
    assert erics.feature_names == names
    ma, col_ma = erics.feature_partial_ma, erics.partial_ma
    assert ma is not None and col_ma is not None
    assert ma.shape == (len(names),) and col_ma.shape == (d,)
    assert {k for _, k in erics.partial_alerts} <= set(names)
