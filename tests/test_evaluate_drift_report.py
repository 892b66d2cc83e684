"""The pure parts of ``scripts/evaluate_drift_report.py``: the Agrawal functions against river's
generator, the truth sets of every case, and the scores (hand-computed counts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from river.datasets import synth
from torchstream.streams import data_path

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "evaluate_drift_report.py"
_SPEC = importlib.util.spec_from_file_location("evaluate_drift_report", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
ev = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = ev
_SPEC.loader.exec_module(ev)


def _river_rows(f: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rows = list(synth.Agrawal(classification_function=f, seed=7).take(n))
    X = np.array([[x[name] for name in ev.AGRAWAL] for x, _ in rows], dtype=float)
    return X, np.array([y for _, y in rows])


@pytest.mark.parametrize("f", sorted(ev.RELEVANT))
def test_agrawal_labels_match_rivers_generator(f):
    X, y = _river_rows(f, 2_000)
    np.testing.assert_array_equal(ev.agrawal_label(f, X), y)


@pytest.mark.parametrize("f", sorted(ev.RELEVANT))
def test_agrawal_label_reads_only_its_relevant_features(f):
    """Redrawing every other column leaves the labels as they are."""
    rng = np.random.default_rng(1)
    X, other = ev.agrawal_inputs(rng, 3_000), ev.agrawal_inputs(rng, 3_000)
    keep = [ev.AGRAWAL.index(name) for name in ev.RELEVANT[f]]
    mixed = other.copy()
    mixed[:, keep] = X[:, keep]
    np.testing.assert_array_equal(ev.agrawal_label(f, mixed), ev.agrawal_label(f, X))
    for j in keep:  # and each relevant column matters
        moved = X.copy()
        moved[:, j] = other[:, j]
        assert (ev.agrawal_label(f, moved) != ev.agrawal_label(f, X)).any()


def test_agrawal_inputs_follow_the_generator_definition():
    X = ev.agrawal_inputs(np.random.default_rng(0), 5_000)
    salary, commission, zipcode, hvalue = X[:, 0], X[:, 1], X[:, 5], X[:, 6]
    np.testing.assert_array_equal(commission == 0, salary >= 75e3)
    assert ((hvalue >= (8 - zipcode) * 50e3) & (hvalue <= (8 - zipcode) * 150e3)).all()
    scaled = ev._agrawal_scaled(X)
    assert scaled.min() >= -1.0 and scaled.max() <= 1.0


def test_switch_truth():
    gained, lost, both = ev.switch_truth(ev.RELEVANT[0], ev.RELEVANT[6])
    assert gained == {"salary", "commission", "loan"} and lost == {"age"} and both == set()
    gained, lost, both = ev.switch_truth(ev.RELEVANT[8], ev.RELEVANT[2])
    assert gained == {"age"} and lost == {"salary", "commission", "loan"}
    assert both == {"elevel"}


def test_case_truths():
    case = ev.agrawal_case(6, 8, 0)
    assert case.kind == "real" and case.gained == {"elevel"} and case.lost == set()
    assert case.both == {"salary", "commission", "loan"}
    control = ev.agrawal_case(2, 2, 0)
    assert control.kind == "none" and control.family == "control"
    assert not control.gained | control.lost
    for seed in range(4):
        h = ev.hyperplane_case(seed)
        assert len(h.gained) == len(h.lost) == len(h.both) == 2
        assert not (h.gained & h.lost) and not ((h.gained | h.lost) & h.both)
    sea = ev.sea_case(8.0, 9.5, 0)
    assert sea.both == {"x1", "x2"} and not sea.gained | sea.lost and sea.kind == "real"


def test_boundary_shift_keeps_the_score_and_moves_both_inputs():
    case = ev.boundary_case(0, c=1.0)
    X, r = case.X * 2.0, ev.DRIFT  # undo the fixed map
    assert case.kind == "virtual"
    assert X[r:, 0].mean() - X[:r, 0].mean() == pytest.approx(1.0, abs=0.05)
    assert X[r:, 1].mean() - X[:r, 1].mean() == pytest.approx(-1.0, abs=0.05)
    s_b, s_a = X[:r, 0] + X[:r, 1], X[r:, 0] + X[r:, 1]
    assert s_a.mean() == pytest.approx(s_b.mean(), abs=0.06)
    # the labels follow x0 + x1 > 0 on both sides, up to the 5 % label noise
    assert (case.y[:r] == (s_b > 0)).mean() == pytest.approx(0.95, abs=0.015)
    assert (case.y[r:] == (s_a > 0)).mean() == pytest.approx(0.95, abs=0.015)


def test_full_run_has_the_promised_cases():
    kinds = [c.kind for c in ev.cases(False)]
    counts = (kinds.count("real"), kinds.count("virtual"), kinds.count("none"))
    # with the electricity data: 3 more of each kind; 9 of the real drifts are mixed
    assert counts == ((47, 21, 15) if data_path("electricity.csv").exists() else (44, 18, 12))
    assert sum(c.family == "mixed" for c in ev.cases(False)) == 9


def test_mixed_cases_move_one_input_and_change_p_y_given_x():
    r = ev.DRIFT
    sea, agrawal, hyper = ev.mixed_cases(1)
    plain = ev.sea_case(8.0, 9.5, 1)
    # SEA: the labels and x1, x2 are those of the threshold change; x3 (irrelevant) moved
    assert np.array_equal(sea.y, plain.y) and np.array_equal(sea.X[:, :2], plain.X[:, :2])
    assert np.array_equal(sea.X[:r], plain.X[:r]) and sea.X[r:, 2].min() >= 0.0
    assert sea.kind == "real" and sea.shifted == {"x3"} and sea.both == {"x1", "x2"}
    # Agrawal: f6 before, f8 after, on the generator's rows with car + 10 after the row
    raw = ev.agrawal_inputs(np.random.default_rng(1), ev.ROWS)
    raw[r:, 4] += 10.0
    np.testing.assert_allclose(agrawal.X, ev._agrawal_scaled(raw))
    assert np.array_equal(agrawal.y[:r], ev.agrawal_label(6, raw[:r]))
    assert np.array_equal(agrawal.y[r:], ev.agrawal_label(8, raw[r:]))
    assert agrawal.shifted == {"car"} and agrawal.gained == {"elevel"}
    # hyperplane: the weight drift of hyperplane_case; the moved feature is inactive throughout
    base = ev.hyperplane_case(1)
    (idle,) = hyper.shifted
    assert idle not in base.gained | base.lost | base.both
    j = ev.HYPER_NAMES.index(idle)
    assert np.array_equal(hyper.y, base.y)
    np.testing.assert_allclose(hyper.X[r:, j] - base.X[r:, j], 1.0)
    assert np.array_equal(np.delete(hyper.X, j, 1), np.delete(base.X, j, 1))


def test_new_virtual_cases_keep_p_y_given_x():
    r = ev.DRIFT
    spread = ev.spread_case(0)
    (j,) = [int(f[1:]) for f in spread.shifted]
    X = spread.X
    assert abs(X[r:, j].mean() - X[:r, j].mean()) < 0.05  # the same mean ...
    assert X[r:, j].std() > 1.5 * X[:r, j].std()  # ... a wider spread
    assert (np.abs(X[r:, j]) >= 0.8).all()
    relevant = ev.relevant_virtual_case(0)
    (k,) = [int(f[1:]) for f in relevant.shifted]
    assert relevant.X[r:, k].min() >= 0.0 and relevant.X[:r, k].min() < -0.9
    age = ev.agrawal_age_case(0)
    raw_age = (age.X[:, 2] + 1) / 2 * 60 + 20
    assert raw_age[r:].max() < 50 and raw_age[:r].max() > 70
    # f0 labels every row from age alone on both sides (P(y|x) fixed)
    assert (age.y == ((raw_age < 40) | (raw_age >= 60))).all()


@pytest.mark.skipif(not data_path("electricity.csv").exists(), reason="no electricity.csv")
def test_electricity_cases():
    r = ev.DRIFT
    none, virtual, real = (ev.electricity_case(c, 0) for c in ("none", "virtual", "real"))
    assert np.array_equal(none.X[:r], virtual.X[:r]) and np.array_equal(none.y[:r], real.y[:r])
    # virtual: only high-demand rows after the row (their own labels); real: labels flipped
    assert np.median(virtual.X[r:, 3]) > np.median(none.X[:r, 3]) + 0.1
    flip = none.X[r:, 1] > 0
    assert (real.y[r:][flip] == 1 - none.y[r:][flip]).all()
    assert (real.y[r:][~flip] == none.y[r:][~flip]).all()


def _case(gained: set[str], lost: set[str], both: set[str]) -> object:
    X, y = np.zeros((1, 1)), np.zeros(1, dtype=int)
    return ev.Case("test", "test", 0, X, y, ("a",), frozenset(gained), frozenset(lost),
                   frozenset(both), "real")


def test_directed_score_counts_direction():
    case = _case({"a"}, {"b", "e"}, {"c"})
    # c is left out; d is wrong; b and a have the wrong direction; e is right
    counts = ev.score_directed({"c", "d", "b"}, {"a", "e"}, case)
    assert (counts.tp, counts.fp, counts.fn) == (1, 3, 2)
    assert counts.precision == pytest.approx(0.25) and counts.recall == pytest.approx(1 / 3)


def test_changed_score_ignores_direction():
    counts = ev.score_changed({"a", "b", "c", "d"}, _case({"a"}, {"b", "e"}, {"c"}))
    assert (counts.tp, counts.fp, counts.fn) == (2, 1, 1)


def test_raw_rule_uses_a_fraction_of_the_largest_before_importance():
    before = {"a": 0.5, "b": 0.125, "c": 0.0, "d": 0.25}
    after = {"a": 0.375, "b": 0.25, "c": 0.0625, "d": 0.1875}  # cut = 0.125 * 0.5 = 0.0625
    gained, lost = ev.raw_verdicts(before, after, 0.125)
    assert gained == {"b"} and lost == {"a"}  # c and d move by exactly the cut: not flagged


def test_erics_alerts_count_in_the_window_after_the_drift():
    alerts = [(319, 0), (320, 1), (639, 2), (640, 3), (400, "grouped")]
    names = ["w", "x", "y", "z"]
    assert ev.erics_changed(alerts, names, 25, 8_000, 16_000) == {"x", "y", "grouped"}


def test_adaptation_rows():
    correct = np.ones(5_000)
    correct[1_000:2_000] = 0.0
    assert ev.adaptation_rows(correct, 1_000, span=500, tol=0.0) == 1_000
    correct[2_000:2_010] = 0.0  # 10 misses in 500 rows: within tol = 0.02 from row 2,000 on
    assert ev.adaptation_rows(correct, 1_000, span=500, tol=0.02) == 1_000


def _outcome(kind: str, verdicts: dict[str, str], erics: set[str]) -> object:
    case = ev.Case("f", "f", 0, np.zeros((1, 1)), np.zeros(1, dtype=int), ("a", "b"),
                   frozenset(), frozenset(), frozenset(), kind)
    changes = [{"feature": f, "verdict": v, "importance_before": 0.5,
                "importance_after": 0.5} for f, v in verdicts.items()]
    report = {"kind": "virtual" if kind == "virtual" else "none", "changes": changes}
    return ev.Outcome(case, report, frozenset(erics), 0, 0.0, 0.0)


def test_summary_of_virtual_drifts_and_controls():
    outcomes = [_outcome("virtual", {"a": "unchanged", "b": "unchanged"}, {"a"}),
                _outcome("virtual", {"a": "unchanged", "b": "unchanged"}, set()),
                _outcome("none", {"a": "unchanged", "b": "unchanged"}, {"b"})]
    s = ev.summarize(outcomes)
    assert s["reporter"]["virtual_as_real"] == 0.0 and s["reporter"]["virtual_recognised"] == 1
    assert s["reporter"]["control_false"] == 0.0
    assert s["ERICS partial"]["virtual_as_real"] == 0.5
    assert s["ERICS partial"]["control_false"] == 1.0
    assert s["raw iPFI"]["virtual_as_real"] == 0.0
